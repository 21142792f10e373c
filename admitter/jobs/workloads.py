"""A job's objects in the Kubernetes API: where its kind lives, which job owns an object, what
the job declared, and the Workload admitter keeps for it (its name and its body)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from admitter.api.contract import (
    QUEUE_LABEL,
    ContractError,
    JobContract,
    parse_contract,
    parse_topology,
)
from admitter.api.duration import format_duration
from admitter.api.quantity import format_quantity
from admitter.jobs.interface import GenericJob, dotted
from admitter.jobs.plain_pod import PlainPod
from admitter.jobs.registry import KINDS, SUSPENDABLE, JobKinds, reader_of
from admitter.kube import client as kube
from admitter.kube.devices import class_label
from admitter.kube.objects import (
    PLACEMENT_GATE,
    POD_SET_LABEL,
    Obj,
    is_gated,
    pinned_host,
    placement_constraints,
)

JOB_NAME_LABEL = "admitter.dev/job-name"
"""On every Workload admitter made for a Job: one that has it but no Job owner was orphaned
(its Job deleted with `--cascade=orphan`)."""


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


REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
"""JobSet's label on each pod, naming its replicated job: a TrainJob's pod set."""


def pod_set_of(pod: Obj) -> str | None:
    """The pod set a pod of a started job belongs to: the one admitter labelled its template
    with (POD_SET_LABEL), or, for a pod held by the placement gate without it (a TrainJob's,
    whose templates live in its runtime), the replicated job JobSet names it by. None for a
    pod admitter does not place."""
    labels = pod["metadata"].get("labels") or {}
    if POD_SET_LABEL in labels:
        return str(labels[POD_SET_LABEL])
    if REPLICATED_JOB_LABEL in labels and (is_gated(pod, PLACEMENT_GATE) or pinned_host(pod)):
        return str(labels[REPLICATED_JOB_LABEL])
    return None


def job_contract(job: Obj, *, max_min_runtime: float, topology_levels: list[str] | None,
                 max_runtime_ceiling: float | None = None,
                 kinds: JobKinds = KINDS) -> JobContract:
    """What a job declared: its own contract annotations and its pod templates' topology."""
    contract = parse_contract(job["metadata"].get("annotations") or {},
                              max_min_runtime=max_min_runtime, topology_levels=topology_levels,
                              max_runtime_ceiling=max_runtime_ceiling)
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
        demand, classes = kinds.pod_demand_and_classes(meta["namespace"], pod_set.pod_spec)
        requests = {r: format_quantity(a) for r, a in demand.items()}
        constraints = placement_constraints(pod_set.pod_spec, pod_set.pod_spec.get("affinity"))
        if classes:
            constraints["nodeSelector"] = {**constraints.get("nodeSelector", {}),
                                           **{class_label(c): "true" for c in sorted(classes)}}
        pod_sets.append({"name": pod_set.name, "count": pod_set.count, "requests": requests,
                         **constraints})
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
    if contract.max_runtime is not None:
        workload_spec["maxRuntime"] = format_duration(contract.max_runtime)
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


def job_ended(job: Obj) -> bool:
    """The job completed or failed (its own status says so): its quota can be released."""
    return reader_of(job).finished(job) is not None


def resource_of(kind: GenericJob) -> kube.Kind:
    """Where objects of a job kind live in the REST API."""
    return kube.Kind(kind.api_version, kind.plural, True)


def runtime_resource(runtime_kind: tuple[str, str, str, bool]) -> kube.Kind:
    """Where objects of a runtime kind (`ReadsRuntimes.runtime_kinds`) live in the REST API."""
    _, api_version, plural, namespaced = runtime_kind
    return kube.Kind(api_version, plural, namespaced)
