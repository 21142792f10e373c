"""The Job webhooks: queued Jobs start suspended, and users cannot run them, move them or
declare a contract admitter cannot honour.

Only Jobs carrying the queue label reach these handlers (the webhook's objectSelector), and on
UPDATE only what changed is re-checked, so a queue or cap edited later never blocks the
controller's own updates of Jobs admitted earlier.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from admitter.api.clusterqueue import ClusterQueue
from admitter.api.contract import (
    ADMITTED_WORKLOAD_ANNOTATION,
    MIN_RUNTIME_ANNOTATION,
    QUEUE_LABEL,
    RESUMABLE_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    ContractError,
    parse_contract,
)
from admitter.api.convert import cluster_levels, core_queue, effective_max_min_runtime
from admitter.api.localqueue import LocalQueue
from admitter.core.queue_tree import QueueTree, QueueTreeError
from admitter.webhook.lookup import Lookup
from admitter.webhook.review import AdmissionRequest, Verdict, allow, deny_problems

CONTRACT_ANNOTATIONS = (
    MIN_RUNTIME_ANNOTATION,
    RESUMABLE_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION,
)
SUSPEND_PATCH = [{"op": "add", "path": "/spec/suspend", "value": True}]

_LABEL_PATH = f"metadata.labels[{QUEUE_LABEL}]"
_ADMITTED_PATH = f"metadata.annotations[{ADMITTED_WORKLOAD_ANNOTATION}]"

Job = Mapping[str, Any]
Problem = tuple[str, str]


@dataclass(frozen=True)
class JobPolicy:
    """The settings the Job rules need."""

    max_min_runtime: float
    """Cluster default cap on min runtime, used when no queue on the path sets one."""
    controller_usernames: frozenset[str]
    """Identities allowed to unsuspend and to mark Jobs admitted: admitter's own."""


def mutate_job(request: AdmissionRequest) -> Verdict:
    """Suspend a queued Job at creation so no pod starts before admitter admits it."""
    if request.operation != "CREATE" or _queue(request.object) is None:
        return allow()
    return allow() if _suspended(request.object) else allow(SUSPEND_PATCH)


async def validate_job(request: AdmissionRequest, lookup: Lookup, policy: JobPolicy) -> Verdict:
    """Every rule's problems at once, each naming the field and the fix."""
    new, old = request.object, request.old_object
    is_controller = request.username in policy.controller_usernames
    problems = [*_queue_label_problems(new, old)]
    if not is_controller:
        problems += _admitted_mark_problems(new, old)
        problems += _suspend_problems(request)
    queue = _queue(new)
    if queue is not None and (old is None or _queue(old) != queue or _contract_changed(new, old)):
        problems += await _queue_and_contract_problems(request, queue, lookup, policy)
    return deny_problems(request.display_name, problems) if problems else allow()


def is_admitted(job: Job | None) -> bool:
    """Whether the Job holds quota: running, or marked by the controller."""
    return job is not None and (
        not _suspended(job) or ADMITTED_WORKLOAD_ANNOTATION in _annotations(job)
    )


def _queue_label_problems(new: Job, old: Job | None) -> Iterator[Problem]:
    """An admitted Job's quota is charged to its queue; leaving any queue would bypass quota."""
    if old is None or _queue(old) == _queue(new):
        return
    before, after = _queue(old), _queue(new)
    if is_admitted(old) and before is None:
        yield _LABEL_PATH, (
            "the Job already runs outside admitter and cannot join a queue now; "
            f"delete it and recreate it with the label to queue it in {after!r}"
        )
    elif after is None:
        yield _LABEL_PATH, (
            f"the label cannot be removed: the Job would leave LocalQueue {before!r} and run "
            "without quota; delete the Job instead"
        )
    elif is_admitted(old):
        yield _LABEL_PATH, (
            f"the Job is admitted to LocalQueue {before!r} and cannot move to {after!r}; "
            f"set it back to {before!r}, or delete the Job and recreate it in {after!r}"
        )


def _admitted_mark_problems(new: Job, old: Job | None) -> Iterator[Problem]:
    before = _annotations(old).get(ADMITTED_WORKLOAD_ANNOTATION) if old is not None else None
    if _annotations(new).get(ADMITTED_WORKLOAD_ANNOTATION) != before:
        yield _ADMITTED_PATH, "only admitter sets this annotation; remove your change to it"


def _suspend_problems(request: AdmissionRequest) -> Iterator[Problem]:
    if _suspended(request.object) or is_admitted(request.old_object):
        return
    yield "spec.suspend", (
        f"{request.username or 'you'} may not unsuspend a Job that admitter has not admitted; "
        "keep spec.suspend true and admitter resumes the Job once its Workload is admitted "
        f"(see `kubectl get workloads -n {request.namespace}`)"
    )


async def _queue_and_contract_problems(
    request: AdmissionRequest, queue: str, lookup: Lookup, policy: JobPolicy
) -> list[Problem]:
    local_queues = {lq.metadata.name: lq for lq in await lookup.local_queues(request.namespace)}
    if queue not in local_queues:  # a denial must never rest on a shared, older read
        local_queues = {lq.metadata.name: lq
                        for lq in await lookup.local_queues(request.namespace, fresh=True)}
    local_queue = local_queues.get(queue)
    problems: list[Problem] = []
    if local_queue is None:
        existing = ", ".join(sorted(local_queues)) or "none; ask an admin to create one"
        problems.append((
            _LABEL_PATH,
            f"LocalQueue {queue!r} does not exist in namespace {request.namespace!r}; "
            f"name one that does (existing: {existing})",
        ))
    problem = await _contract_problem(_annotations(request.object), local_queue, lookup, policy)
    if problem is not None:
        problems.append(("metadata.annotations", problem))
    return problems


async def _contract_problem(
    annotations: Mapping[str, str],
    local_queue: LocalQueue | None,
    lookup: Lookup,
    policy: JobPolicy,
) -> str | None:
    """The contract error, reading only the objects the present annotations need."""
    cap = policy.max_min_runtime
    if local_queue is not None and MIN_RUNTIME_ANNOTATION in annotations:
        cap = _effective_cap(
            await lookup.cluster_queues(), local_queue.spec.cluster_queue, policy.max_min_runtime
        )
    levels = None
    if TOPOLOGY_REQUIRED_ANNOTATION in annotations or TOPOLOGY_PREFERRED_ANNOTATION in annotations:
        levels = cluster_levels({t.metadata.name: t.spec.label_keys()
                                 for t in await lookup.topologies()})
    try:
        parse_contract(annotations, max_min_runtime=cap,
                       topology_levels=None if levels is None else list(levels))
    except ContractError as error:
        return str(error)
    return None


def _effective_cap(cluster_queues: list[ClusterQueue], leaf: str, default: float) -> float:
    """The nearest maxMinRuntime on the leaf's path; the default when the tree is incomplete."""
    try:
        tree = QueueTree(
            core_queue(cq.metadata.name, cq.spec, order) for order, cq in enumerate(cluster_queues)
        )
    except QueueTreeError:
        return default
    return effective_max_min_runtime(tree, leaf, default) if leaf in tree else default


def _contract_changed(new: Job, old: Job) -> bool:
    before, after = _annotations(old), _annotations(new)
    return any(before.get(key) != after.get(key) for key in CONTRACT_ANNOTATIONS)


def _queue(job: Job) -> str | None:
    return ((job.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)


def _annotations(job: Job) -> Mapping[str, str]:
    return (job.get("metadata") or {}).get("annotations") or {}


def _suspended(job: Job) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))
