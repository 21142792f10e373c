"""The Pod webhooks. Placement (`gate_pod`): a pod of a started queued job is created held
by the placement gate, until admitter names its node (docs/placement.md). `unlabelledWork`: a
plain Pod requesting GPUs in a selected namespace is held by a scheduling gate until admitter
admits its Workload, and only admitter lifts it.

Only Pods in the namespaces the unlabelled webhooks' namespaceSelector names reach those
handlers; the settings decide again (`unlabelled_queue`). Pods of Jobs are left alone there:
their Job is queued.
"""

from __future__ import annotations

from collections.abc import Iterator

from admitter.api.contract import QUEUE_LABEL
from admitter.core.model import GPU
from admitter.jobs.registry import POD_LABELS
from admitter.jobs.workloads import job_owner
from admitter.kube.objects import (
    ADMISSION_GATE,
    PLACEMENT_GATE,
    POD_SET_LABEL,
    Obj,
    add_gate_ops,
    is_gated,
    pod_requests,
)
from admitter.webhook.jobs import (
    JobPolicy,
    Problem,
    add_to_metadata,
    admitted_mark_problems,
    contract_defaults_patch,
    contract_problem,
    local_queue_named,
    missing_default_queue,
    unlabelled_queue,
)
from admitter.webhook.lookup import Lookup
from admitter.webhook.review import AdmissionRequest, JsonPatch, Verdict, allow, deny_problems


async def mutate_pod(request: AdmissionRequest, lookup: Lookup, policy: JobPolicy) -> Verdict:
    """Gate a plain GPU Pod in a selected namespace, labelled with its LocalQueue (the one it
    names, else the namespace's default)."""
    pod = request.object
    if request.operation != "CREATE" or policy.unlabelled is None or not _queued_kind(pod):
        return allow()
    default = await unlabelled_queue(request, lookup, policy)
    if default is None:
        return allow()
    queue = (pod["metadata"].get("labels") or {}).get(QUEUE_LABEL) or default
    local_queue = await local_queue_named(request, queue, lookup)
    if local_queue is None:
        return missing_default_queue(request, queue)
    problems: list[Problem] = []
    if pod["spec"].get("nodeName"):
        problems.append(("spec.nodeName", (
            f"{pod['spec']['nodeName']!r} binds the Pod without kube-scheduler, outside "
            "admitter's GPU quota; remove it (use a nodeSelector instead)")))
    problem = await contract_problem(pod["metadata"].get("annotations") or {}, local_queue,
                                     lookup, policy)
    if problem is not None:
        problems.append(("metadata.annotations", problem))
    if problems:
        return deny_problems(request.display_name, problems)
    patch: JsonPatch = []
    if QUEUE_LABEL not in (pod["metadata"].get("labels") or {}):
        patch += add_to_metadata(pod, "labels", {QUEUE_LABEL: queue})
    patch += add_gate_ops(pod, ADMISSION_GATE)
    return allow(patch + await contract_defaults_patch(request, queue, lookup, policy))


def gate_pod(request: AdmissionRequest) -> Verdict:
    """Hold a pod of a started queued job (its template carries POD_SET_LABEL) with the
    placement gate, for the controller to name its node. A pod bound already (`nodeName`)
    cannot be gated, and nothing else is refused: placement is not quota (the job's
    admission is), so a pod this cannot gate runs as kube-scheduler places it."""
    pod = request.object
    labels = pod["metadata"].get("labels") or {}
    if (request.operation != "CREATE" or POD_SET_LABEL not in labels
            or (pod.get("spec") or {}).get("nodeName")):
        return allow()
    return allow(add_gate_ops(pod, PLACEMENT_GATE))


def validate_pod(request: AdmissionRequest, policy: JobPolicy) -> Verdict:
    """Only admitter lifts its gate and marks a Pod admitted; while gated, the Pod stays in
    its queue. Anyone else lifting the gate would run the Pod outside quota."""
    if request.username in policy.controller_usernames or request.old_object is None:
        return allow()
    problems = [*_gate_problems(request.object, request.old_object),
                *admitted_mark_problems(request.object, request.old_object)]
    return deny_problems(request.display_name, problems) if problems else allow()


def _gate_problems(new: Obj, old: Obj) -> Iterator[Problem]:
    if not is_gated(old):
        return
    if not is_gated(new):
        yield "spec.schedulingGates", (
            f"only admitter removes the {ADMISSION_GATE} gate, once the Pod's Workload is "
            "admitted (see `kubectl get workloads`); keep it")
    before = (old["metadata"].get("labels") or {}).get(QUEUE_LABEL)
    if (new["metadata"].get("labels") or {}).get(QUEUE_LABEL) != before:
        yield f"metadata.labels[{QUEUE_LABEL}]", (
            f"a Pod waiting for admission stays in LocalQueue {before!r}; delete it and "
            "create it anew to queue it elsewhere")


def _queued_kind(pod: Obj) -> bool:
    """A plain Pod (no queued job owns it or, for the kinds whose pods a label names, names
    it: a queued RayJob's Ray pods are owned by its RayCluster) that requests GPUs."""
    labels = pod["metadata"].get("labels") or {}
    return (job_owner(pod) is None and not any(label in labels for _, label in POD_LABELS)
            and pod_requests(pod.get("spec") or {}).get(GPU, 0) > 0)
