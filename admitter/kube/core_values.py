"""Kubernetes objects as the decision core sees them: a Workload object → `Workload`, a Node
object → `Node`, an admission's domains per pod set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admitter.api.duration import parse_duration
from admitter.api.quantity import kube_base_units
from admitter.core.model import (
    ANYWHERE,
    NO_TOPOLOGY,
    Node,
    NodeSelection,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Phase,
    PodSet,
    Taint,
    Toleration,
    TopologyRequest,
    Workload,
)
from admitter.core.topology import CLUSTER
from admitter.kube.devices import NO_DEVICES, DevicesOnNode
from admitter.kube.objects import Obj, narrower_domains, parse_time
from admitter.kube.shared import SharedParts

POD_SETS = SharedParts()
"""Core pod sets by their Workload's `podSets`, one tuple for all the Workloads that repeat
them (most of a queue's): the core never changes a pod set, and a hundred thousand waiting
Workloads held their own copies of a few shapes."""


def pod_set_domains(admission: Mapping[str, Any], pod_sets: tuple[PodSet, ...],
                    ) -> tuple[dict[str, str], ...]:
    """The domain each pod set is pinned to, in pod set order."""
    domain = dict(admission.get("topologyDomain") or {})
    narrower = narrower_domains(admission)
    return tuple(narrower.get(pod_set.name, domain) for pod_set in pod_sets)


def core_workload(wl: Obj, cluster_queue: str, pods_ready: bool) -> Workload:
    """A Workload object as the core sees it; `cluster_queue` comes from its LocalQueue."""
    meta, spec = wl["metadata"], wl["spec"]
    status = wl.get("status") or {}
    admission = status.get("admission")
    pod_sets: tuple[PodSet, ...] = POD_SETS.kept(repr(spec["podSets"]),
                                                 lambda: _pod_sets(spec["podSets"]))
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
    return Workload(
        key=f"{meta['namespace']}/{meta['name']}",
        queue=cluster_queue,
        pod_sets=pod_sets,
        submitted_at=parse_time(meta.get("creationTimestamp")) or 0.0,
        priority=spec.get("priority", 0),
        min_runtime=parse_duration(spec.get("minRuntime", 0)),
        resumable=spec.get("resumable", True),
        topology=_topology(spec.get("topology")),
        phase=Phase.ADMITTED if admission else Phase.PENDING,
        admitted_at=parse_time((admission or {}).get("admittedAt")),
        placement=merged,
        pod_set_placements=tuple(placements) if admission else (),
        pods_ready=pods_ready,
        eligible_at=parse_time(status.get("requeueAt")) or 0.0,
        max_runtime=None if spec.get("maxRuntime") is None else parse_duration(
            spec["maxRuntime"]),
        ran_before=float(status.get("pastRunSeconds", 0.0)),
    )


def _pod_sets(pod_sets: list[Obj]) -> tuple[PodSet, ...]:
    return tuple(
        PodSet(p["name"], p["count"],
               {r: kube_base_units(r, a) for r, a in p.get("requests", {}).items()},
               tuple(Toleration(t.get("key", ""), t.get("operator") or "Equal",
                                t.get("value", ""), t.get("effect", ""))
                     for t in p.get("tolerations") or ()),
               _selection(p), _topology(p.get("topology")))
        for p in pod_sets
    )


def _topology(spec: Obj | None) -> TopologyRequest:
    """A Workload's (or a pod set's) topology request; the shared empty one for none."""
    if not spec:
        return NO_TOPOLOGY
    return TopologyRequest(spec.get("required"), spec.get("preferred"))


def _selection(pod_set: Obj) -> NodeSelection:
    """A pod set's nodeSelector and required node affinity terms as the core matches them
    (the shared empty selection when it has neither: cheaper to key memos by)."""
    if not pod_set.get("nodeSelector") and not pod_set.get("nodeSelectorTerms"):
        return ANYWHERE
    return NodeSelection(
        tuple(sorted((pod_set.get("nodeSelector") or {}).items())),
        tuple(NodeSelectorTerm(_requirements(term.get("matchExpressions")),
                               _requirements(term.get("matchFields")))
              for term in pod_set.get("nodeSelectorTerms") or ()))


def _requirements(found: list[Obj] | None) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(NodeSelectorRequirement(r["key"], r["operator"], tuple(r.get("values") or ()))
                 for r in found or ())


def core_node(node: Obj, used: Mapping[str, int], devices: DevicesOnNode = NO_DEVICES) -> Node:
    """A Node object; `used` holds the requests of pods admitter does not manage, `devices`
    what DRA drivers publish on it: its devices are allocatable as the quota resource their
    class maps to (kube-scheduler allocates them as it does the device plugin's), and it
    carries the label of each class it has devices of (`class_label`), which pod sets
    claiming that class select."""
    status = node.get("status") or {}
    allocatable = {r: kube_base_units(r, a)
                   for r, a in (status.get("allocatable") or {}).items() if r != "pods"}
    for resource, count in devices.counts.items():
        allocatable[resource] = allocatable.get(resource, 0) + count
    spec = node.get("spec") or {}
    taints = tuple(Taint(t["key"], t.get("value", ""), t.get("effect", "NoSchedule"))
                   for t in spec.get("taints", []))
    labels = node["metadata"].get("labels", {})
    if devices.classes:
        labels = {**labels, **devices.labels()}
    return Node(node["metadata"]["name"], allocatable, labels,
                bool(spec.get("unschedulable")), taints, dict(used))


def admitted_cluster(wl: Obj) -> str | None:
    """The cluster a Workload's admission placed it in: the cluster label (`CLUSTER`) of the
    domain it is pinned to, which every admission over a fleet carries; None outside one."""
    admission = (wl.get("status") or {}).get("admission") or {}
    cluster = (admission.get("topologyDomain") or {}).get(CLUSTER)
    return None if cluster is None else str(cluster)
