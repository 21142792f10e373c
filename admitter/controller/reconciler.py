"""The reconcile loop: Jobs get Workloads, Jobs converge to their Workload's admission, and
each cycle runs the decision core on a fresh snapshot and carries out what it decided.

A pass runs on every change the informers see (debounced) and at least every `cycle` seconds.
Only the leader runs passes; followers keep their caches warm.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.contract import (
    ADMITTED_WORKLOAD_ANNOTATION,
    QUEUE_LABEL,
    ContractError,
    parse_contract,
)
from admitter.api.convert import effective_max_min_runtime
from admitter.api.settings import Settings
from admitter.controller import kube
from admitter.controller.actions import Actions, admission_status
from admitter.controller.admitting import Admitting
from admitter.controller.cache import Caches
from admitter.controller.events import REPEAT_AFTER, EventRecorder
from admitter.controller.informer import Key, key_of
from admitter.controller.kube import Kube, Obj
from admitter.controller.metrics import Metrics
from admitter.controller.queue_holds import QueueFinalizers, holdings
from admitter.controller.snapshot import Translations, View, build_view, core_queues
from admitter.controller.status import StatusWriter
from admitter.controller.translate import (
    condition,
    is_true,
    job_owner,
    parse_time,
    workload_for_job,
    workload_name,
)
from admitter.core.cycle import run_cycle
from admitter.core.decisions import Admission, CycleResult, Eviction, Pending
from admitter.core.queue_tree import QueueTree

log = logging.getLogger(__name__)
DEBOUNCE = 0.2
SWEEP_EVERY = 30.0
"""Seconds between passes that check every Job, not only those whose objects changed (a
write that failed leaves no change behind to be seen)."""


class Reconciler:
    def __init__(self, client: Kube, settings: Settings, identity: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.kube = client
        self.settings = settings
        self.clock = clock
        self.caches = Caches.create(client, self._changed)
        self.actions = Actions(client)
        self.events = EventRecorder(client, identity)
        self.status = StatusWriter(client, settings.fair_share.window)
        self.queue_finalizers = QueueFinalizers(client, self._observe_queue)
        self.metrics = Metrics()
        self.translations = Translations()
        self.creations: asyncio.Task[None] | None = None
        """The batch of Workload creations in flight, if any."""
        self.reports: asyncio.Task[None] | None = None
        """The batch of pending-reason and queue-status writes in flight, if any."""
        self.report_owed = False
        """Whether a pass found that batch going and left its report to a later pass."""
        self.admitting = Admitting()
        self.wakeup = asyncio.Event()
        self.passes = 0
        self.waiting = True
        """Whether the last pass left a Workload pending or evicted one: then any change may
        make room, and every change wakes the loop."""
        self.touched: set[Key] = set()
        """Jobs whose Job or Workload changed since a pass last checked them."""
        self._swept_at = -math.inf

    def _changed(self, event: str, obj: Obj) -> None:
        kind = obj.get("kind")
        if kind == "Job":
            self.touched.add(key_of(obj))
        elif kind == "Workload" and (owner := job_owner(obj)) is not None:
            self.touched.add((obj["metadata"]["namespace"], owner["name"]))
        if self.waiting or _matters_when_idle(event, obj):
            self.wakeup.set()

    def jobs_to_check(self, now: float) -> list[Obj]:
        """The Jobs whose Job or Workload changed since they were last checked, or every Job
        once per SWEEP_EVERY: checking all of thousands of finished Jobs on every pass cost
        more than the cycle itself."""
        if now - self._swept_at >= SWEEP_EVERY:
            self._swept_at = now
            return self.caches.jobs.items()
        found = (self.caches.jobs.get(*key) for key in self.touched)
        return [job for job in found if job is not None]

    async def run_informers(self) -> None:
        await asyncio.gather(*(informer.run() for informer in self.caches.all()))

    async def run(self) -> None:
        """Reconcile forever (the leader's loop)."""
        await self.caches.wait_synced()
        try:
            while True:
                result: CycleResult | None = None
                try:
                    result = await self.reconcile()
                except ApiException as error:
                    log.warning("reconcile pass failed, retrying: %s", error)
                except Exception:
                    log.exception("reconcile pass crashed; the next pass starts from the API "
                                  "state")
                now = self.clock()
                wait = min(periodic_wait(result, self.settings.cycle, now),
                           max(self.status.next_due - now, 0.0))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), timeout=wait)
                await asyncio.sleep(DEBOUNCE)
                self.wakeup.clear()
        finally:
            self.admitting.cancel()
            for batch in (self.creations, self.reports, *self.events.sending):
                if batch is not None:
                    batch.cancel()

    async def reconcile(self) -> CycleResult:
        """One pass; every step reads the caches and is safe to repeat."""
        now = self.clock()
        jobs = self.jobs_to_check(now)
        checked = {key_of(job) for job in jobs}
        if self.ensure_workloads(now, jobs):
            self.touched -= checked  # else those without a Workload wait for the next pass
        await self.converge_jobs(now, jobs)
        view = build_view(self.caches, self.settings, now, self.translations,
                          self.admitting.overlay)
        began = time.perf_counter()
        result = await asyncio.to_thread(run_cycle, view.snapshot)
        elapsed = time.perf_counter() - began
        self.metrics.observe_cycle(result, elapsed, view.cluster_queues)
        await self.apply(view, result, now)
        self.passes += 1
        self.waiting = bool(result.pending or result.evictions)
        return result

    # Jobs and their Workloads -----------------------------------------------------------

    def ensure_workloads(self, now: float, jobs: list[Obj]) -> bool:
        """Start creating the Workload of every one of `jobs` that has none yet, in the
        background and one batch at a time: the pass goes on with the Workloads that exist,
        and the new ones (their watch events wake the loop) join a later pass. False when the
        previous batch is still going and nothing was looked at."""
        if self.creations is not None and not self.creations.done():
            return False
        missing = [
            job for job in jobs
            if self.caches.workloads.get(job["metadata"]["namespace"], workload_name(job)) is None
            and not (is_true(job, "Complete") or is_true(job, "Failed"))
        ]
        if not missing:
            return True
        by_name = {cq["metadata"]["name"]: cq for cq in self.caches.cluster_queues.items()}
        tree = QueueTree(core_queues(by_name))
        self.creations = asyncio.create_task(
            kube.each([self._create_workload(job, tree, now) for job in missing]))
        self.creations.add_done_callback(_log_failure)
        return True

    async def _create_workload(self, job: Obj, tree: QueueTree, now: float) -> None:
        try:
            workload = self._workload_for(job, tree)
        except ContractError as error:
            self.events.record(job, "Job", "Warning", "InvalidContract", str(error), now,
                               REPEAT_AFTER)
            return
        try:
            created = await self.kube.create(kube.WORKLOADS, workload)
        except ApiException as error:
            if error.status != 409:
                raise
            return
        self.caches.workloads.observe(created)

    def _workload_for(self, job: Obj, tree: QueueTree) -> Obj:
        meta = job["metadata"]
        local_queue = meta["labels"][QUEUE_LABEL]
        cluster_queue = self.caches.cluster_queue_of(meta["namespace"], local_queue)
        limit = self.settings.max_min_runtime
        if cluster_queue is not None and cluster_queue in tree:
            limit = effective_max_min_runtime(tree, cluster_queue, limit)
        contract = parse_contract(meta.get("annotations") or {}, max_min_runtime=limit,
                                  topology_levels=self.caches.topology_levels())
        template = job["spec"]["template"]["spec"]
        priority = self.caches.priority_of(template.get("priorityClassName"))
        return workload_for_job(job, contract, priority)

    async def converge_jobs(self, now: float, jobs: list[Obj]) -> None:
        """Make each of `jobs` agree with its Workload, whatever was interrupted before; the
        writes for different Jobs go out concurrently (a burst of finishes is common)."""
        writes = []
        for job in jobs:
            namespace, name = job["metadata"]["namespace"], workload_name(job)
            wl = self.caches.workloads.get(namespace, name)
            if wl is None or self.admitting.busy(namespace, name):
                continue
            converge = self._converge(job, wl, now)
            if converge is not None:
                writes.append(converge)
        await kube.each(writes)

    def _converge(self, job: Obj, wl: Obj, now: float) -> Coroutine[Any, Any, None] | None:
        """The write that brings the Job and its Workload together, if they disagree."""
        finished = is_true(job, "Complete") or is_true(job, "Failed")
        admitted = bool((wl.get("status") or {}).get("admission"))
        suspended = bool(job["spec"].get("suspend"))
        annotations = job["metadata"].get("annotations") or {}
        if finished:
            return None if is_true(wl, "Finished") else self._finish(wl, job, now)
        queue = (job["metadata"].get("labels") or {}).get(QUEUE_LABEL)
        if not admitted and queue and queue != wl["spec"]["queueName"]:
            return self._observe_workload(self.actions.move_workload(wl, queue))
        if admitted and suspended:
            return self._observe_job(self.actions.start_job(job, wl))
        if not admitted and not suspended:
            return self._observe_job(self.actions.suspend_job(job))
        if (not admitted and ADMITTED_WORKLOAD_ANNOTATION in annotations
                and not (job.get("status") or {}).get("startTime")):
            # The job controller clears startTime once a suspended Job's pods are gone;
            # only then may the template change again.
            return self._observe_job(self.actions.restore_job(job))
        return None

    async def _finish(self, wl: Obj, job: Obj, now: float) -> None:
        self.caches.workloads.observe(await self.actions.finish(wl, job, now))
        self._record(wl, job, "Finished", "quota released", now)

    def _observe_queue(self, queue: Obj) -> None:
        informer = (self.caches.local_queues if queue["metadata"].get("namespace")
                    else self.caches.cluster_queues)
        informer.observe(queue)

    async def _observe_job(self, write: Coroutine[Any, Any, Obj]) -> None:
        self.caches.jobs.observe(await write)

    async def _observe_workload(self, write: Coroutine[Any, Any, Obj]) -> None:
        try:
            self.caches.workloads.observe(await write)
        except ApiException as error:
            if not kube.is_conflict(error):
                raise  # changed meanwhile: the next pass looks again

    # Decisions ------------------------------------------------------------------------

    async def apply(self, view: View, result: CycleResult, now: float) -> None:
        """Evictions first (they make the room admissions were decided on), then admissions,
        which are written in the background (`Admitting`); writes for different workloads go
        out concurrently. What they change for operators to read is reported in the
        background too."""
        await kube.each([self._evict(view, e, now) for e in result.evictions])
        self.queue_finalizers.sync(view.cluster_queues, view.local_queues, view.workloads,
                                   result.admissions)
        for admission in result.admissions:
            wl = view.workloads[admission.key]
            status = admission_status(wl, admission, now)
            meta = wl["metadata"]
            admitted = {**wl, "status": {**(wl.get("status") or {}), **status},
                        "metadata": {**meta, "resourceVersion":
                                     f"{meta.get('resourceVersion')}+admitting"}}
            self.admitting.start(admitted, self._admit(wl, admission, status, now))
        self.report(view, result, now)

    def report(self, view: View, result: CycleResult, now: float) -> None:
        """Start writing the pending reasons that changed and the queues' status, one batch
        at a time: the next pass need not wait for them. What is due is decided here, so
        `status.next_due` is known when the pass ends; a pass that finds the previous batch
        still going leaves its report to the pass that batch's end wakes (each report is
        complete in itself)."""
        if self.reports is not None and not self.reports.done():
            self.status.begin()  # what was due waits for the batch's end, not a timer
            if not self.report_owed:
                self.report_owed = True
                self.reports.add_done_callback(lambda _: self.wakeup.set())
            return
        self.report_owed = False
        self.status.begin()
        decisions = [*result.pending, *view.closed.values()]
        explain = self.status.pending_due(view.workloads, decisions, now)
        pending = [view.workloads[p.key] for p in decisions if p.key in view.workloads]
        held = holdings(view.cluster_queues, view.workloads.values())
        self.reports = asyncio.create_task(kube.each([
            *(self._explain(wl, p, now) for wl, p in explain),
            *self.status.cluster_queue_writes(view.cluster_queues, result,
                                              view.snapshot.workloads, held, now),
            *self.status.local_queue_writes(view.local_queues.values(), pending, held, now),
        ]))
        self.reports.add_done_callback(_log_failure)

    async def _evict(self, view: View, eviction: Eviction, now: float) -> None:
        meta = view.workloads[eviction.key]["metadata"]
        await self.admitting.wait(meta["namespace"], meta["name"])
        wl = self.caches.workloads.get(meta["namespace"], meta["name"])
        if wl is None or not (wl.get("status") or {}).get("admission"):
            return  # its admission was never written; nothing holds its room
        job = self.caches.job_of(wl)
        updated, suspended = await self.actions.evict(wl, job, eviction, now)
        self.metrics.observe_eviction(eviction.queue, eviction.reason.value)
        self.caches.workloads.observe(updated)
        if suspended is not None:
            self.caches.jobs.observe(suspended)
        by = f" for {eviction.preemptor}" if eviction.preemptor else ""
        message = f"{eviction.reason.value}{by}: {eviction.message}"
        self._record(wl, job, eviction.reason.value, message, now)

    async def _admit(self, wl: Obj, admission: Admission, status: dict[str, object],
                     now: float) -> None:
        await self.queue_finalizers.held(admission.key)  # else the admission is not written
        job = self.caches.job_of(wl)
        updated, started = await self.actions.admit(wl, job, status)
        created = parse_time(wl["metadata"].get("creationTimestamp")) or now
        self.metrics.observe_admission(admission.queue, max(0.0, now - created))
        self.caches.workloads.observe(updated)
        if started is not None:
            self.caches.jobs.observe(started)
        self._record(wl, job, "Admitted", admission.message, now)

    async def _explain(self, wl: Obj, pending: Pending, now: float) -> None:
        """Write why the Workload waits; an Event only when the reason changed and was not
        recorded within REPEAT_AFTER (a reason flipping back and forth as the cluster churns
        is told once), so `kubectl describe` tells the story without an Event per pass."""
        shown = condition(wl, "QuotaReserved") or {}
        updated = await self.status.pending(wl, pending, now)
        if updated is None:
            return  # changed meanwhile; a later pass looks again
        self.caches.workloads.observe(updated)
        if shown.get("reason") != pending.reason:
            self._record(wl, self.caches.job_of(wl), pending.reason, pending.message, now,
                         REPEAT_AFTER, per_reason=True)

    def _record(self, wl: Obj, job: Obj | None, reason: str, message: str, now: float,
                repeat_after: float = 0.0, per_reason: bool = False) -> None:
        """One Event per decision, on the object its owner made: the Job, or the Workload
        when it was created directly."""
        target, kind = (job, "Job") if job is not None else (wl, "Workload")
        self.events.record(target, kind, "Normal", reason, message, now, repeat_after,
                           per_reason)


def periodic_wait(result: CycleResult | None, cycle: float, now: float) -> float:
    """Seconds until the next pass if no change wakes the loop first: one cycle while the last
    pass's own decisions may unblock more (or it failed); otherwise nothing can be decided
    anew before the moment the core named (`CycleResult.next_change`), so until then, but at
    least every SWEEP_EVERY for what the core does not name (usage sliding through the
    fair-share window, failed writes the sweep retries, refreshed status)."""
    if result is None or ((result.admissions or result.evictions) and not result.settled):
        return cycle
    wait = SWEEP_EVERY if result.next_change is None else min(SWEEP_EVERY,
                                                                result.next_change - now)
    return max(wait, 0.0)


def _matters_when_idle(event: str, obj: Obj) -> bool:
    """With nothing waiting, pods and Job status move constantly (a fill's pods starting)
    but decide nothing; they wait for the periodic pass, except a Job that finished (its
    quota is released at once) and Jobs coming or going."""
    kind = obj.get("kind")
    if kind == "Pod":
        return False
    if kind == "Job" and event == "MODIFIED":
        return is_true(obj, "Complete") or is_true(obj, "Failed")
    return True


def _log_failure(batch: asyncio.Task[None]) -> None:
    """A background batch of writes failed; a later pass starts over from the API state."""
    if not batch.cancelled() and batch.exception() is not None:
        log.warning("background writes failed, a later pass retries: %s", batch.exception())
