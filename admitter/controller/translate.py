"""Pure translations between Kubernetes JSON and admitter's values: Job → Workload object,
Workload/Node/ClusterQueue objects → the decision core's snapshot values."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from admitter.api.contract import QUEUE_LABEL, JobContract
from admitter.api.duration import parse_duration
from admitter.api.quantity import format_quantity, from_base_units, kube_base_units
from admitter.core.model import Node, Phase, PodSet, Taint, TopologyRequest, Workload

Obj = dict[str, Any]
MAIN_POD_SET = "main"
JOB_NAME_LABEL = "admitter.dev/job-name"
"""On every Workload admitter made for a Job: one that has it but no Job owner was orphaned
(its Job deleted with `--cascade=orphan`)."""


def workload_name(job: Obj) -> str:
    """Stable and unique per Job object: `job-<name>-<5 hex of uid>`, at most 63 chars."""
    meta = job["metadata"]
    digest = hashlib.sha256(meta["uid"].encode()).hexdigest()[:5]
    return f"job-{meta['name'][:50]}-{digest}"


def job_owner(obj: Obj) -> Obj | None:
    """The ownerReference naming the object's Job, if it has one."""
    for owner in obj["metadata"].get("ownerReferences", ()):
        if owner.get("kind") == "Job":
            found: Obj = owner
            return found
    return None


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests of one pod: containers summed, at least the largest init container
    (as kube-scheduler counts them); a limit stands in for a missing request."""
    total: dict[str, Decimal] = {}
    for container in pod_spec.get("containers", []):
        for resource, amount in _container_requests(container).items():
            total[resource] = total.get(resource, Decimal(0)) + amount
    for container in pod_spec.get("initContainers", []):
        for resource, amount in _container_requests(container).items():
            total[resource] = max(total.get(resource, Decimal(0)), amount)
    return total


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    # Each container's amount rounded up as kube-scheduler counts it (a `500m` memory
    # request is 1 byte): the API server accepts what admitter's own notation refuses.
    return {name: from_base_units(name, kube_base_units(name, value))
            for name, value in merged.items()}


def pod_count(job_spec: Mapping[str, Any]) -> int:
    """Pods a Job runs at once, which its Workload is charged for: its parallelism, at most
    its completions, at least one."""
    parallelism = job_spec.get("parallelism", 1)
    completions = job_spec.get("completions")
    count = min(parallelism, completions) if completions is not None else parallelism
    return max(int(count), 1)


def workload_for_job(job: Obj, contract: JobContract, priority: int) -> Obj:
    """The Workload object admitter keeps for a Job, owned by it."""
    meta = job["metadata"]
    spec = job["spec"]
    template = spec["template"]
    count = pod_count(spec)
    requests = {r: format_quantity(a) for r, a in pod_requests(template["spec"]).items()}
    topology = {k: v for k, v in (("required", contract.topology_required),
                                  ("preferred", contract.topology_preferred)) if v}
    workload_spec: Obj = {
        "queueName": meta["labels"][QUEUE_LABEL],
        "podSets": [{"name": MAIN_POD_SET, "count": count, "requests": requests}],
        "priority": priority,
        "minRuntime": f"{contract.min_runtime:g}s",
        "resumable": contract.resumable,
    }
    if template["spec"].get("priorityClassName"):
        workload_spec["priorityClassName"] = template["spec"]["priorityClassName"]
    if topology:
        workload_spec["topology"] = topology
    return {
        "apiVersion": "admitter.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(job),
            "namespace": meta["namespace"],
            "labels": {JOB_NAME_LABEL: meta["name"][:63]},
            "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": workload_spec,
    }


@lru_cache(maxsize=1 << 16)
def parse_time(text: str | None) -> float | None:
    """Seconds since the epoch of an API timestamp; cached, since every pass reads the
    creation time of every pending Workload."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def format_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(obj: Obj, kind: str) -> Obj | None:
    """The object's condition of that type, as stored (not to be modified)."""
    status = obj.get("status")
    for item in status.get("conditions", ()) if status else ():
        if item.get("type") == kind:
            found: Obj = item
            return found
    return None


def is_true(obj: Obj, kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def core_workload(wl: Obj, cluster_queue: str, pods_ready: bool) -> Workload:
    """A Workload object as the core sees it; `cluster_queue` comes from its LocalQueue."""
    meta, spec = wl["metadata"], wl["spec"]
    status = wl.get("status") or {}
    admission = status.get("admission")
    pod_sets = tuple(
        PodSet(p["name"], p["count"],
               {r: kube_base_units(r, a) for r, a in p.get("requests", {}).items()})
        for p in spec["podSets"]
    )
    placements: list[dict[str, int]] = [{} for _ in pod_sets]
    names = [p.name for p in pod_sets]
    for hint in (admission or {}).get("nodeHints", []):
        if hint["podSet"] in names:
            counts = placements[names.index(hint["podSet"])]
            counts[hint["node"]] = counts.get(hint["node"], 0) + hint["count"]
    merged: dict[str, int] = {}
    for counts in placements:
        for node, count in counts.items():
            merged[node] = merged.get(node, 0) + count
    topology = spec.get("topology") or {}
    return Workload(
        key=f"{meta['namespace']}/{meta['name']}",
        queue=cluster_queue,
        pod_sets=pod_sets,
        submitted_at=parse_time(meta.get("creationTimestamp")) or 0.0,
        priority=spec.get("priority", 0),
        min_runtime=parse_duration(spec.get("minRuntime", 0)),
        resumable=spec.get("resumable", True),
        topology=TopologyRequest(topology.get("required"), topology.get("preferred")),
        phase=Phase.ADMITTED if admission else Phase.PENDING,
        admitted_at=parse_time((admission or {}).get("admittedAt")),
        placement=merged,
        pod_set_placements=tuple(placements) if admission else (),
        pods_ready=pods_ready,
        eligible_at=parse_time(status.get("requeueAt")) or 0.0,
    )


def core_node(node: Obj, used: Mapping[str, int]) -> Node:
    """A Node object; `used` holds the requests of pods admitter does not manage."""
    status = node.get("status") or {}
    allocatable = {r: kube_base_units(r, a)
                   for r, a in (status.get("allocatable") or {}).items() if r != "pods"}
    spec = node.get("spec") or {}
    taints = tuple(Taint(t["key"], t.get("value", ""), t.get("effect", "NoSchedule"))
                   for t in spec.get("taints", []))
    return Node(node["metadata"]["name"], allocatable, node["metadata"].get("labels", {}),
                bool(spec.get("unschedulable")), taints, dict(used))
