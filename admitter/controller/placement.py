"""Each pod of an admitted workload on the node its admission counted it on.

The placement webhook holds every pod of a started job with the placement gate
(`PLACEMENT_GATE`); here each held pod whose workload is admitted gets one patch: the gate
lifted and its required node affinity narrowed to its host (what Kubernetes lets a gated pod
gain), the host a free slot of the admission's node hints (`core.pod_hosts`). kube-scheduler
still binds it, and the device plugin still allocates. A pod whose workload is not admitted
(pending, evicted, being evicted) is left gated: it is never bound, and goes when its job is
suspended. A pod whose only free slots are on hosts that are down (deleted, cordoned, tainted
unreachable) strands its workload, which is evicted and requeued at once, to be decided anew on the
nodes as they are (docs/placement.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from admitter.controller.cache import Caches
from admitter.controller.pod_index import JobKey, jobs_of_pod
from admitter.controller.unreadable import UNREADABLE_ERRORS
from admitter.core.pod_hosts import HostAssignment, WaitingPod, assign_hosts
from admitter.jobs.workloads import job_owner, pod_set_of, workload_name
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.informer import Key, StoreWatcher, key_of
from admitter.kube.objects import (
    PLACEMENT_GATE,
    TERMINAL_POD_PHASES,
    Obj,
    evicting,
    is_gated,
    node_is_up,
    pin_to_host,
    pinned_host,
    without_gate,
)


def placed_pod_patch(pod: Obj, host: str | None) -> Obj:
    """A merge patch lifting the placement gate and pinning the pod to `host` (None: left
    in its domain), on the version read: a pod changed meanwhile is looked at again."""
    spec: Obj = {"schedulingGates": without_gate(pod, PLACEMENT_GATE)}
    if host is not None:
        spec["affinity"] = pin_to_host(pod["spec"].get("affinity"), host)
    return {"metadata": {"resourceVersion": pod["metadata"]["resourceVersion"]}, "spec": spec}


@dataclass(frozen=True)
class Stranded:
    """An admitted workload a pod of which can go only to hosts that are down."""

    workload: Obj
    job: Obj
    hosts: tuple[str, ...]
    """The hosts down that hold its pods' free slots."""


@dataclass
class Placing:
    """What one pass does for the held pods: a patch per pod, and the workloads to evict."""

    patches: list[tuple[Obj, Obj]]
    """(pod, its patch)."""
    stranded: list[Stranded]


class PodPlacer:
    """The pods admitter places, indexed beside the Pod informer by job, so a pass walks only
    the jobs that have pods held."""

    def __init__(self, client: Kube, caches: Caches) -> None:
        self.kube = client
        self.caches = caches
        self.pods_of: dict[JobKey, set[Key]] = {}
        """Pods with a pod set (`pod_set_of`), by each job they may belong to."""
        self.held: dict[JobKey, set[Key]] = {}
        """Those held by the placement gate."""
        self._jobs: dict[Key, tuple[JobKey, ...]] = {}
        caches.pods.watchers.append(StoreWatcher(self._changed, self._replaced))

    def _changed(self, old: Obj | None, new: Obj | None) -> None:
        gone = new if new is not None else old
        if gone is not None:
            self._forget(key_of(gone))
        if new is not None:
            self._index(new)

    def _replaced(self, pods: Iterable[Obj]) -> None:
        self.pods_of, self.held, self._jobs = {}, {}, {}
        for pod in pods:
            self._index(pod)

    def _index(self, pod: Obj) -> None:
        # runs inside the pod informer, on any tenant's pod: an unreadable one is skipped
        try:
            if pod_set_of(pod) is None:
                return
            jobs = jobs_of_pod(pod, job_owner(pod))
        except UNREADABLE_ERRORS:
            return
        key = key_of(pod)
        self._jobs[key] = jobs
        for job in jobs:
            self.pods_of.setdefault(job, set()).add(key)
            if is_gated(pod, PLACEMENT_GATE):
                self.held.setdefault(job, set()).add(key)

    def _forget(self, key: Key) -> None:
        for job in self._jobs.pop(key, ()):
            for index in (self.pods_of, self.held):
                keys = index.get(job)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[job]

    def wakes(self, event: str, pod: Obj) -> bool:
        """A held pod arriving or changing (a patch that lost to kube-scheduler's status
        write is retried on the version after it) is worth a pass at once; so is a placed pod
        going or ending while pods wait (it frees the slot a pod of its job may wait for)."""
        if event != "DELETED" and is_gated(pod, PLACEMENT_GATE):
            return True
        ended = event == "DELETED" or (pod.get("status") or {}).get("phase") in (
            TERMINAL_POD_PHASES)
        if not ended or not self.held:
            return False
        try:
            return pod_set_of(pod) is not None
        except UNREADABLE_ERRORS:
            return False

    def place(self, busy: Callable[[str, str], bool]) -> Placing:
        """The patches that place every held pod of an admitted workload that can be placed,
        and the workloads stranded by a host that is down; a workload `busy` (namespace,
        name: its admission still being written) is left for a later pass."""
        up = {node["metadata"]["name"] for node in self.caches.nodes.items() if node_is_up(node)}
        placing = Placing([], [])
        for job_key in sorted(self.held):
            job = self.caches.job(job_key)
            if job is None or job_owner(job) is not None:
                continue  # not a queued job: a child's pods count for its parent
            namespace, name = job_key[1], workload_name(job)
            wl = self.caches.workloads.get(namespace, name)
            admission = ((wl or {}).get("status") or {}).get("admission")
            if wl is None or not admission or evicting(wl) or busy(namespace, name):
                continue
            self._place_job(job, wl, admission, job_key, up, placing)
        return placing

    def _place_job(self, job: Obj, wl: Obj, admission: Obj, job_key: JobKey, up: set[str],
                   placing: Placing) -> None:
        hinted: dict[str, dict[str, int]] = {}
        for hint in admission.get("nodeHints") or ():
            hinted.setdefault(hint["podSet"], {})[hint["node"]] = int(hint["count"])
        placed: dict[str, dict[str, int]] = {}
        waiting, pods = [], {}
        for key in sorted(self.pods_of.get(job_key, ())):
            pod = self.caches.pods.get(*key)
            if pod is None or (pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES:
                continue
            pod_set = pod_set_of(pod)
            assert pod_set is not None  # indexed for having one
            if is_gated(pod, PLACEMENT_GATE):
                if not pod["metadata"].get("deletionTimestamp"):
                    pods[f"{key[0]}/{key[1]}"] = pod
                    waiting.append(WaitingPod(f"{key[0]}/{key[1]}", pod_set))
                continue
            host = pod["spec"].get("nodeName") or pinned_host(pod)
            if host:
                counts = placed.setdefault(pod_set, {})
                counts[host] = counts.get(host, 0) + 1
        found: HostAssignment = assign_hosts(hinted, placed, waiting, up)
        if found.stranded:  # evicted instead: none of its pods is placed
            down = sorted({host for counts in hinted.values() for host in counts} - up)
            placing.stranded.append(Stranded(wl, job, tuple(down)))
            return
        for pod_key, host in found.hosts.items():
            placing.patches.append((pods[pod_key], placed_pod_patch(pods[pod_key], host)))
        for pod_key in found.anywhere:
            placing.patches.append((pods[pod_key], placed_pod_patch(pods[pod_key], None)))

    async def patch(self, pod: Obj, patch: Obj) -> None:
        meta = pod["metadata"]
        placed = await self.kube.patch(kube.PODS, meta["name"], patch, meta["namespace"])
        self.caches.pods.observe(placed)
