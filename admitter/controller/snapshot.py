"""The decision core's snapshot, built from the informer caches at one moment."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from pydantic import ValidationError

from admitter.api.clusterqueue import ClusterQueueSpec
from admitter.api.convert import core_queue
from admitter.api.settings import Settings
from admitter.controller.cache import Caches
from admitter.controller.kube import Obj
from admitter.controller.translate import core_node, core_workload, is_true, parse_time
from admitter.core.decisions import CycleSettings, Snapshot
from admitter.core.model import FairShareSettings, Phase, Queue, UsageRecord, Workload

log = logging.getLogger(__name__)
HOUR = 3600.0


@dataclass(frozen=True)
class View:
    """A snapshot plus the objects behind it, so decisions can be applied to them."""

    snapshot: Snapshot
    workloads: dict[str, Obj]
    """Core workload key (`namespace/name`) → Workload object."""
    cluster_queues: dict[str, Obj]


def cycle_settings(settings: Settings) -> CycleSettings:
    fair = settings.fair_share
    return CycleSettings(
        fair_share=FairShareSettings(fair.window, fair.half_life, fair.k_value),
        starvation_bound=settings.starvation_bound,
        pods_ready_timeout=settings.pods_ready_timeout,
    )


def build_view(caches: Caches, settings: Settings, now: float) -> View:
    cluster_queues = {cq["metadata"]["name"]: cq for cq in caches.cluster_queues.items()}
    queues = core_queues(cluster_queues)
    foreign = caches.foreign_usage()
    nodes = [core_node(n, foreign.get(n["metadata"]["name"], {})) for n in caches.nodes.items()]
    bound = caches.bound_pods()
    objects: dict[str, Obj] = {}
    workloads: list[Workload] = []
    for wl in caches.workloads.items():
        if is_true(wl, "Finished") or caches.job_of(wl) is None:
            continue  # done, or orphaned: its Job is gone and the garbage collector follows
        meta = wl["metadata"]
        cq = caches.cluster_queue_of(meta["namespace"], wl["spec"]["queueName"]) or ""
        core = _where_bound(core_workload(wl, cq, _pods_ready(caches, wl)), caches, wl, bound)
        objects[core.key] = wl
        workloads.append(core)
    usage = [record for name, cq in cluster_queues.items() for record in usage_records(name, cq)]
    snapshot = Snapshot(now, nodes, tuple(caches.topology_levels() or ()), queues, workloads,
                        usage, cycle_settings(settings))
    return View(snapshot, objects, cluster_queues)


def core_queues(cluster_queues: dict[str, Obj]) -> list[Queue]:
    """ClusterQueues in creation order; one with an invalid spec is left out (logged)."""
    ordered = sorted(cluster_queues.values(),
                     key=lambda cq: (cq["metadata"].get("creationTimestamp", ""),
                                     cq["metadata"]["name"]))
    queues = []
    for order, cq in enumerate(ordered):
        try:
            spec = ClusterQueueSpec.model_validate(cq.get("spec") or {})
        except ValidationError as error:
            log.warning("ClusterQueue %s ignored: %s", cq["metadata"]["name"], error)
            continue
        queues.append(core_queue(cq["metadata"]["name"], spec, order))
    return queues


def usage_records(name: str, cq: Obj) -> list[UsageRecord]:
    """The queue's hourly usage buckets as records the core integrates over its window."""
    records = []
    for bucket in (cq.get("status") or {}).get("usage", []):
        start = parse_time(bucket["start"]) or 0.0
        records.append(UsageRecord(name, start, start + HOUR, bucket["gpuSeconds"] / HOUR))
    return records


def _where_bound(workload: Workload, caches: Caches, wl: Obj,
                 bound: dict[tuple[str, str], dict[str, int]]) -> Workload:
    """Once every pod of a one-pod-set workload is bound, count it where kube-scheduler put it
    rather than where the admission assumed (they differ when no topology pins the pods)."""
    job = caches.job_of(wl)
    if workload.phase is not Phase.ADMITTED or job is None or len(workload.pod_sets) != 1:
        return workload
    counts = bound.get((job["metadata"]["namespace"], job["metadata"]["name"]), {})
    if sum(counts.values()) != workload.pod_sets[0].count:
        return workload
    return replace(workload, placement=counts, pod_set_placements=(counts,))


def _pods_ready(caches: Caches, wl: Obj) -> bool:
    """An admitted gang is ready once the Job reports all its pods ready (or done)."""
    if not (wl.get("status") or {}).get("admission"):
        return True
    job = caches.job_of(wl)
    if job is None:
        return True
    status = job.get("status") or {}
    expected = sum(p["count"] for p in wl["spec"]["podSets"])
    return int(status.get("ready", 0)) + int(status.get("succeeded", 0)) >= expected
