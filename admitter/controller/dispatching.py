"""Carrying out an admission onto a worker cluster: the manager's job stays suspended, one
copy runs in the worker (`fleet/dispatch.py`), its progress is shown on the Workload's
`Dispatched` condition, and its end finishes the Workload. An evicted Workload's copy is deleted,
and its quota released only once the copy and its pods are gone. A copy whose Workload is gone
(its job deleted on the manager) is deleted; a Workload admitted onto a worker that was lost or
whose WorkerCluster was deleted is requeued."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.workload import CONDITION_DISPATCHED, Reason
from admitter.controller.actions import Actions, with_condition
from admitter.fleet.dispatch import (
    StaleCopy,
    copy_manifest,
    create_or_adopt,
    delete_copy,
    progress,
)
from admitter.fleet.fleet import Fleet
from admitter.fleet.worker import COPY_LABEL
from admitter.jobs.batch_job import BatchJob
from admitter.jobs.jobset import JobSet
from admitter.jobs.rayjob import RayJob
from admitter.jobs.registry import JobKinds
from admitter.jobs.workloads import resource_of
from admitter.kube import client as kube
from admitter.kube.core_values import admitted_cluster
from admitter.kube.informer import READ_ERRORS, Informer
from admitter.kube.objects import Obj, condition

log = logging.getLogger(__name__)
WORKER_LOST = "WorkerLost"
"""Evicted=True: the worker it was admitted onto did not answer for its grace period."""
WORKER_REMOVED = "WorkerRemoved"
"""Evicted=True: the WorkerCluster it was admitted onto was deleted."""
Finish = Callable[[Obj, Obj | None, str, str, float], Awaitable[None]]
Requeue = Callable[[Obj, str, str], Awaitable[object]]
"""Requeue a Workload (reason, message) without waiting for its copy: the manager cannot
reach it."""
JobKey = tuple[str, str, str]


class CopyStillRunning(RuntimeError):
    """An evicted Workload's copy (or its pods) still runs in a worker: its quota is held
    until they are gone."""


class Dispatch:
    def __init__(self, fleet: Fleet, actions: Actions, kinds: JobKinds,
                 workloads: Informer, own_nodes: Informer) -> None:
        self.fleet = fleet
        self.actions = actions
        self.kinds = kinds
        self.workloads = workloads
        self.own_nodes = own_nodes
        """The manager's own nodes: a cluster their labels name is no removed worker."""

    async def run(self, job: Obj, wl: Obj, now: float, finish: Finish) -> None:
        """Bring the copy of an admitted Workload along: delete copies left in other workers
        (it was moved), create or adopt it in its worker, show its progress, finish the
        Workload when it ends. Safe to repeat on every pass."""
        worker = self.fleet.worker_of(wl)
        if worker is None:
            return  # not connected (yet): the Workload keeps its quota meanwhile
        moved = [(w, c) for w, c in self.fleet.copies(wl) if w is not worker]
        if moved:
            # One copy at a time: the new one is created once the old ones are gone.
            for other, old in moved:
                if old is not None:
                    await delete_copy(other, old)
            return
        if not worker.offered:
            return  # it does not answer; the Workload keeps its quota meanwhile
        copy = worker.copy_of(wl["metadata"]["uid"])
        if copy is None:
            try:
                manifest = copy_manifest(await self._whole(job), wl, self.kinds)
            except ValueError as error:
                await self._show(wl, "False", "NotDispatched", str(error), now)
                return
            try:
                copy = await create_or_adopt(worker, manifest)
            except StaleCopy:
                return
            except ApiException as error:
                await self._show(wl, "False", "CreateRefused",
                                 f"not created in cluster {worker.name}: {error.status} "
                                 f"{kube.brief_reason(error)}", now)
                return
        meta = copy["metadata"]
        where = f"cluster {worker.name} as {meta['namespace']}/{meta['name']}"
        ended = self.kinds.job_of(copy).finished(copy)
        if ended is not None:
            succeeded, message = ended
            await finish(wl, job, Reason.SUCCEEDED if succeeded else Reason.FAILED,
                         f"{message} in {where}", now)
            return
        await self._show(wl, "True", "Running",
                         f"running in {where}: {progress(copy, self.kinds)}", now)

    async def _whole(self, job: Obj) -> Obj:
        """The job as the API server has it: the cache keeps only what admission reads
        (`jobs.projection`), and its copy runs all of it."""
        meta = job["metadata"]
        return await self.actions.kube.get(resource_of(self.kinds.job_of(job)), meta["name"],
                                           meta["namespace"])

    async def settle_workers(self, workloads: Iterable[Obj], requeue: Requeue) -> None:
        """Delete the copies no Workload stands for; requeue the Workloads admitted onto a
        lost worker or a deleted WorkerCluster; in a worker returning after it was lost,
        delete the copies of Workloads no longer admitted there, then offer its nodes again."""
        await self._delete_orphans()
        workers = self.fleet.workers.values()
        known: set[str] | None = None  # read only once an admission names a cluster
        unconnected = self.fleet.lost_unconnected()
        kept: dict[str, set[str]] = {}
        for wl in workloads:
            if not (wl.get("status") or {}).get("admission"):
                continue
            if (cluster := admitted_cluster(wl)) is not None:
                known = self.fleet.clusters_known(self.own_nodes) if known is None else known
                if cluster not in known:
                    await requeue(wl, WORKER_REMOVED,
                                  f"its WorkerCluster {cluster} was deleted; requeued (a copy "
                                  "still running there is no longer reached, nor deleted)")
                    continue
                if cluster in unconnected:
                    await requeue(wl, WORKER_LOST,
                                  f"cluster {cluster} could not be connected to for its grace "
                                  "period; requeued, its copy there is deleted once it is "
                                  "connected")
                    continue
            worker = self.fleet.worker_of(wl)
            if worker is not None and worker.lost:
                await requeue(wl, WORKER_LOST,
                              f"cluster {worker.name} did not answer for its grace period; "
                              "requeued, its copy there is deleted when it answers again")
            elif worker is not None:
                kept.setdefault(worker.name, set()).add(wl["metadata"].get("uid", ""))
        for worker in [w for w in workers if w.returning and w.health.reachable]:
            # its copies listed (it answers): those of Workloads moved meanwhile are known
            moved = [uid for uid in worker.copy_uids() if uid not in kept.get(worker.name, set())]
            for uid in moved:
                if (copy := worker.copy_of(uid)) is not None:
                    await delete_copy(worker, copy)
            if not moved:
                worker.returning = False
                self.fleet.on_change("MODIFIED", {"kind": "WorkerCluster",
                                                  "metadata": {"name": worker.name}})

    async def _delete_orphans(self) -> None:
        """Delete, in every worker that answers, the copies whose Workload no longer exists
        on the manager (its job was deleted, or finished and collected there): nothing would
        ever stop them, and their pods would hold the worker's nodes as its own usage. A copy
        is created only after its Workload's admission is in the cache, so a copy of a
        Workload the cache lacks is one whose Workload is gone."""
        held = [(worker, worker.copy_uids()) for worker in self.fleet.managed()
                if worker.health.reachable]
        if not any(uids for _, uids in held):
            return
        known = {wl["metadata"].get("uid") for wl in self.workloads.items()}
        for worker, uids in held:
            for uid in uids - known:
                copy = worker.copy_of(uid)
                if copy is None:
                    continue  # only its pods are left: they go with it
                log.info("cluster %s: deleting %s %s/%s, whose Workload is gone", worker.name,
                         copy["kind"], copy["metadata"]["namespace"], copy["metadata"]["name"])
                try:
                    await delete_copy(worker, copy)
                except READ_ERRORS as error:  # retried by the next pass
                    log.warning("cluster %s: %s %s/%s not deleted: %s", worker.name,
                                copy["kind"], copy["metadata"]["namespace"],
                                copy["metadata"]["name"], error)

    async def recall(self, wl: Obj) -> None:
        """Delete every copy of the Workload; its pods go with them."""
        for worker, copy in self.fleet.copies(wl):
            if copy is not None:
                await delete_copy(worker, copy)

    async def stop(self, wl: Obj) -> None:
        """Delete the Workload's copies; raise while they or their pods remain, so its
        quota stays held (the release is retried by later passes)."""
        await self.recall(wl)
        running = [worker.name for worker, _ in self.fleet.copies(wl)]
        if running:
            raise CopyStillRunning(f"its copy still runs in cluster {', '.join(running)}; "
                                   "quota is released once its pods are gone")

    async def _show(self, wl: Obj, status: str, reason: str, message: str, now: float) -> None:
        shown = condition(wl, CONDITION_DISPATCHED) or {}
        if (shown.get("status"), shown.get("reason"), shown.get("message")) == (
                status, reason, message):
            return
        conditions = with_condition(list((wl.get("status") or {}).get("conditions") or []),
                                    CONDITION_DISPATCHED, status, reason, message, now)
        try:
            self.workloads.observe(
                await self.actions.patch_workload_status(wl, {"conditions": conditions}))
        except ApiException as error:
            if not kube.is_conflict(error):
                raise  # changed meanwhile: the next pass looks again


_COPY_POD_LABELS = ((JobSet.kind, JobSet.pod_label), (RayJob.kind, RayJob.pod_label),
                    (BatchJob.kind, "batch.kubernetes.io/job-name"))
"""(kind, label naming the job) on a copy's pods, the outermost kind first: a JobSet's pods
carry its child Job's name too; a RayJob's Ray pods and submitter pod name it
(`rayjob.POD_LABEL`), the submitter pod its Job too."""


def copy_job_key(obj: Obj) -> JobKey | None:
    """The manager's job a worker's copy (or a copy's pod) stands for: the same kind,
    namespace and name."""
    labels = obj["metadata"].get("labels") or {}
    if COPY_LABEL not in labels:
        return None
    namespace = obj["metadata"].get("namespace", "")
    if obj.get("kind") != "Pod":
        return (obj.get("kind", ""), namespace, obj["metadata"].get("name", ""))
    return next(((kind, namespace, labels[label]) for kind, label in _COPY_POD_LABELS
                 if labels.get(label)), None)
