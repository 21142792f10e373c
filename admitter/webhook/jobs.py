"""The job webhooks: queued jobs of every kind admitter suspends (`SUSPENDABLE`: Jobs,
JobSets, RayJobs) start suspended, and users cannot run them, resize them while admitted, move
them, declare a contract admitter cannot honour or use settings it cannot account for
(`RefusesSpecs`). Kinds differ only in their pod sets, read through the job interface.

Jobs carrying the queue label reach these handlers (the webhooks' objectSelector), and on
UPDATE only what changed is re-checked, so a queue or cap edited later never blocks the
controller's own updates of Jobs admitted earlier. With `unlabelledWork` set, Jobs without the
label in the namespaces it selects reach the mutating handler too, and are labelled with the
namespace's default LocalQueue.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from admitter.api.base import check_requests
from admitter.api.clusterqueue import ClusterQueue, ClusterQueueSpec
from admitter.api.contract import (
    ADMITTED_WORKLOAD_ANNOTATION,
    MAX_RUNTIME_ANNOTATION,
    MIN_RUNTIME_ANNOTATION,
    QUEUE_LABEL,
    RESUMABLE_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    ContractError,
    parse_contract,
)
from admitter.api.convert import (
    cluster_levels,
    core_queue,
    effective_max_min_runtime,
    effective_max_runtime_ceiling,
)
from admitter.api.duration import format_duration
from admitter.api.localqueue import LocalQueue
from admitter.api.settings import UnlabelledWork
from admitter.api.workload import MAX_POD_COUNT, MAX_POD_SETS
from admitter.core.model import NON_PREEMPTIBLE_PRIORITY
from admitter.core.queue_tree import QueueTree, QueueTreeError
from admitter.jobs.claims import DeviceClaims, MissingTemplate, UncountableClaim
from admitter.jobs.interface import PodSetInfo, ReadsRuntimes, RefusesSpecs, dotted
from admitter.jobs.registry import job_of, reader_of
from admitter.jobs.workloads import job_owner, priority_class_of, workload_name
from admitter.kube.objects import pod_requests
from admitter.webhook.lookup import Lookup
from admitter.webhook.pod_set_topology import pod_set_topology_problems
from admitter.webhook.review import AdmissionRequest, JsonPatch, Verdict, allow, deny_problems

CONTRACT_ANNOTATIONS = (
    MIN_RUNTIME_ANNOTATION,
    MAX_RUNTIME_ANNOTATION,
    RESUMABLE_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION,
)

UNREADABLE_SHOWN = 200
"""Most characters of an unreadable pod's containers quoted in a refusal: enough to spot the
garbled quantity, few enough that kubectl prints the refusal in a line or two."""

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
    non_preemptible_priority: int | None = NON_PREEMPTIBLE_PRIORITY
    """The settings' threshold: a Job at or above it is warned that it is never preempted."""
    unlabelled: UnlabelledWork | None = None
    """The opt-in for work without the queue label, if any."""
    device_classes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The settings' DeviceClass → quota resource mapping, by which device claims count."""


async def mutate_job(request: AdmissionRequest, lookup: Lookup, policy: JobPolicy) -> Verdict:
    """Suspend a queued Job at creation so no pod starts before admitter admits it, and write
    its queue's `defaultMinRuntime` and `defaultMaxRuntime` onto it where it declares none (so
    the user sees the contract the Job runs under). An unlabelled Job in a namespace
    `unlabelledWork` selects is labelled with the default LocalQueue first."""
    if request.operation != "CREATE" or _part_of_queued_job(request.object):
        return allow()
    queue, patch = _queue(request.object), []
    if queue is None:
        queue = await unlabelled_queue(request, lookup, policy)
        if queue is None:
            return allow()
        if await local_queue_named(request, queue, lookup) is None:
            return missing_default_queue(request, queue)
        patch += add_to_metadata(request.object, "labels", {QUEUE_LABEL: queue})
    patch += job_of(dict(request.object)).suspend_ops(dict(request.object))
    return allow(patch + await contract_defaults_patch(request, queue, lookup, policy))


async def unlabelled_queue(request: AdmissionRequest, lookup: Lookup,
                           policy: JobPolicy) -> str | None:
    """The LocalQueue unlabelled work in the request's namespace goes to, or None when the
    namespace is not selected (the webhook's namespaceSelector may be broader than the
    settings, e.g. registered before they changed: the settings decide)."""
    if policy.unlabelled is None:
        return None
    labels = await lookup.namespace_labels(request.namespace)
    if labels is None or not policy.unlabelled.selects(request.namespace, labels):
        return None
    return policy.unlabelled.local_queue


async def local_queue_named(request: AdmissionRequest, queue: str,
                            lookup: Lookup) -> LocalQueue | None:
    for fresh in (False, True):  # a denial must never rest on a shared, older read
        for lq in await lookup.local_queues(request.namespace, fresh=fresh):
            if lq.metadata.name == queue:
                return lq
    return None


def missing_default_queue(request: AdmissionRequest, queue: str) -> Verdict:
    """The denial when the namespace's default LocalQueue does not exist: the object would
    otherwise wait in no queue, or run outside the quota its namespace opted into."""
    return deny_problems(request.display_name, [(_LABEL_PATH, (
        f"namespace {request.namespace!r} queues work without the {QUEUE_LABEL} label in "
        f"LocalQueue {queue!r}, which does not exist; ask an admin to create it, or label the "
        "object with a LocalQueue that exists"))])


async def contract_defaults_patch(request: AdmissionRequest, queue: str, lookup: Lookup,
                                  policy: JobPolicy) -> JsonPatch:
    """The queue's `defaultMinRuntime` and `defaultMaxRuntime` as the object's min-runtime and
    max-runtime annotations, each where it declares none."""
    declared = _annotations(request.object)
    if MIN_RUNTIME_ANNOTATION in declared and MAX_RUNTIME_ANNOTATION in declared:
        return []
    defaults = await _contract_defaults(request.namespace, queue, lookup, policy)
    added = {annotation: format_duration(value) for annotation, value in defaults.items()
             if value is not None and annotation not in declared}
    return add_to_metadata(request.object, "annotations", added)


async def _contract_defaults(namespace: str, queue: str, lookup: Lookup,
                             policy: JobPolicy) -> dict[str, float | None]:
    """The nearest `defaultMinRuntime` and `defaultMaxRuntime` on the LocalQueue's
    ClusterQueue path, each within its effective cap, by annotation; None where the queue or
    every default is missing."""
    local_queue = next((lq for lq in await lookup.local_queues(namespace)
                        if lq.metadata.name == queue), None)
    if local_queue is None:
        return {}  # the validating webhook says why
    cluster_queues = await lookup.cluster_queues()
    specs = {cq.metadata.name: cq.spec for cq in cluster_queues}
    leaf = local_queue.spec.cluster_queue
    default_min = _nearest_spec(specs, leaf, lambda spec: spec.default_min_runtime)
    default_max = _nearest_spec(specs, leaf, lambda spec: spec.default_max_runtime)
    cap, ceiling = bounds(cluster_queues, leaf, policy)
    if default_min is not None:
        default_min = min(default_min, cap)
    if default_max is not None and ceiling is not None:
        default_max = min(default_max, ceiling)
    return {MIN_RUNTIME_ANNOTATION: default_min, MAX_RUNTIME_ANNOTATION: default_max}


def _nearest_spec(specs: Mapping[str, ClusterQueueSpec], leaf: str,
                  value: Callable[[ClusterQueueSpec], float | None]) -> float | None:
    """A default a ClusterQueue inherits: its own, else the nearest ancestor's (the specs may
    be mid-edit: a missing parent or a cycle ends the walk)."""
    name: str | None = leaf
    seen: set[str] = set()
    while name is not None and name in specs and name not in seen:
        seen.add(name)
        found = value(specs[name])
        if found is not None:
            return found
        name = specs[name].parent
    return None


def add_to_metadata(obj: Job, section: str, values: Mapping[str, str]) -> JsonPatch:
    """A JSON patch setting labels or annotations (`section`), the map made if missing (in
    one operation: a second `add` of the map would replace the first)."""
    if not values:
        return []
    if not (obj.get("metadata") or {}).get(section):
        return [{"op": "add", "path": f"/metadata/{section}", "value": dict(values)}]
    return [{"op": "add", "path": f"/metadata/{section}/{_escaped(key)}", "value": value}
            for key, value in values.items()]


def _escaped(key: str) -> str:
    """A map key as a JSON-pointer segment."""
    return key.replace("~", "~0").replace("/", "~1")


async def validate_job(request: AdmissionRequest, lookup: Lookup, policy: JobPolicy) -> Verdict:
    """Every rule's problems at once, each naming the field and the fix."""
    new, old = request.object, request.old_object
    if _part_of_queued_job(new):
        return allow()
    is_controller = request.username in policy.controller_usernames
    problems = [*_queue_label_problems(new, old)]
    if not is_controller:
        problems += admitted_mark_problems(new, old)
        problems += _suspend_problems(request)
        problems += _admitted_size_problems(request.kind, new, old)
    problems += _size_problems(new, old)
    problems += _unsupported_problems(new, old)
    queue = _queue(new)
    joining = queue is not None and (old is None or _queue(old) != queue)
    if joining and old is not None and not problems:
        problems += await _moving_admitted_workload_problems(request, lookup)
    if queue is not None and (joining or (old is not None and _contract_changed(new, old))):
        problems += await _queue_and_contract_problems(request, queue, lookup, policy, joining)
    warnings: list[str] = []
    if queue is not None:
        problems += await pod_set_topology_problems(_pod_sets(new), _pod_sets(old), lookup)
        claimed, warnings = await _claim_problems(request, lookup, policy)
        problems += claimed
    if problems:
        return deny_problems(request.display_name, problems)
    warning = await _never_preempted_warning(new, lookup, policy) if old is None else None
    return allow(warnings=[*warnings, *([warning] if warning else [])] or None)


async def _claim_problems(request: AdmissionRequest, lookup: Lookup,
                          policy: JobPolicy) -> tuple[list[Problem], list[str]]:
    """Each device claim of a new or changed pod set that admitter cannot charge to quota,
    by the rule the controller counts with (`DeviceClaims`); a ResourceClaimTemplate not
    there yet is only a warning: the job waits for it, suspended."""
    old = request.old_object
    before = {pod_set.name: pod_set.pod_spec.get("resourceClaims")
              for pod_set in (_pod_sets(old) if old is not None else None) or ()}
    changed = [pod_set for pod_set in _pod_sets(request.object) or ()
               if pod_set.pod_spec.get("resourceClaims")
               and (old is None or before.get(pod_set.name) != pod_set.pod_spec["resourceClaims"])]
    names = sorted({claim.get("resourceClaimTemplateName") or "" for pod_set in changed
                    for claim in pod_set.pod_spec["resourceClaims"]} - {""})
    templates = {name: await lookup.resource_claim_template(request.namespace, name)
                 for name in (names if policy.device_classes else ())}
    claims = DeviceClaims(policy.device_classes, lambda _, name: templates.get(name))
    problems, warnings = [], []
    for pod_set in changed:
        try:
            claims.requests(request.namespace, pod_set.pod_spec)
        except MissingTemplate as error:
            warnings.append(f"{dotted(pod_set.path)}.{error.field}: {error.message}")
        except UncountableClaim as error:
            problems.append((f"{dotted(pod_set.path)}.{error.field}", error.message))
    return problems, warnings


async def _never_preempted_warning(job: Job, lookup: Lookup, policy: JobPolicy) -> str | None:
    """A Kueue-style priority (1000, 10000) at or above the threshold turns preemption off
    for the Job: say so when it is created rather than let it happen silently."""
    threshold = policy.non_preemptible_priority
    pod_sets = _pod_sets(job)
    name = priority_class_of(dict(job)) if pod_sets else None
    if threshold is None or not name:
        return None
    value = await lookup.priority_value(name)
    if value is None or value < threshold:
        return None
    return (f"PriorityClass {name!r} has value {value}, at or above nonPreemptiblePriority "
            f"{threshold}: if funded, this Job is never preempted and runs only inside its "
            "queue's deserved quota (an admin can raise the threshold in admitter's settings)")


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


def _admitted_size_problems(kind: str, new: Job, old: Job | None) -> Iterator[Problem]:
    """Quota is charged for the pods and requests the job had when admitted: more pods or
    bigger pods while admitted would run what nobody was charged for."""
    if old is None or not is_admitted(old):
        return
    fix = f"delete the {kind} and create it again with the new size to queue it for that"
    yield from _size_field_problems(kind, new, old, fix)
    yield from _pod_set_names_problems(kind, new, old, fix)
    for before, after in _matching_pod_sets(old, new):
        if before.count != after.count:
            yield after.size_field, (
                f"the {kind} is admitted with {before.count} pods in pod set {before.name!r}; "
                f"it cannot change to {after.count} while admitted; {fix}"
            )
        if _requests(before.pod_spec) != _requests(after.pod_spec):
            yield dotted(after.path), (
                f"the {kind} is admitted for pods requesting {_requests(before.pod_spec)}; "
                f"their requests cannot change to {_requests(after.pod_spec)} while admitted; "
                f"{fix}"
            )


def _size_problems(new: Job, old: Job | None) -> Iterator[Problem]:
    """A size a Workload can carry: whole units except cpu (Kubernetes accepts memory `500m`
    with a warning; admitter counts whole bytes), at most MAX_POD_COUNT pods per pod set and
    at most MAX_POD_SETS pod sets, so the job never waits silently. Checked when set, so
    older jobs stay manageable."""
    found = _pod_sets(new)
    if found is None:
        yield "spec", "the pod templates cannot be read; give every pod set a pod template"
        return
    before = {pod_set.name: pod_set
              for pod_set in (_pod_sets(old) if old is not None else None) or ()}
    for pod_set in found:
        was = before.get(pod_set.name)
        if was is None or _requests(was.pod_spec) != _requests(pod_set.pod_spec):
            try:
                check_requests(pod_requests(pod_set.pod_spec))
            except ValueError as error:
                yield f"{dotted(pod_set.path)}.containers[].resources", str(error)
        if (was is None or was.count != pod_set.count) and pod_set.count > MAX_POD_COUNT:
            yield pod_set.size_field, (
                f"{pod_set.count} pods is more than a Workload holds ({MAX_POD_COUNT}); "
                "split the job"
            )
    if len(found) > MAX_POD_SETS and len(found) > len(before):
        names = ", ".join(pod_set.name for pod_set in found)
        yield _pod_sets_field(found), (
            f"{len(found)} pod sets ({names}) are more than a Workload holds "
            f"({MAX_POD_SETS}); merge groups of the same pods or split the job"
        )


def _pod_sets_field(pod_sets: list[PodSetInfo]) -> str:
    """The field holding all the pod sets (`spec.replicatedJobs`): their paths' common part,
    up to the list they are items of."""
    common = list(pod_sets[0].path)
    for pod_set in pod_sets[1:]:
        while tuple(common) != pod_set.path[:len(common)]:
            common.pop()
    while common and common[-1].isdigit():
        common.pop()
    return dotted(common) or "spec"


def _unsupported_problems(new: Job, old: Job | None) -> Iterator[Problem]:
    """The kind's settings admitter cannot account for, when set by this request (a job
    created before the webhook stays manageable)."""
    reader = reader_of(dict(new))
    if not isinstance(reader, RefusesSpecs):
        return
    before = set(reader.unsupported(dict(old))) if old is not None else set()
    yield from (problem for problem in reader.unsupported(dict(new)) if problem not in before)


def _pod_set_names_problems(kind: str, new: Job, old: Job, fix: str) -> Iterator[Problem]:
    """A pod set added, gone or moved while admitted (a worker group sized up from 0, a
    RayJob's submission mode changed): its pods would run uncharged, or the admission would name pod
    sets the job no longer has, and the user's templates could not be restored."""
    before, after = _pod_sets(old), _pod_sets(new)
    if before is None or after is None:
        return
    names = [pod_set.name for pod_set in before], [pod_set.name for pod_set in after]
    if names[0] == names[1]:
        return
    # The field named is the first pod set added, else gone, else moved (the user's
    # templates are kept by position, so an order changed is a change too).
    changed = next((pod_set for pod_set in after if pod_set.name not in names[0]), None) or next(
        (pod_set for pod_set in before if pod_set.name not in names[1]), None) or next(
        new_set for old_set, new_set in zip(before, after, strict=True)
        if old_set.name != new_set.name)
    yield changed.size_field, (
        f"the {kind} is admitted with pod sets {', '.join(names[0])}; they cannot change to "
        f"{', '.join(names[1]) or 'none'} while admitted; {fix}")


def _size_field_problems(kind: str, new: Job, old: Job, fix: str) -> Iterator[Problem]:
    """For a kind whose pod sets live in a runtime (`ReadsRuntimes`), the fields that size
    them in the job itself."""
    reader = reader_of(dict(new))
    if not isinstance(reader, ReadsRuntimes):
        return
    try:
        before, after = reader.size_fields(dict(old)), reader.size_fields(dict(new))
    except (KeyError, TypeError, AttributeError):
        yield "spec", f"the {kind}'s size cannot be read"
        return
    for field, value in after.items():
        if before.get(field) != value:
            yield field, (f"the {kind} is admitted with {field} {before.get(field)!r}; it "
                          f"cannot change to {value!r} while admitted; {fix}")


def _pod_sets(job: Job | None) -> list[PodSetInfo] | None:
    """The job's pod sets, None when they cannot be read; none for a kind whose pod sets
    live in a runtime the webhook does not read (its size fields are guarded instead)."""
    if job is None:
        return None
    try:
        reader = reader_of(dict(job))
        return [] if isinstance(reader, ReadsRuntimes) else reader.pod_sets(dict(job))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None


def _matching_pod_sets(old: Job, new: Job) -> Iterator[tuple[PodSetInfo, PodSetInfo]]:
    before = {pod_set.name: pod_set for pod_set in _pod_sets(old) or ()}
    for pod_set in _pod_sets(new) or ():
        if pod_set.name in before:
            yield before[pod_set.name], pod_set


def _requests(pod: Mapping[str, Any]) -> dict[str, str]:
    """One pod's requests as the controller charges them (text when a quantity is garbage)."""
    try:
        return {name: str(amount) for name, amount in sorted(pod_requests(pod).items())}
    except ValueError:
        return {"(unreadable)": repr(pod.get("containers"))[:UNREADABLE_SHOWN]}


async def _moving_admitted_workload_problems(request: AdmissionRequest,
                                             lookup: Lookup) -> list[Problem]:
    """A suspended Job whose Workload was admitted a moment ago (the controller starts the
    Job right after) holds quota in its queue just as a running one does."""
    old = request.old_object
    if old is None or _queue(old) is None or not (old.get("metadata") or {}).get("uid"):
        return []
    name = workload_name(old)
    workload = await lookup.workload(request.namespace, name)
    admission = ((workload or {}).get("status") or {}).get("admission")
    if not admission:
        return []
    before, after = _queue(old), _queue(request.object)
    return [(_LABEL_PATH, (
        f"the Job's Workload {name} is admitted to LocalQueue {before!r} (quota reserved in "
        f"ClusterQueue {admission.get('clusterQueue')!r}) and the Job is about to start; it "
        f"cannot move to {after!r}: set it back to {before!r}, or delete the Job and "
        f"recreate it in {after!r}"
    ))]


def admitted_mark_problems(new: Job, old: Job | None) -> Iterator[Problem]:
    before = _annotations(old).get(ADMITTED_WORKLOAD_ANNOTATION) if old is not None else None
    if _annotations(new).get(ADMITTED_WORKLOAD_ANNOTATION) != before:
        yield _ADMITTED_PATH, "only admitter sets this annotation; remove your change to it"


def _suspend_problems(request: AdmissionRequest) -> Iterator[Problem]:
    if _suspended(request.object) or is_admitted(request.old_object):
        return
    kind = request.kind
    yield "spec.suspend", (
        f"{request.username or 'you'} may not unsuspend a {kind} that admitter has not "
        f"admitted; keep spec.suspend true and admitter resumes the {kind} once its Workload "
        "is admitted "
        f"(see `kubectl get workloads -n {request.namespace}`)"
    )


async def _queue_and_contract_problems(
    request: AdmissionRequest, queue: str, lookup: Lookup, policy: JobPolicy, joining: bool
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
    elif joining:
        problem = _closed_queue_problem(local_queue, await lookup.cluster_queues())
        if problem is not None:
            problems.append((_LABEL_PATH, problem))
    problem = await contract_problem(_annotations(request.object), local_queue, lookup, policy)
    if problem is not None:
        problems.append(("metadata.annotations", problem))
    return problems


def _closed_queue_problem(local_queue: LocalQueue,
                          cluster_queues: list[ClusterQueue]) -> str | None:
    """Why a LocalQueue takes no new Jobs: it, or a ClusterQueue on its path, is being deleted
    (held by admitter's finalizer until its admitted Workloads are gone)."""
    name = local_queue.metadata.name
    if local_queue.metadata.deletion_timestamp is not None:
        return (f"LocalQueue {name!r} is being deleted (it waits for its admitted Workloads "
                "to finish) and takes no new Jobs; name another LocalQueue")
    by_name = {cq.metadata.name: cq for cq in cluster_queues}
    target: str | None = local_queue.spec.cluster_queue
    seen: set[str] = set()
    while target is not None and target not in seen:
        seen.add(target)
        cq = by_name.get(target)
        if cq is None:
            return None  # the controller says why the Job waits (admins may be mid-change)
        if cq.metadata.deletion_timestamp is not None:
            return (f"LocalQueue {name!r} feeds ClusterQueue {target!r}, which is being "
                    "deleted (it waits for its admitted Workloads to finish) and takes no "
                    "new Jobs; name another LocalQueue")
        target = cq.spec.parent
    return None


async def contract_problem(
    annotations: Mapping[str, str],
    local_queue: LocalQueue | None,
    lookup: Lookup,
    policy: JobPolicy,
) -> str | None:
    """The contract error, reading only the objects the present annotations need."""
    cap, ceiling = policy.max_min_runtime, None
    if local_queue is not None and (MIN_RUNTIME_ANNOTATION in annotations
                                    or MAX_RUNTIME_ANNOTATION in annotations):
        cap, ceiling = bounds(await lookup.cluster_queues(), local_queue.spec.cluster_queue,
                               policy)
    levels = None
    if TOPOLOGY_REQUIRED_ANNOTATION in annotations or TOPOLOGY_PREFERRED_ANNOTATION in annotations:
        levels = cluster_levels({t.metadata.name: t.spec.label_keys()
                                 for t in await lookup.topologies()})
    try:
        parse_contract(annotations, max_min_runtime=cap, max_runtime_ceiling=ceiling,
                       topology_levels=None if levels is None else list(levels))
    except ContractError as error:
        return str(error)
    return None


def bounds(cluster_queues: list[ClusterQueue], leaf: str,
            policy: JobPolicy) -> tuple[float, float | None]:
    """The nearest maxMinRuntime (else the settings') and maxRuntimeCeiling (else none) on
    the leaf's path; the settings' and none when the tree is incomplete."""
    default = policy.max_min_runtime
    try:
        tree = QueueTree(
            core_queue(cq.metadata.name, cq.spec, order) for order, cq in enumerate(cluster_queues)
        )
    except QueueTreeError:
        return default, None
    if leaf not in tree:
        return default, None
    return (effective_max_min_runtime(tree, leaf, default),
            effective_max_runtime_ceiling(tree, leaf))


def _contract_changed(new: Job, old: Job) -> bool:
    before, after = _annotations(old), _annotations(new)
    return any(before.get(key) != after.get(key) for key in CONTRACT_ANNOTATIONS)


def _part_of_queued_job(job: Job) -> bool:
    """A child of a job admitter queues (a JobSet's Jobs, made by its controller with the
    labels of its templates): queued and admitted as part of that job, not by itself."""
    return job_owner({"metadata": job.get("metadata") or {}}) is not None


def _queue(job: Job) -> str | None:
    return ((job.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)


def _annotations(job: Job) -> Mapping[str, str]:
    return (job.get("metadata") or {}).get("annotations") or {}


def _suspended(job: Job) -> bool:
    return job_of(dict(job)).is_suspended(dict(job))
