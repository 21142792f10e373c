"""One copy of an admitted job (a batch Job, a JobSet or a RayJob) in the worker the core
chose: created unsuspended with the admission's placement, through the job interface
(`run_patch`, as a job started in place is pinned), under the manager job's namespace and
name, labelled (with its pod templates) with the Workload's uid.

Creation is idempotent: a copy found under that name with the same uid is adopted, so a
manager that restarts mid-dispatch never makes a second one; a copy with another uid belongs to
an earlier Workload of a job of that name and is deleted before anything is created."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.contract import QUEUE_LABEL
from admitter.core.model import NodeSelectorRequirement, NodeSelectorTerm, Workload
from admitter.core.topology import CLUSTER
from admitter.fleet.worker import COPIED_KINDS, COPY_LABEL, Worker
from admitter.jobs.interface import ShowsProgress
from admitter.jobs.jobset import JobSet
from admitter.jobs.rayjob import RayJob
from admitter.jobs.registry import KINDS, JobKinds
from admitter.kube import client as kube
from admitter.kube.objects import Obj, narrower_domains

_CONTROLLER_LABELS = ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid",
                      "batch.kubernetes.io/job-name")
"""What the manager's Job controller stamps on a Job's selector and template: the worker's
Job controller stamps its own."""


class StaleCopy(RuntimeError):
    """A job of the copy's name runs in the worker for another Workload: deleted; the
    dispatch is tried again once it is gone."""


def without_cluster(domain: Mapping[str, str]) -> dict[str, str]:
    """A domain as the worker's nodes carry it: the cluster label is the manager's alone."""
    return {key: value for key, value in domain.items() if key != CLUSTER}


def copy_manifest(job: Obj, wl: Obj, kinds: JobKinds = KINDS) -> Obj:
    """The job to create in the worker: the manager's job as its kind starts it in place
    (pinned to the admitted domain, unsuspended), without the manager's Job controller's
    marks, the queue label or status, and labelled (with its pod templates) with the
    Workload's uid."""
    kind = kinds.job_of(job)
    if kind.kind not in COPIED_KINDS:
        raise ValueError(f"a {kind.kind} is not created in worker clusters; only "
                         f"{', '.join(COPIED_KINDS)}")
    admission = wl["status"]["admission"]
    narrower = {name: without_cluster(domain)
                for name, domain in narrower_domains(admission).items()}
    ops = kind.run_patch(job, wl["metadata"]["name"],
                         without_cluster(admission.get("topologyDomain") or {}), narrower)
    made = _patched(copy.deepcopy(job), ops)
    uid = wl["metadata"]["uid"]
    meta = made["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items()
              if k != QUEUE_LABEL and k not in _CONTROLLER_LABELS}
    spec = made["spec"]
    spec.pop("selector", None)
    spec.pop("manualSelector", None)
    for pod_set in kind.pod_sets(made):
        template = _at(made, pod_set.path[:-1]).setdefault("metadata", {})
        template["labels"] = {**{k: v for k, v in (template.get("labels") or {}).items()
                                 if k not in _CONTROLLER_LABELS}, COPY_LABEL: uid}
    return {"apiVersion": made.get("apiVersion", kind.api_version), "kind": kind.kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "labels": {**labels, COPY_LABEL: uid},
                         "annotations": dict(meta.get("annotations") or {})},
            "spec": spec}


async def create_or_adopt(worker: Worker, manifest: Obj) -> Obj:
    """The copy in the worker: created, or the one already there for this Workload."""
    meta = manifest["metadata"]
    kind = manifest["kind"]  # each kind's constant, for the worker's RBAC (tests/deploy)
    resource = (kube.JOBSETS if kind == JobSet.kind
                else kube.RAYJOBS if kind == RayJob.kind else kube.JOBS)
    copies = worker.copies[kind]
    try:
        created = await worker.kube.create(resource, manifest)
    except ApiException as error:
        if not kube.is_conflict(error):
            raise
        found = await worker.kube.get(resource, meta["name"], meta["namespace"])
        if (found["metadata"].get("labels") or {}).get(COPY_LABEL) == meta["labels"][COPY_LABEL]:
            copies.observe(found)
            return found
        await delete_copy(worker, found)
        raise StaleCopy(f"job {meta['namespace']}/{meta['name']} in cluster {worker.name} "
                        "belongs to another Workload; deleted, to be created again") from None
    copies.observe(created)
    return created


async def delete_copy(worker: Worker, job: Obj) -> None:
    """Delete this very copy (its uid as read), its pods with it."""
    meta = job["metadata"]
    kind = job["kind"]  # each kind's constant, for the worker's RBAC (tests/deploy)
    resource = (kube.JOBSETS if kind == JobSet.kind
                else kube.RAYJOBS if kind == RayJob.kind else kube.JOBS)
    try:
        await worker.kube.delete(resource, meta["name"], meta["namespace"], {
            "propagationPolicy": "Background", "preconditions": {"uid": meta.get("uid")}})
    except ApiException as error:
        if not (kube.is_not_found(error) or kube.is_conflict(error)):
            raise
    worker.copies[kind].forget(job)


def progress(job: Obj, kinds: JobKinds = KINDS) -> str:
    """A copy's progress, as its kind reads it from its status."""
    kind = kinds.job_of(job)
    return kind.progress(job) if isinstance(kind, ShowsProgress) else "running"


def _at(obj: Obj, path: Sequence[str]) -> Any:
    """The part of `obj` at `path` (keys, and list indices as digits)."""
    for step in path:
        obj = obj[int(step)] if isinstance(obj, list) else obj[step]
    return obj


def _patched(obj: Obj, ops: Sequence[Mapping[str, Any]]) -> Obj:
    """`obj` with JSON patch `add`, `copy` and `remove` operations applied (all `run_patch`
    makes)."""
    for op in ops:
        *parents, last = [_unescape(p) for p in op["path"].split("/")[1:]]
        target = _at(obj, parents)
        if op["op"] == "add":
            target[last] = copy.deepcopy(op["value"])
        elif op["op"] == "copy":
            try:
                found = _at(obj, [_unescape(p) for p in op["from"].split("/")[1:]])
            except (KeyError, IndexError):
                raise ValueError(f"the job has nothing at {op['from']} to copy to "
                                 f"{op['path']}") from None
            target[last] = copy.deepcopy(found)
        elif op["op"] == "remove":
            del target[last]
        else:
            raise ValueError(f"JSON patch op {op['op']!r} is not applied to copies")
    return obj


def _unescape(step: str) -> str:
    return step.replace("~1", "/").replace("~0", "~")


def kept_off_workers(workload: Workload, workers: Iterable[str]) -> Workload:
    """A pending Workload whose kind is not dispatched, as the core must place it: on no node
    of `workers` (a node requirement like any other, so the core's one placement rule keeps
    it on the manager's own nodes, and it never holds a worker's room it cannot use)."""
    outside = NodeSelectorRequirement(CLUSTER, "NotIn", tuple(sorted(workers)))
    pod_sets = []
    for pod_set in workload.pod_sets:
        selection = pod_set.selection
        terms = tuple(replace(term, expressions=(*term.expressions, outside))
                      for term in selection.terms) or (NodeSelectorTerm((outside,)),)
        pod_sets.append(replace(pod_set, selection=replace(selection, terms=terms)))
    return replace(workload, pod_sets=tuple(pod_sets))
