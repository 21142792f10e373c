"""Plain Pods that admitter queued (`unlabelledWork`): the Job adapter's twin for Pods, as thin.

The Pod webhook gated and labelled them; here each gets a Workload of one pod (made by the
same translation as a Job's), is ungated once admitted, pinned to the node its admission
counted it on (Kubernetes lets a gated Pod's node affinity gain terms: KEP-3838), and stopped
by deleting it when evicted (a Pod cannot be suspended; Kueue stops Pods the same way). Its
Workload is owned by the Pod, so deleting the Pod deletes the Workload.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from enum import Enum
from typing import Any

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION, QUEUE_LABEL
from admitter.api.workload import CONDITION_FINISHED, Reason
from admitter.controller.cache import Caches
from admitter.jobs.interface import pin_to_domain
from admitter.jobs.workloads import job_owner, pod_workload_name
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.informer import Key, StoreWatcher, key_of
from admitter.kube.objects import (
    ADMISSION_GATE,
    TERMINAL_POD_PHASES,
    Obj,
    is_gated,
    is_true,
    pin_to_host,
)


class PodStep(Enum):
    NONE = "none"
    FINISH = "finish-pod"
    """The Pod ended: mark its Workload Finished, releasing the quota."""
    START = "start-pod"
    """Admitted, still gated: pin it to its node and lift the gate."""
    STOP = "stop-pod"
    """Running without an admitted Workload (evicted): delete it."""


def is_queued_pod(pod: Obj) -> bool:
    """A Pod admitter manages: labelled with a queue, no Job owner, and gated by admitter or
    started by it. A label alone is not enough: a Pod never gated was never queued."""
    meta = pod["metadata"]
    return (QUEUE_LABEL in (meta.get("labels") or {}) and job_owner(pod) is None
            and (is_gated(pod) or ADMITTED_WORKLOAD_ANNOTATION in (meta.get("annotations") or {})))


def wakes_when_idle(event: str, pod: Obj) -> bool:
    """A queued Pod arriving (its Workload is to be made) or ending (its quota is released)
    is worth a pass at once; other Pod changes wait for the periodic one."""
    ended = (pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES
    return is_queued_pod(pod) and (event == "ADDED" or ended)


def pod_step(pod: Obj, wl: Obj) -> PodStep:
    """The one write that brings a queued Pod and its Workload together, if any."""
    if (pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES:
        return PodStep.NONE if is_true(wl, CONDITION_FINISHED) else PodStep.FINISH
    if is_true(wl, CONDITION_FINISHED) or pod["metadata"].get("deletionTimestamp"):
        return PodStep.NONE
    if (wl.get("status") or {}).get("admission"):
        return PodStep.START if is_gated(pod) else PodStep.NONE
    return PodStep.NONE if is_gated(pod) else PodStep.STOP


def started_pod_patch(pod: Obj, wl: Obj, place_pods: bool = True) -> Obj:
    """A merge patch lifting admitter's gate, marking the Pod admitted and pinning it to the
    admitted domain, as a Job's pods are, and with `place_pods` to the node its admission
    counted it on, as a Job's pods are then too (docs/placement.md); on the version read, so
    a Pod changed meanwhile is looked at again. Not to the node otherwise: a Job admitted in
    the same cycle is then pinned only to its domain, so kube-scheduler may bind its pods to
    that node first, and a Pod held to it would stay Pending for good (required affinity
    cannot be relaxed)."""
    admission = wl["status"]["admission"]
    affinity = pin_to_domain(pod["spec"].get("affinity"), admission.get("topologyDomain") or {})
    hosts = [hint["node"] for hint in admission.get("nodeHints") or ()]
    if place_pods and hosts:
        affinity = pin_to_host(affinity, hosts[0])
    gates = [g for g in pod["spec"].get("schedulingGates") or () if g.get("name") != ADMISSION_GATE]
    meta = pod["metadata"]
    return {"metadata": {"resourceVersion": meta["resourceVersion"],
                         "annotations": {ADMITTED_WORKLOAD_ANNOTATION: wl["metadata"]["name"]}},
            "spec": {"schedulingGates": gates, "affinity": affinity}}


Finish = Callable[[Obj, Obj | None, str, str, float], Coroutine[Any, Any, None]]
Isolated = Callable[[str, Obj, Coroutine[Any, Any, None]], Coroutine[Any, Any, bool]]


class PlainPods:
    """The queued Pods, indexed beside the Pod informer so a pass walks only those."""

    def __init__(self, client: Kube, caches: Caches, place_pods: bool = True) -> None:
        self.kube = client
        self.caches = caches
        self.place_pods = place_pods
        self.queued: set[Key] = set()
        caches.pods.watchers.append(StoreWatcher(self._changed, self._replaced))

    def _changed(self, old: Obj | None, new: Obj | None) -> None:
        if new is not None and is_queued_pod(new):
            self.queued.add(key_of(new))
        elif (gone := new if new is not None else old) is not None:
            self.queued.discard(key_of(gone))

    def _replaced(self, pods: Iterable[Obj]) -> None:
        self.queued = {key_of(pod) for pod in pods if is_queued_pod(pod)}

    def pairs(self) -> list[tuple[Obj, Obj | None]]:
        """Each queued Pod with its Workload, if it has one yet."""
        found = []
        for key in sorted(self.queued):
            pod = self.caches.pods.get(*key)
            if pod is not None:
                found.append((pod, self.caches.workloads.get(key[0], pod_workload_name(pod))))
        return found

    def lacking_workloads(self) -> list[Obj]:
        """Gated Pods whose Workload is still to be made."""
        return [pod for pod, wl in self.pairs() if wl is None and is_gated(pod)
                and (pod.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES]

    def converge(self, now: float, finish: Finish,
                 isolated: Isolated) -> list[Coroutine[Any, Any, bool]]:
        """The writes that bring every queued Pod and its Workload together."""
        writes = []
        for pod, wl in self.pairs():
            if wl is None:
                continue
            step = pod_step(pod, wl)
            if step is PodStep.FINISH:
                succeeded = pod["status"]["phase"] == "Succeeded"
                reason = Reason.SUCCEEDED if succeeded else Reason.FAILED
                message = "the Pod succeeded" if succeeded else "the Pod failed"
                writes.append(isolated(step.value, pod, finish(wl, None, reason, message, now)))
            elif step is PodStep.START:
                writes.append(isolated(step.value, pod, self.start(pod, wl)))
            elif step is PodStep.STOP:
                writes.append(isolated(step.value, pod, self.stop(pod)))
        return writes

    async def start_owner(self, wl: Obj, isolated: Isolated) -> None:
        """Start the Pod that owns a Workload just admitted, if a Pod owns it."""
        pod = self.caches.pod_of(wl)
        if pod is not None:
            await isolated(PodStep.START.value, pod, self.start(pod, wl))

    async def stop_owner(self, wl: Obj) -> None:
        """Stop the Pod that owns a Workload just evicted, if a Pod owns it."""
        pod = self.caches.pod_of(wl)
        if pod is not None:
            await self.stop(pod)

    async def start(self, pod: Obj, wl: Obj) -> None:
        meta = pod["metadata"]
        patch = started_pod_patch(pod, wl, self.place_pods)
        started = await self.kube.patch(kube.PODS, meta["name"], patch,
                                        meta["namespace"])
        self.caches.pods.observe(started)

    async def stop(self, pod: Obj) -> None:
        """Delete this very Pod (uid as read): its quota is already released."""
        meta = pod["metadata"]
        await self.kube.delete(kube.PODS, meta["name"], meta["namespace"],
                               {"preconditions": {"uid": meta["uid"]}})
