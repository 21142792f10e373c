"""Running pods summed as every pass needs them, kept current change by change.

A pass needs (a) the pods of admitter's Jobs per node, to count admitted workloads where their
pods run, and (b) per node the requests of running pods admitter does not manage, which the
node model subtracts. Summing both walked every pod on every pass (a third of building a
4,000-Job view); this index follows the pod and Job informers instead, so a pass reads sums
that cost in proportion to what changed. A pod counts while it is bound to a node and not
terminated; it is admitter's while a job with the queue label owns it (the job informers hold
exactly those): its owning Job, or the job its kind's label names (`LabelsPods`, a JobSet's
pods), and moves between the two sums when such a job appears or goes. A plain Pod
admitter started (`unlabelledWork`, marked with its Workload) is kept apart, in `started`:
while that Workload is admitted its admission counts the Pod, else it is foreign usage
(`Caches.foreign_usage`), so a forged mark hides no Pod.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, TypeVar

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION
from admitter.api.quantity import to_base_units
from admitter.controller.unreadable import UNREADABLE_ERRORS, Unreadable
from admitter.jobs.registry import POD_LABELS
from admitter.jobs.workloads import job_owner
from admitter.kube.informer import Key, StoreWatcher, key_of
from admitter.kube.objects import TERMINAL_POD_PHASES, Obj, pod_requests

JobKey = tuple[str, str, str]
"""(kind, namespace, name) of a job."""


class _Running(NamedTuple):
    """What one counted pod adds: its node, its job if any, and its requests in base
    units."""

    node: str
    jobs: tuple[JobKey, ...]
    """The jobs it may count for, the first managed one taking it (a TrainJob's pods carry
    the same label as its JobSet's)."""
    requests: dict[str, int]


class StartedPod(NamedTuple):
    """A plain Pod admitter started: its node, requests, and the Workload its mark names."""

    node: str
    requests: dict[str, int]
    workload: str
    uid: str


class PodIndex:
    """`bound`: job → pods per node, admitter's jobs only; `foreign`: node →
    requests of every other running pod. Both are read, never written, by passes."""

    def __init__(self, unreadable: Unreadable | None = None) -> None:
        self.unreadable = unreadable or Unreadable()
        """Pods whose requests cannot be read: not counted (kube-scheduler would not place
        them either), reported by the passes."""
        self.bound: dict[JobKey, dict[str, int]] = {}
        self.foreign: dict[str, dict[str, int]] = {}
        self._managed: set[JobKey] = set()
        self._running: dict[Key, _Running] = {}
        self._by_job: dict[JobKey, set[Key]] = {}
        self.started: dict[Key, StartedPod] = {}
        """Counted pods per owning Job, managed or not, to move when the Job comes or goes."""
        self.pods = StoreWatcher(self._pod_changed, self._pods_replaced)

    def managed(self, pod: Obj) -> bool:
        """Whether a queued job owns the pod, bound or not: its admission counts what the
        pod holds."""
        try:
            return any(job in self._managed for job in jobs_of_pod(pod, job_owner(pod)))
        except UNREADABLE_ERRORS:
            return False

    def jobs(self, kind: str) -> StoreWatcher:
        """The watcher of the informer of one job kind."""
        return StoreWatcher(lambda old, new: self._job_changed(kind, old, new),
                            lambda jobs: self._jobs_replaced(kind, jobs))

    # Pods -------------------------------------------------------------------------------

    def _pod_changed(self, old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            self._forget(key_of(new))
            self._count(key_of(new), new)
        elif old is not None:
            self._forget(key_of(old))

    def _pods_replaced(self, pods: Iterable[Obj]) -> None:
        for key in list(self._running):
            self._forget(key)
        for pod in pods:
            self._count(key_of(pod), pod)

    def _count(self, key: Key, pod: Obj) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES:
            return
        # Hazard: this runs inside the pod informer, on any tenant's pod; an error raised
        # here would end the informer, so a pod that cannot be read is only reported.
        try:
            meta = pod["metadata"]
            owner = job_owner(pod)
            jobs = jobs_of_pod(pod, owner)
            requests = {r: to_base_units(r, a) for r, a in pod_requests(pod["spec"]).items()}
            mark = (meta.get("annotations") or {}).get(ADMITTED_WORKLOAD_ANNOTATION)
        except UNREADABLE_ERRORS as error:
            self.unreadable.add("Pod", pod, error)
            return
        if owner is None and mark is not None:
            self.started[key] = StartedPod(node, requests, str(mark), str(meta.get("uid")))
            return
        running = self._running[key] = _Running(node, jobs, requests)
        for job in jobs:
            self._by_job.setdefault(job, set()).add(key)
        self._apply(running, 1)

    def _forget(self, key: Key) -> None:
        self.unreadable.discard("Pod", key)
        self.started.pop(key, None)
        running = self._running.pop(key, None)
        if running is None:
            return
        for job in running.jobs:
            pods = self._by_job[job]
            pods.discard(key)
            if not pods:
                del self._by_job[job]
        self._apply(running, -1)

    def _apply(self, running: _Running, sign: int) -> None:
        job = next((job for job in running.jobs if job in self._managed), None)
        if job is not None:
            _add(self.bound, job, {running.node: 1}, sign)
        else:
            _add(self.foreign, running.node, running.requests, sign)

    # Jobs -------------------------------------------------------------------------------

    def _job_changed(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        if old is None and new is not None:
            self._manage((kind, *key_of(new)), _is_queued(new))
        elif new is None and old is not None:
            self._manage((kind, *key_of(old)), False)
        # an update of a job already known moves nothing

    def _jobs_replaced(self, kind: str, jobs: Iterable[Obj]) -> None:
        keep = {(kind, *key_of(job)) for job in jobs if _is_queued(job)}
        for job in {key for key in self._managed if key[0] == kind} - keep:
            self._manage(job, False)
        for job in keep - self._managed:
            self._manage(job, True)

    def _manage(self, job: JobKey, managed: bool) -> None:
        counted = [self._running[key] for key in self._by_job.get(job, ())]
        for running in counted:
            self._apply(running, -1)
        if managed:
            self._managed.add(job)
        else:
            self._managed.discard(job)
        for running in counted:
            self._apply(running, 1)


def jobs_of_pod(pod: Obj, owner: Obj | None) -> tuple[JobKey, ...]:
    """The jobs a pod may count for: those its kinds' labels name, else its owning Job."""
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    found = tuple((kind, meta["namespace"], str(labels[label]))
                  for kind, label in POD_LABELS if label in labels)
    if found or owner is None:
        return found
    return (str(owner["kind"]), meta["namespace"], str(owner["name"])),


def _is_queued(job: Obj) -> bool:
    """Whether a job is queued itself, not a child of a queued job (a TrainJob's JobSet, a
    JobSet's Job), whose pods count for the parent."""
    try:
        return job_owner(job) is None
    except UNREADABLE_ERRORS:
        return False


_K = TypeVar("_K")


def _add(sums: dict[_K, dict[str, int]], key: _K, amounts: dict[str, int], sign: int) -> None:
    """Add (or take away) `amounts` under `key`, dropping what reaches zero, so the sums
    equal a fresh count exactly."""
    target = sums.setdefault(key, {})
    for name, amount in amounts.items():
        total = target.get(name, 0) + sign * amount
        if total:
            target[name] = total
        else:
            target.pop(name, None)
    if not target:
        del sums[key]
