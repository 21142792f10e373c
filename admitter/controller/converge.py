"""What brings a Job and its Workload together, decided from the two objects alone.

Every pass compares each Job it checks with its Workload, whatever was interrupted before or
whatever the Job's owner changed since: a finished Job releases its quota, an admitted one
runs, any other stays suspended. The Job must also still be what its Workload was admitted
for (Kueue's EquivalentToWorkload): a Job whose parallelism was raised after admission would
run more pods than were charged, so it is evicted, and its Workload replaced by one that
matches.
"""

from __future__ import annotations

from enum import Enum

from admitter.api.contract import (
    ADMITTED_WORKLOAD_ANNOTATION,
    ORIGINAL_AFFINITY_ANNOTATION,
    QUEUE_LABEL,
)
from admitter.api.quantity import kube_base_units
from admitter.api.workload import CONDITION_FINISHED
from admitter.jobs.claims import UncountableClaim
from admitter.jobs.interface import ClearsStartTime, ShapedAtStart
from admitter.jobs.registry import KINDS, JobKinds, job_of
from admitter.jobs.workloads import job_ended
from admitter.kube.objects import Obj, evicting, is_true


class Step(Enum):
    NONE = "none"
    FINISH = "finish"
    """The Job completed or failed: mark the Workload Finished, releasing its quota."""
    START = "start"
    """Admitted, still suspended: pin to the admitted domain and unsuspend."""
    SUSPEND = "suspend"
    """Running without an admitted Workload, or with one being evicted: suspend it (and take
    the admitted mark away)."""
    RELEASE = "release"
    """Evicting (`evicting`) and its Job suspended: release the admission."""
    EVICT_CHANGED = "evict-changed"
    """Admitted, but no longer what was admitted: release the quota and suspend."""
    REPLACE_WORKLOAD = "replace-workload"
    """Not admitted and no longer what its Workload says: delete the Workload, so that a new
    one is made from the Job as it is now."""
    CLEAR_START_TIME = "clear-start-time"
    """Suspended after it ran: unset status.startTime, so its template can change again."""
    MOVE = "move"
    """Pending, and its Job now names another LocalQueue: the Workload follows (the webhook
    lets only Jobs whose Workload holds no quota move)."""
    RESTORE = "restore"
    """Suspended, never running now: put its own affinity back and drop admitter's marks."""


def converge_step(job: Obj, wl: Obj, kinds: JobKinds = KINDS) -> Step:
    """The one write that brings `job` and its Workload `wl` closer together, if any."""
    if job_ended(job):
        return Step.NONE if is_true(wl, CONDITION_FINISHED) else Step.FINISH
    admitted = bool((wl.get("status") or {}).get("admission"))
    kind = job_of(job)
    suspended = kind.is_suspended(job)
    runs_as_started = admitted and not suspended and isinstance(kind, ShapedAtStart)
    if not runs_as_started and not equivalent(job, wl, kinds):
        return Step.EVICT_CHANGED if admitted else Step.REPLACE_WORKLOAD
    if admitted and evicting(wl):
        return Step.RELEASE if suspended else Step.SUSPEND
    if admitted:
        return Step.START if suspended else Step.NONE
    if queue_of(job) not in (None, wl["spec"]["queueName"]):
        return Step.MOVE
    if not suspended:
        return Step.SUSPEND
    annotations = job["metadata"].get("annotations") or {}
    if ORIGINAL_AFFINITY_ANNOTATION in annotations or ADMITTED_WORKLOAD_ANNOTATION in annotations:
        clears = isinstance(kind, ClearsStartTime) and kind.start_time_patch(job) is not None
        return Step.CLEAR_START_TIME if clears else Step.RESTORE
    return Step.NONE


def equivalent(job: Obj, wl: Obj, kinds: JobKinds = KINDS) -> bool:
    """Whether the job runs the pods its Workload is charged for: the same pod sets, each
    as many pods at once, each requesting the same amounts (in the base units the core
    counts)."""
    charged = wl["spec"]["podSets"]
    running = kinds.reader_of(job).pod_sets(job)
    if [p["name"] for p in charged] != [p.name for p in running]:
        return False
    for pod_set, now in zip(charged, running, strict=True):
        requests = {r: kube_base_units(r, a)
                    for r, a in (pod_set.get("requests") or {}).items()}
        if int(pod_set["count"]) != now.count:
            return False
        try:
            demand = kinds.pod_demand(job["metadata"]["namespace"], now.pod_spec)
        except UncountableClaim:
            # Claims counted when the Workload was made that cannot be now (their template
            # deleted, the class's mapping removed): the claims made stay as they were, and
            # so does the charge; a job that cannot converge could not be evicted either.
            continue
        if requests != {r: kube_base_units(r, a) for r, a in demand.items()}:
            return False
    return True


def queue_of(job: Obj) -> str | None:
    """The LocalQueue the Job's label names."""
    return (job["metadata"].get("labels") or {}).get(QUEUE_LABEL)
