"""Pure translations between Kubernetes JSON and admitter's values: Job → Workload object,
Workload/Node/ClusterQueue objects → the decision core's snapshot values."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from admitter.api.contract import (
    QUEUE_LABEL,
    ContractError,
    JobContract,
    parse_contract,
    parse_topology,
)
from admitter.api.duration import format_duration, parse_duration
from admitter.api.quantity import format_quantity, from_base_units, kube_base_units
from admitter.api.workload import CONDITION_EVICTED
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
from admitter.jobs.interface import dotted
from admitter.jobs.plain_pod import PlainPod
from admitter.jobs.registry import KINDS, SUSPENDABLE, JobKinds, reader_of

Obj = dict[str, Any]
JOB_NAME_LABEL = "admitter.dev/job-name"
"""On every Workload admitter made for a Job: one that has it but no Job owner was orphaned
(its Job deleted with `--cascade=orphan`)."""
ADMISSION_GATE = "admitter.dev/admission"
"""The scheduling gate holding a plain Pod admitter queued until its Workload is admitted."""


def workload_name(owner: Obj) -> str:
    """Stable and unique per job object: `<kind's prefix>-<name>-<5 hex of uid>` (`job-…`,
    `jobset-…`), at most 63 chars."""
    return _unique_name(reader_of(owner).workload_prefix, owner)


def pod_workload_name(pod: Obj) -> str:
    """The same for a plain Pod admitter queued: `pod-<name>-<5 hex of uid>`."""
    return _unique_name(PlainPod.workload_prefix, pod)


def _unique_name(prefix: str, owner: Obj) -> str:
    meta = owner["metadata"]
    digest = hashlib.sha256(meta["uid"].encode()).hexdigest()[:5]
    return f"{prefix}-{meta['name'][:50]}-{digest}"


def job_owner(obj: Obj) -> Obj | None:
    """The ownerReference naming the object's job (of a kind admitter suspends), if any."""
    for owner in obj["metadata"].get("ownerReferences", ()):
        if owner.get("kind") in SUSPENDABLE:
            found: Obj = owner
            return found
    return None


def is_gated(pod: Obj) -> bool:
    """Whether admitter's scheduling gate holds the Pod."""
    return any(gate.get("name") == ADMISSION_GATE
               for gate in (pod.get("spec") or {}).get("schedulingGates") or ())


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests of one pod, as kube-scheduler counts them: the containers and the
    native sidecars (init containers with `restartPolicy: Always`, which keep running) summed,
    at least what any init container needs beside the sidecars started before it, plus
    `overhead`. A limit stands in for a missing request (the API server's defaulting)."""
    running: dict[str, Decimal] = {}
    for container in pod_spec.get("containers") or ():
        _add(running, _container_requests(container))
    sidecars: dict[str, Decimal] = {}
    starting: dict[str, Decimal] = {}
    for container in pod_spec.get("initContainers") or ():
        requests = _container_requests(container)
        during = dict(sidecars)  # an init container starts beside the sidecars before it
        _add(during, requests)
        for resource, amount in during.items():
            starting[resource] = max(starting.get(resource, Decimal(0)), amount)
        if container.get("restartPolicy") == "Always":
            _add(running, requests)
            _add(sidecars, requests)
    for resource, amount in starting.items():
        running[resource] = max(running.get(resource, Decimal(0)), amount)
    _add(running, _container_requests({"resources": {"requests": pod_spec.get("overhead")}}))
    return running


def _add(total: dict[str, Decimal], amounts: Mapping[str, Decimal]) -> None:
    for resource, amount in amounts.items():
        total[resource] = total.get(resource, Decimal(0)) + amount


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    # Each container's amount rounded up as kube-scheduler counts it (a `500m` memory
    # request is 1 byte): the API server accepts what admitter's own notation refuses.
    return {name: from_base_units(name, kube_base_units(name, value))
            for name, value in merged.items()}


def placement_constraints(pod_spec: Mapping[str, Any], affinity: Obj | None) -> Obj:
    """The pod set fields that restrict nodes: tolerations, nodeSelector and the required
    node affinity's terms, each only when present."""
    constraints: Obj = {}
    tolerations = [{k: t[k] for k in ("key", "operator", "value", "effect") if t.get(k)}
                   for t in pod_spec.get("tolerations") or ()]
    if tolerations:
        constraints["tolerations"] = tolerations
    if pod_spec.get("nodeSelector"):
        constraints["nodeSelector"] = dict(pod_spec["nodeSelector"])
    required = (((affinity or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [{k: [_requirement(r) for r in term[k]]
              for k in ("matchExpressions", "matchFields") if term.get(k)}
             for term in required.get("nodeSelectorTerms") or ()]
    if terms:
        constraints["nodeSelectorTerms"] = terms
    return constraints


def _requirement(requirement: Mapping[str, Any]) -> Obj:
    found: Obj = {"key": requirement["key"], "operator": requirement["operator"]}
    if requirement.get("values"):
        found["values"] = list(requirement["values"])
    return found


def job_contract(job: Obj, *, max_min_runtime: float, topology_levels: list[str] | None,
                 kinds: JobKinds = KINDS) -> JobContract:
    """What a job declared: its own contract annotations and its pod templates' topology."""
    contract = parse_contract(job["metadata"].get("annotations") or {},
                              max_min_runtime=max_min_runtime, topology_levels=topology_levels)
    return replace(contract, pod_set_topology=pod_set_topology(job, topology_levels, kinds))


def pod_set_topology(owner: Obj, topology_levels: list[str] | None, kinds: JobKinds = KINDS,
                     ) -> tuple[tuple[str | None, str | None], ...]:
    """Each pod set's own (required, preferred) topology levels, from its pod template's
    annotations (empty when none asks for one); a ContractError names the template."""
    found = []
    for pod_set in kinds.reader_of(owner).pod_sets(owner):
        try:
            found.append(parse_topology(pod_set.annotations, topology_levels))
        except ContractError as error:
            where = (dotted(pod_set.path[:-1]) if pod_set.path[-1] == "spec"
                     else f"of pod set {pod_set.name}")
            raise ContractError(f"pod template {where}: {error}") from None
    return tuple(found) if any(any(pair) for pair in found) else ()


def narrower_domains(admission: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The admission's pod sets pinned to a domain of their own, by pod set name."""
    return {entry["podSet"]: dict(entry.get("domain") or {})
            for entry in admission.get("podSetDomains") or ()}


def pod_set_domains(admission: Mapping[str, Any], pod_sets: tuple[PodSet, ...],
                    ) -> tuple[dict[str, str], ...]:
    """The domain each pod set is pinned to, in pod set order."""
    domain = dict(admission.get("topologyDomain") or {})
    narrower = narrower_domains(admission)
    return tuple(narrower.get(pod_set.name, domain) for pod_set in pod_sets)


def priority_class_of(owner: Obj, kinds: JobKinds = KINDS) -> str | None:
    """The priority class its pods name (the first pod set's that names one)."""
    for pod_set in kinds.reader_of(owner).pod_sets(owner):
        if pod_set.pod_spec.get("priorityClassName"):
            found: str = pod_set.pod_spec["priorityClassName"]
            return found
    return None


def workload_for(owner: Obj, contract: JobContract, priority: int,
                 kinds: JobKinds = KINDS) -> Obj:
    """The Workload admitter keeps for a job of any kind (or a queued plain Pod), owned by it
    (deleting it deletes the Workload): one pod set per pod set of the job, admitted as one."""
    reader = kinds.reader_of(owner)
    meta = owner["metadata"]
    pod_sets = []
    for index, pod_set in enumerate(reader.pod_sets(owner)):
        requests = {r: format_quantity(a) for r, a in pod_requests(pod_set.pod_spec).items()}
        pod_sets.append({"name": pod_set.name, "count": pod_set.count, "requests": requests,
                         **placement_constraints(pod_set.pod_spec,
                                                 pod_set.pod_spec.get("affinity"))})
        own = contract.pod_set_topology[index] if contract.pod_set_topology else (None, None)
        if any(own):
            pod_sets[-1]["topology"] = {k: v for k, v in zip(("required", "preferred"), own,
                                                             strict=True) if v}
    topology = {k: v for k, v in (("required", contract.topology_required),
                                  ("preferred", contract.topology_preferred)) if v}
    workload_spec: Obj = {
        "queueName": meta["labels"][QUEUE_LABEL],
        "podSets": pod_sets,
        "priority": priority,
        "minRuntime": format_duration(contract.min_runtime),
        "resumable": contract.resumable,
    }
    priority_class = priority_class_of(owner, kinds)
    if priority_class:
        workload_spec["priorityClassName"] = priority_class
    if topology:
        workload_spec["topology"] = topology
    labels = {JOB_NAME_LABEL: meta["name"][:63]} if reader.name_label else {}
    return {
        "apiVersion": "admitter.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(owner),
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": reader.api_version, "kind": reader.kind,
                "name": meta["name"], "uid": meta["uid"], "controller": True,
                "blockOwnerDeletion": True,
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


def evicting(wl: Obj) -> bool:
    """Marked evicted while it still holds its admission: its job is being suspended, and
    its quota is released once it is (`Actions.evict`). An admission drops the mark."""
    return bool((wl.get("status") or {}).get("admission")) and is_true(wl, CONDITION_EVICTED)


def job_ended(job: Obj) -> bool:
    """The job completed or failed (its own status says so): its quota can be released."""
    return reader_of(job).finished(job) is not None


TERMINAL_POD_PHASES = ("Succeeded", "Failed")
"""A Pod in these phases runs no more and holds nothing on its node."""


def core_workload(wl: Obj, cluster_queue: str, pods_ready: bool) -> Workload:
    """A Workload object as the core sees it; `cluster_queue` comes from its LocalQueue."""
    meta, spec = wl["metadata"], wl["spec"]
    status = wl.get("status") or {}
    admission = status.get("admission")
    pod_sets = tuple(
        PodSet(p["name"], p["count"],
               {r: kube_base_units(r, a) for r, a in p.get("requests", {}).items()},
               tuple(Toleration(t.get("key", ""), t.get("operator") or "Equal",
                                t.get("value", ""), t.get("effect", ""))
                     for t in p.get("tolerations") or ()),
               _selection(p), _topology(p.get("topology")))
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
