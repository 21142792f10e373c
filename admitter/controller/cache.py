"""Every kind the controller reads, kept by informers, and the lookups built on them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from admitter.api.contract import QUEUE_LABEL
from admitter.api.quantity import to_base_units
from admitter.controller import kube
from admitter.controller.informer import Informer
from admitter.controller.kube import Kube, Obj
from admitter.controller.translate import pod_requests

_TERMINAL_POD_PHASES = ("Succeeded", "Failed")


@dataclass
class Caches:
    nodes: Informer
    pods: Informer
    jobs: Informer
    workloads: Informer
    cluster_queues: Informer
    local_queues: Informer
    topologies: Informer
    priority_classes: Informer

    @classmethod
    def create(cls, client: Kube, on_change: Callable[[str, Obj], None]) -> Caches:
        def informer(kind: kube.Kind, query: dict[str, str] | None = None) -> Informer:
            return Informer(client, kind, on_change, query)

        return cls(
            nodes=informer(kube.NODES),
            pods=informer(kube.PODS),
            jobs=informer(kube.JOBS, {"labelSelector": QUEUE_LABEL}),
            workloads=informer(kube.WORKLOADS),
            cluster_queues=informer(kube.CLUSTER_QUEUES),
            local_queues=informer(kube.LOCAL_QUEUES),
            topologies=informer(kube.TOPOLOGIES),
            priority_classes=informer(kube.PRIORITY_CLASSES),
        )

    def all(self) -> list[Informer]:
        return [self.nodes, self.pods, self.jobs, self.workloads, self.cluster_queues,
                self.local_queues, self.topologies, self.priority_classes]

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.all()))

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.all())

    # Lookups -----------------------------------------------------------------------------

    def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        lq = self.local_queues.get(namespace, local_queue)
        return None if lq is None else lq["spec"].get("clusterQueue")

    def priority_of(self, class_name: str | None) -> int:
        if not class_name:
            return 0
        found = self.priority_classes.get("", class_name)
        return int(found.get("value", 0)) if found else 0

    def topology_levels(self) -> list[str] | None:
        """Levels of the cluster's Topology (the first by name), or None when there is none."""
        topologies = sorted(self.topologies.items(), key=lambda t: t["metadata"]["name"])
        if not topologies:
            return None
        return [level["nodeLabel"] for level in topologies[0]["spec"]["levels"]]

    def job_of(self, workload: Obj) -> Obj | None:
        """The Job that owns the Workload, if the cache holds it (the same Job: a Job
        recreated under the same name owns a Workload of its own)."""
        owner = job_owner(workload)
        if owner is None:
            return None
        job = self.jobs.get(workload["metadata"]["namespace"], owner["name"])
        if job is None or owner.get("uid") not in (None, job["metadata"].get("uid")):
            return None
        return job

    def bound_pods(self) -> dict[tuple[str, str], dict[str, int]]:
        """(namespace, job name) → pods per node, for admitter's Jobs' running pods."""
        bound: dict[tuple[str, str], dict[str, int]] = {}
        for pod in self.pods.items():
            node = (pod.get("spec") or {}).get("nodeName")
            owner = _job_owner(pod)
            if not node or owner is None or _terminal(pod):
                continue
            key = (pod["metadata"]["namespace"], owner)
            if key in self.jobs.store:
                counts = bound.setdefault(key, {})
                counts[node] = counts.get(node, 0) + 1
        return bound

    def foreign_usage(self) -> dict[str, dict[str, int]]:
        """Per node, the requests of running pods that admitter does not manage; admitted
        workloads are counted through their admission instead."""
        managed = {(ns, name) for ns, name in self.jobs.store}
        used: dict[str, dict[str, int]] = {}
        for pod in self.pods.items():
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or _terminal(pod):
                continue
            owner = _job_owner(pod)
            if owner is not None and (pod["metadata"]["namespace"], owner) in managed:
                continue
            bucket = used.setdefault(node, {})
            for resource, amount in pod_requests(pod["spec"]).items():
                bucket[resource] = bucket.get(resource, 0) + to_base_units(resource, amount)
        return used


def _terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in _TERMINAL_POD_PHASES


def job_owner(obj: Obj) -> Obj | None:
    """The ownerReference naming the object's Job, if it has one."""
    for owner in obj["metadata"].get("ownerReferences", ()):
        if owner.get("kind") == "Job":
            found: Obj = owner
            return found
    return None


def _job_owner(pod: Obj) -> str | None:
    owner = job_owner(pod)
    return None if owner is None else str(owner["name"])
