"""Writes that carry decisions out, ordered so that no job ever runs without an admission: an
admission is written to the Workload (the source of truth) before its Job starts; an eviction
marks the Workload, suspends the Job, and only then releases the admission. A controller
killed between two writes leaves a state `converge_step` repairs: an admitted Workload whose
Job is still suspended is started, an evicting one's Job suspended and its admission released,
a running Job whose Workload is not admitted is suspended."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.contract import VOIDED_ADMISSION_ANNOTATION
from admitter.api.duration import parse_duration
from admitter.api.workload import (
    CONDITION_ADMITTED,
    CONDITION_EVICTED,
    CONDITION_FINISHED,
    CONDITION_QUOTA_RESERVED,
    Reason,
)
from admitter.core.decisions import Admission, EvictionReason
from admitter.core.model import GPU, is_funded
from admitter.jobs.interface import ClearsStartTime
from admitter.jobs.registry import KINDS, JobKinds, job_of, reader_of
from admitter.jobs.workloads import resource_of
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import (
    Obj,
    condition,
    evicting,
    format_time,
    narrower_domains,
    parse_time,
)

BACKOFF_BASE = 60.0
"""Seconds a Workload evicted because its pods were not ready in time waits before it may be
admitted again, doubled with each eviction it has had (`evictionCount`): Kueue's
`requeuingStrategy.backoffBaseSeconds` default, so a job that cannot start (an image that
never pulls, a node that never readies its pods) stops taking GPUs from work that can."""
BACKOFF_CAP = 3600.0
"""The longest such wait, Kueue's `backoffMaxSeconds` default: from its seventh eviction on, a
broken job is retried hourly, which keeps it visible without letting it churn GPUs."""


def with_condition(conditions: list[Obj], kind: str, status: str, reason: str, message: str,
                   now: float) -> list[Obj]:
    """Conditions with one replaced; lastTransitionTime moves only when the status changes."""
    out = [dict(c) for c in conditions if c.get("type") != kind]
    previous = next((c for c in conditions if c.get("type") == kind), None)
    since = format_time(now)
    if previous is not None and previous.get("status") == status:
        since = previous.get("lastTransitionTime", since)
    out.append({"type": kind, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": since})
    return sorted(out, key=lambda c: c["type"])


def _conditions(wl: Obj) -> list[Obj]:
    return list((wl.get("status") or {}).get("conditions", []))


def run_seconds(wl: Obj, now: float) -> float:
    """How long the current run has lasted (0 when not admitted)."""
    admission = (wl.get("status") or {}).get("admission")
    if not admission:
        return 0.0
    return max(0.0, now - (parse_time(admission.get("admittedAt")) or now))


def charged_seconds(wl: Obj, now: float) -> float:
    """Funded GPU-seconds of the current run, to add to the Workload's charge."""
    spec = wl["spec"]
    if not is_funded(parse_duration(spec.get("minRuntime", 0))):
        return 0.0
    gpus = sum(p["count"] * int(p.get("requests", {}).get(GPU, 0)) for p in spec["podSets"])
    return gpus * run_seconds(wl, now)


def admission_status(wl: Obj, decision: Admission, now: float,
                     admitted_by: Obj | None = None) -> dict[str, Any]:
    """The Workload status fields an admission sets (the rest of its status is kept), with the
    leader's term it is written in (`Elector.fencing_token`), if elected."""
    conditions = with_condition(_conditions(wl), CONDITION_QUOTA_RESERVED, "True",
                                Reason.QUOTA_RESERVED,
                                f"quota reserved in ClusterQueue {decision.queue}", now)
    conditions = with_condition(conditions, CONDITION_ADMITTED, "True", Reason.ADMITTED,
                                decision.message, now)
    conditions = [c for c in conditions if c["type"] != CONDITION_EVICTED]
    hints = [{"podSet": wl["spec"]["podSets"][i]["name"], "node": node, "count": count}
             for i, counts in enumerate(decision.pod_set_nodes)
             for node, count in sorted(counts.items())]
    admission = {"clusterQueue": decision.queue, "topologyDomain": dict(decision.affinity),
                 "nodeHints": hints, "admittedAt": format_time(now)}
    if decision.pod_set_domains:
        admission["podSetDomains"] = [{"podSet": name, "domain": dict(domain)}
                                      for name, domain in decision.pod_set_domains]
    if admitted_by is not None:
        admission["admittedBy"] = admitted_by
    return {"admission": admission, "conditions": conditions, "requeueAt": None,
            "blockedUntil": None, "blockedBy": None}


class Actions:
    def __init__(self, client: Kube, kinds: JobKinds = KINDS, place_pods: bool = True) -> None:
        self.kube = client
        self.kinds = kinds
        """The job kinds as this controller reads them (a TrainJob's pins name its runtime's
        jobs)."""
        self.place_pods = place_pods
        """Whether started jobs' pods are held until each is given its node
        (`podPlacement: Node`, docs/placement.md)."""

    async def patch_workload_status(self, wl: Obj, status: Mapping[str, Any]) -> Obj:
        """Write status fields on the very version `wl` of the Workload the decision was made
        on: a write decided on an older version (a deposed leader's, a stale cache's)
        conflicts (409) instead of landing."""
        meta = wl["metadata"]
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": status}
        return await self.kube.patch(kube.WORKLOADS, meta["name"], patch, meta["namespace"],
                                     subresource="status")

    async def start_job(self, job: Obj, wl: Obj) -> Obj:
        """Inject the admission's domain as a required node affinity into every pod set, then
        unsuspend; on the version of the job it was decided for, so a job someone suspended
        meanwhile stays suspended. A kind whose templates are immutable after a run until a
        status field is unset (`ClearsStartTime`) gets that done first, as Kueue does."""
        job = await self.clear_start_time(job)
        kind = self.kinds.job_of(job)
        admission = wl["status"]["admission"]
        patch = kind.run_patch(job, wl["metadata"]["name"], admission.get("topologyDomain") or {},
                               narrower_domains(admission), self.place_pods)
        meta = job["metadata"]
        return await self.kube.patch(resource_of(kind), meta["name"], patch,
                                     meta["namespace"], content_type=kube.JSON_PATCH)

    async def clear_start_time(self, job: Obj) -> Obj:
        """Make a suspended job's templates mutable again, if its kind needs that; the job
        as it is afterwards."""
        kind = job_of(job)
        patch = kind.start_time_patch(job) if isinstance(kind, ClearsStartTime) else None
        if patch is None:
            return job
        meta = job["metadata"]
        return await self.kube.patch(resource_of(kind), meta["name"], patch,
                                     meta["namespace"], subresource="status")

    async def evict(self, wl: Obj, job: Obj | None, reason: str, message: str, now: float,
                    backoff: bool = False,
                    stop: Callable[[Obj], Awaitable[None]] | None = None) -> tuple[Obj, Obj | None]:
        """Suspend the Workload's Job (or `stop` what else runs for it), then release its
        quota; `backoff`: the Workload waits before it may be admitted again, the longer the
        more often it was evicted. Three writes, each safe to repeat, so that no job runs
        without an admission: the Workload is marked evicted with its admission kept (its
        room stays counted), the job is suspended, the admission is released. One interrupted
        between them leaves an evicting Workload (`evicting`) that converge carries on."""
        marked = wl if evicting(wl) else await self.patch_workload_status(
            wl, self._eviction_mark(wl, reason, message, now, backoff))
        suspended = None if job is None else await self.suspend_job(job)
        if stop is not None:
            await stop(marked)
        return await self.release(marked, now), suspended

    @staticmethod
    def _eviction_mark(wl: Obj, reason: str, message: str, now: float,
                       backoff: bool) -> dict[str, Any]:
        status = wl.get("status") or {}
        conditions = with_condition(_conditions(wl), CONDITION_EVICTED, "True", reason, message,
                                    now)
        count = int(status.get("evictionCount", 0)) + 1
        patch: dict[str, Any] = {
            "conditions": conditions, "evictionCount": count,
            "chargedGpuSeconds": float(status.get("chargedGpuSeconds", 0.0))
            + charged_seconds(wl, now),
            "pastRunSeconds": float(status.get("pastRunSeconds", 0.0)) + run_seconds(wl, now),
        }
        if backoff:
            patch["requeueAt"] = format_time(now + min(BACKOFF_CAP,
                                                       BACKOFF_BASE * 2 ** (count - 1)))
        return patch

    async def release(self, wl: Obj, now: float) -> Obj:
        """The last step of an eviction, once the job is suspended: the admission goes, and
        with it the quota. An eviction whose reason does not requeue (its maximum run time
        is over) finishes the Workload instead: the job stays suspended for good."""
        evicted = condition(wl, CONDITION_EVICTED) or {}
        if evicted.get("reason") == EvictionReason.MAX_RUNTIME_EXCEEDED.value:
            return await self.finish(wl, evicted["reason"], evicted.get("message", ""), now)
        conditions = with_condition(_conditions(wl), CONDITION_ADMITTED, "False",
                                    evicted.get("reason", Reason.REQUEUED),
                                    f"evicted: {evicted.get('message', '')}", now)
        conditions = with_condition(conditions, CONDITION_QUOTA_RESERVED, "False", Reason.REQUEUED,
                                    "waiting for admission again", now)
        return await self.patch_workload_status(wl, {"admission": None,
                                                     "conditions": conditions})

    async def settle_admission(self, key: tuple[str, str], decided_on: str,
                               now: float) -> Obj | None:
        """The Workload as the API has it now (None: gone), after voiding an admission
        decided on version `decided_on` if that version is still current: then the write,
        should it reach the API server late, conflicts."""
        try:
            current = await self.kube.get(kube.WORKLOADS, key[1], key[0])
        except ApiException as error:
            if kube.is_not_found(error):
                return None
            raise
        if current["metadata"].get("resourceVersion") != decided_on:
            return current
        return await self.void_admission(current, now)

    async def void_admission(self, wl: Obj, now: float) -> Obj:
        """Move the Workload's version on, conditional on the version read: an admission
        write decided on that version whose outcome was never learnt (the answer lost) can
        then never land, however late it reaches the API server."""
        meta = wl["metadata"]
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"],
                              "annotations": {VOIDED_ADMISSION_ANNOTATION: format_time(now)}}}
        return await self.kube.patch(kube.WORKLOADS, meta["name"], patch, meta["namespace"])

    async def move_workload(self, wl: Obj, queue: str) -> Obj:
        """A pending Workload follows its Job to another LocalQueue (the webhook lets only
        Jobs whose Workload holds no quota move). Conditional on the version read: an
        admission written meanwhile must not be moved under."""
        meta = wl["metadata"]
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                 "spec": {"queueName": queue}}
        return await self.kube.patch(kube.WORKLOADS, meta["name"], patch, meta["namespace"])

    async def suspend_job(self, job: Obj) -> Obj:
        """Suspend the job and take its admitted mark away in the same write: with the mark
        the webhook lets its owner unsuspend it, so an evicted job that kept it could run
        again without quota."""
        kind = job_of(job)
        meta = job["metadata"]
        return await self.kube.patch(resource_of(kind), meta["name"], kind.suspend_patch(job),
                                     meta["namespace"])

    async def restore_job(self, job: Obj) -> Obj:
        """Put back the templates' own affinity once the job is suspended and its templates
        mutable again (`clear_start_time`), and drop admitter's marks."""
        kind = job_of(job)
        meta = job["metadata"]
        return await self.kube.patch(resource_of(kind), meta["name"], kind.restore_patch(job),
                                     meta["namespace"], content_type=kube.JSON_PATCH)

    async def delete_workload(self, wl: Obj) -> None:
        """Delete this very Workload (uid and version as read), for a new one to be made."""
        meta = wl["metadata"]
        await self.kube.delete(kube.WORKLOADS, meta["name"], meta["namespace"], {
            "preconditions": {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}})

    async def finish(self, wl: Obj, reason: str, message: str, now: float) -> Obj:
        """Mark the Workload Finished and release its quota, charging the run so far (unless
        an eviction's mark charged it already). `Admitted` stays as it was (Kueue's way):
        `kubectl get wl` shows a finished Workload as admitted and finished, not as one that
        never ran."""
        conditions = with_condition(_conditions(wl), CONDITION_FINISHED, "True", reason,
                                    message, now)
        conditions = with_condition(conditions, CONDITION_QUOTA_RESERVED, "False", Reason.FINISHED,
                                    "finished; quota released", now)
        status = wl.get("status") or {}
        charged = 0.0 if evicting(wl) else charged_seconds(wl, now)
        return await self.patch_workload_status(wl, {
            "admission": None, "conditions": conditions,
            "chargedGpuSeconds": float(status.get("chargedGpuSeconds", 0.0)) + charged,
        })


def finish_reason(job: Obj) -> tuple[Reason, str]:
    """The Finished condition's reason and message for a job that completed or failed."""
    ended = reader_of(job).finished(job)
    assert ended is not None
    succeeded, message = ended
    return (Reason.SUCCEEDED if succeeded else Reason.FAILED), message
