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
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.contract import QUEUE_LABEL, ContractError
from admitter.api.convert import (
    core_cycle_settings,
    effective_max_min_runtime,
    effective_max_runtime_ceiling,
)
from admitter.api.settings import Settings
from admitter.api.workload import CONDITION_QUOTA_RESERVED, Reason
from admitter.controller.actions import Actions, admission_status, finish_reason
from admitter.controller.admitting import Admitting, NotWritten
from admitter.controller.cache import Caches, job_key
from admitter.controller.converge import Step, converge_step, queue_of
from admitter.controller.dispatching import CopyStillRunning, Dispatch, copy_job_key
from admitter.controller.frozen_heap import decide_frozen, one_at_a_time
from admitter.controller.metrics import Metrics
from admitter.controller.orphans import Orphans
from admitter.controller.pacing import DEBOUNCE, SWEEP_EVERY, matters_when_idle, periodic_wait
from admitter.controller.placement import PodPlacer, Stranded
from admitter.controller.plain_pods import PlainPods
from admitter.controller.pod_index import JobKey
from admitter.controller.queue_holds import QueueClosing, QueueFinalizers
from admitter.controller.snapshot import Translations, View, build_view, core_queues
from admitter.controller.status import QueueUsage, StatusWriter
from admitter.controller.unreadable import UNREADABLE_ERRORS
from admitter.core.decisions import (
    Admission,
    CycleResult,
    Eviction,
    EvictionReason,
    Pending,
    Snapshot,
)
from admitter.core.incremental import IncrementalCore
from admitter.core.queue_tree import QueueTree
from admitter.fleet.fleet import Fleet
from admitter.jobs.plain_pod import PlainPod
from admitter.jobs.registry import SUSPENDABLE, reader_of
from admitter.jobs.workloads import (
    job_contract,
    job_ended,
    job_owner,
    priority_class_of,
    workload_for,
    workload_name,
)
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.events import REPEAT_AFTER, EventRecorder, refusal
from admitter.kube.objects import Obj, condition, parse_time

log = logging.getLogger(__name__)


class Reconciler:
    def __init__(self, client: Kube, settings: Settings, identity: str,
                 clock: Callable[[], float] = time.time,
                 decide: Callable[[Snapshot], CycleResult] | None = None,
                 fencing_token: Callable[[], Obj] | None = None,
                 namespace: str = "admitter-system") -> None:
        self.kube = client
        self.fencing_token = fencing_token
        """The leader's term each admission records (None: the controller runs unelected)."""
        self.decide = decide if decide is not None else one_at_a_time(IncrementalCore(
            (), (), (), core_cycle_settings(settings)).decide)
        """The core kept from pass to pass, synced to each snapshot (or a test's own)."""
        self.settings = settings
        self.clock = clock
        self.caches = Caches.create(client, self._changed, settings.device_classes())
        place_pods = settings.pod_placement == "Node"
        self.actions = Actions(client, self.caches.kinds, place_pods)
        self.events = EventRecorder(client, identity)
        self.status = StatusWriter(client)
        self.usage = QueueUsage(core_cycle_settings(settings))
        """Funded GPU time per queue, restored from the ClusterQueues by each new leader."""
        self.queue_finalizers = QueueFinalizers(client, self._observe_queue)
        self.metrics = Metrics()
        self.plain_pods = PlainPods(client, self.caches, place_pods)
        self.placer = PodPlacer(client, self.caches)
        self.translations = Translations()
        self.unreadable = self.caches.pod_index.unreadable
        """Objects skipped because they cannot be understood, reported after every pass."""
        self.orphans = Orphans(client)
        self.fleet = Fleet(client, namespace, self._changed, clock)
        """The worker clusters, if WorkerClusters name any; `namespace` (admitter's own) holds
        their kubeconfig Secrets."""
        self.dispatch = Dispatch(self.fleet, self.actions, self.caches.kinds,
                                 self.caches.workloads, self.caches.nodes)
        self.creations: asyncio.Task[None] | None = None
        """The batch of Workload creations in flight, if any."""
        self.reports: asyncio.Task[None] | None = None
        """The batch of pending-reason and queue-status writes in flight, if any."""
        self.report_owed = False  # a pass found that batch going and left its report to later
        self.admitting = Admitting()
        self.wakeup = asyncio.Event()
        self.passes = 0
        self.waiting = True
        """Whether the last pass left a Workload pending or evicted one: then any change may
        make room, and every change wakes the loop."""
        self.touched: set[JobKey] = set()
        """Jobs whose job or Workload changed since a pass last checked them."""
        self._swept_at = -math.inf

    def _touch(self, key: JobKey) -> None:
        self.touched.add(key)
        self.wakeup.set()

    def _changed(self, event: str, obj: Obj) -> None:
        kind = obj.get("kind")
        if (copied := copy_job_key(obj)) is not None:  # a worker's copy, or its pod
            self.touched.add(copied)
        elif kind in SUSPENDABLE:
            self.touched.add(job_key(obj))
        elif kind == "Workload" and (owner := job_owner(obj)) is not None:
            self.touched.add((owner["kind"], obj["metadata"]["namespace"], owner["name"]))
        elif kind in self.caches.runtimes:  # a TrainJob waiting for it starts in this cycle
            self.touched.update(self.caches.jobs_reading(obj))
        if (self.waiting or matters_when_idle(event, obj)
                or (kind == "Pod" and self.placer.wakes(event, obj))):
            self.wakeup.set()

    def jobs_to_check(self, now: float) -> dict[JobKey, Obj]:
        """The jobs whose job or Workload changed since they were last checked, or every job
        once per SWEEP_EVERY: checking all of thousands of finished Jobs on every pass cost
        more than the cycle itself. Keyed by the kind of the informer holding them (what the
        object says may be anything). A child of a queued job (a JobSet's Job, labelled
        through its template) is left to its parent's Workload."""
        keys: Iterable[JobKey] = self.touched
        if now - self._swept_at >= SWEEP_EVERY:
            self._swept_at, keys = now, self.caches.job_keys()
        return {key: job for key in keys
                if (job := self.caches.job(key)) is not None and not self._is_child(key, job)}

    def _is_child(self, key: JobKey, job: Obj) -> bool:
        try:
            return job_owner(job) is not None
        except UNREADABLE_ERRORS as error:
            self.unreadable.add(key[0], job, error)
            return True

    async def run_informers(self) -> None:
        await asyncio.gather(*(informer.run() for informer in self.caches.all()),
                             self.fleet.run())

    async def run(self) -> None:
        """Reconcile forever (the leader's loop)."""
        await self.caches.wait_synced()
        await self.fleet.synced()
        # What an earlier leader wrote may not have reached this replica's watch yet (a
        # watch broken by the fault that ended it lags): read the Workloads afresh.
        await self.caches.workloads.refresh()
        self._swept_at = -math.inf  # a new leader checks every Job at once
        # and reads usage from the ClusterQueues: its own may miss what another leader charged
        self.usage = QueueUsage(core_cycle_settings(self.settings))
        try:
            while True:
                result: CycleResult | None = None
                # A cache re-listing holds an older state than its last list did: no pass
                # decides until every cache is whole again.
                await self.caches.wait_synced()
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
                # Not asyncio.wait_for: on Python 3.11 it returns when the wakeup and a
                # cancellation (the lease lost) land together, dropping the cancellation, so
                # the loop ran on and the elector waited for it forever.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self.wakeup.wait()
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
        self.admitting.settle(self.caches.workloads,
                              lambda key, version: self.actions.settle_admission(
                                  key, version, self.clock()))
        jobs = self.jobs_to_check(now)
        checked = set(jobs)
        if self.ensure_workloads(now, jobs):
            self.touched -= checked  # else those without a Workload wait for the next pass
        await self.converge_jobs(now, jobs)
        await self.dispatch.settle_workers(
            self.caches.unfinished_workloads(),
            lambda wl, reason, message: self._isolated(
                "requeue", wl, self._requeue_from_worker(wl, reason, message, now)))
        view = build_view(self.caches, self.settings, now, self.translations,
                          self.admitting.overlay, self.unreadable, self.usage, self.fleet)
        await self.orphans.finish(view.orphans, now, self._isolated, self._finish)
        began = time.perf_counter()
        result = await asyncio.to_thread(decide_frozen, self.decide, view.snapshot)
        elapsed = time.perf_counter() - began
        self.metrics.observe_cycle(result, elapsed, view,
                                   view.holdings,
                                   self.usage)
        self.metrics.observe_fleet(view, self.fleet.reachable())
        await self.apply(view, result, now)
        await self.place_pods(now)
        self.report_unreadable(now)
        self.passes += 1
        self.waiting = bool(result.pending or result.evictions)
        return result

    # Jobs and their Workloads -----------------------------------------------------------

    def ensure_workloads(self, now: float, jobs: Mapping[JobKey, Obj]) -> bool:
        """Start creating the Workload of every one of `jobs` that has none yet, in the
        background and one batch at a time: the pass goes on with the Workloads that exist,
        and the new ones (their watch events wake the loop) join a later pass. False when the
        previous batch is still going and nothing was looked at."""
        if self.creations is not None and not self.creations.done():
            return False
        missing = [(kind, job) for (kind, *_), job in jobs.items()
                   if self._lacks_workload(kind, job)]
        missing += [(PlainPod.kind, pod) for pod in self.plain_pods.lacking_workloads()]
        if not missing:
            return True
        by_name = {cq["metadata"]["name"]: cq for cq in self.caches.cluster_queues.items()}
        tree = QueueTree(core_queues(by_name, translations=self.translations))
        self.creations = asyncio.create_task(
            kube.each([self._create_workload(kind, job, tree, now) for kind, job in missing]))
        self.creations.add_done_callback(_log_failure)
        return True

    def _lacks_workload(self, kind: str, job: Obj) -> bool:
        try:
            return (self.caches.workloads.get(job["metadata"]["namespace"],
                                              workload_name(job)) is None
                    and not job_ended(job))
        except UNREADABLE_ERRORS as error:
            self.unreadable.add(kind, job, error)
            return False

    async def _create_workload(self, kind: str, job: Obj, tree: QueueTree,
                               now: float) -> None:
        try:
            workload = self._workload_for(job, tree)
        except ContractError as error:
            self.events.record(job, kind, "Warning", Reason.INVALID_CONTRACT, str(error), now,
                               REPEAT_AFTER)
            return
        except UNREADABLE_ERRORS as error:
            self.unreadable.add(kind, job, error)
            return
        try:
            created = await self.kube.create(kube.WORKLOADS, workload)
        except ApiException as error:
            if (refused := refusal(error)) is not None:
                self.events.record(job, kind, "Warning", Reason.REFUSED,
                                   f"its Workload cannot be created: {refused}", now,
                                   REPEAT_AFTER)
            elif error.status != 409:
                raise
            return
        self.caches.workloads.observe(created)

    def _workload_for(self, job: Obj, tree: QueueTree) -> Obj:
        meta = job["metadata"]
        local_queue = meta["labels"][QUEUE_LABEL]
        cluster_queue = self.caches.cluster_queue_of(meta["namespace"], local_queue)
        limit, ceiling = self.settings.max_min_runtime, None
        if cluster_queue is not None and cluster_queue in tree:
            limit = effective_max_min_runtime(tree, cluster_queue, limit)
            ceiling = effective_max_runtime_ceiling(tree, cluster_queue)
        kinds = self.caches.kinds
        contract = job_contract(job, max_min_runtime=limit, max_runtime_ceiling=ceiling,
                                topology_levels=self.caches.topology_levels(), kinds=kinds)
        priority = self.caches.priority_of(priority_class_of(job, kinds))
        return workload_for(job, contract, priority, kinds)

    async def converge_jobs(self, now: float, jobs: Mapping[JobKey, Obj]) -> None:
        """Make each of `jobs` agree with its Workload, whatever was interrupted before; the
        writes for different Jobs go out concurrently (a burst of finishes is common). A Job
        whose write fails is logged and retried by a later pass; the others go on. Queued
        plain Pods converge alongside (`plain_pods.py`)."""
        writes = []
        for (kind, *_), job in jobs.items():
            try:
                namespace, name = job["metadata"]["namespace"], workload_name(job)
                wl = self.caches.workloads.get(namespace, name)
                if wl is None or self.admitting.busy(namespace, name):
                    continue
                step = converge_step(job, wl, self.caches.kinds)
            except UNREADABLE_ERRORS as error:
                self.unreadable.add(kind, job, error)
                continue
            converge = self._converge(step, job, wl, now)
            if converge is not None:
                writes.append(self._isolated(step.value, job, converge))
        await kube.each([*writes, *self.plain_pods.converge(now, self._finish, self._isolated)])

    def _converge(self, step: Step, job: Obj,
                  wl: Obj, now: float) -> Coroutine[Any, Any, None] | None:
        """The write that takes `step`, bringing the Job and its Workload together."""
        match step:
            case Step.FINISH:
                return self._finish(wl, job, *finish_reason(job), now)
            case Step.START if self.fleet.runs_elsewhere(wl, self.caches.nodes):
                return self.dispatch.run(job, wl, now, self._finish)
            case Step.START:
                return self._observe_job(self.actions.start_job(job, wl))
            case Step.RELEASE if self.fleet.copies(wl):
                return self.dispatch.recall(wl)
            case Step.SUSPEND:
                return self._observe_job(self.actions.suspend_job(job))
            case Step.RELEASE:
                return self._observe_workload(self.actions.release(wl, now))
            case Step.EVICT_CHANGED:
                return self._evict_changed(wl, job, now)
            case Step.REPLACE_WORKLOAD:
                return self._delete_workload(wl)
            case Step.CLEAR_START_TIME:
                return self._observe_job(self.actions.clear_start_time(job))
            case Step.MOVE:
                queue = queue_of(job)
                assert queue is not None
                return self._observe_workload(self.actions.move_workload(wl, queue))
            case Step.RESTORE:
                return self._observe_job(self.actions.restore_job(job))
        return None

    async def _isolated(self, step: str, obj: Obj, write: Coroutine[Any, Any, None]) -> bool:
        """One object's write; its failure is logged and counted (False), and affects no
        other."""
        try:
            await write
        except Exception as error:
            meta = obj["metadata"]
            self.metrics.failed_write(step)
            log.warning("%s of %s/%s failed, a later pass retries: %s", step,
                        meta.get("namespace"), meta.get("name"), error)
            refused, kind = refusal(error), obj.get("kind")
            if refused is not None and kind in (*SUSPENDABLE, PlainPod.kind):
                self.events.record(obj, kind, "Warning", Reason.REFUSED,
                                   f"{step} refused: {refused}", self.clock(), REPEAT_AFTER)
            return False
        return True

    async def _finish(self, wl: Obj, job: Obj | None, reason: str, message: str,
                      now: float) -> None:
        self.caches.workloads.observe(await self.actions.finish(wl, reason, message, now))
        self._record(wl, job, Reason.FINISHED, f"{message}; quota released", now)

    async def _evict_changed(self, wl: Obj, job: Obj, now: float) -> None:
        """The Job was changed after admission (say, its parallelism raised): it would run
        pods its Workload was not charged for. Evict it; its Workload is replaced next."""
        message = ("the Job no longer matches what was admitted (pods or their requests "
                   "changed); suspended, to be queued again as it is now")
        updated, suspended = await self.actions.evict(wl, job, Reason.JOB_CHANGED, message, now)
        self.caches.workloads.observe(updated)
        if suspended is not None:
            self.caches.observe_job(suspended)
        self.events.record(job, reader_of(job).kind, "Warning", Reason.JOB_CHANGED, message,
                           now)
        await self._delete_workload(updated)

    async def _delete_workload(self, wl: Obj) -> None:
        """Delete a Workload that no longer matches its Job, and drop it from the cache at
        once: the same pass must not admit it again as it was."""
        await self.actions.delete_workload(wl)
        self.caches.workloads.forget(wl)
        self._changed("DELETED", wl)  # its Job gets a new Workload in the next pass

    def _observe_queue(self, queue: Obj) -> None:
        informer = (self.caches.local_queues if queue["metadata"].get("namespace")
                    else self.caches.cluster_queues)
        informer.observe(queue)

    async def _observe_job(self, write: Coroutine[Any, Any, Obj]) -> None:
        self.caches.observe_job(await write)

    async def _observe_workload(self, write: Coroutine[Any, Any, Obj]) -> None:
        try:
            self.caches.workloads.observe(await write)
        except ApiException as error:
            if not kube.is_conflict(error):
                raise  # changed meanwhile: the next pass looks again

    def report_unreadable(self, now: float) -> None:
        caches = self.caches
        self.unreadable.report({"Pod": caches.pods, **caches.jobs, "Workload": caches.workloads,
                                "Node": caches.nodes, "ClusterQueue": caches.cluster_queues},
                               self.metrics.unreadable, self.events, now)

    # Decisions ------------------------------------------------------------------------

    async def apply(self, view: View, result: CycleResult, now: float) -> None:
        """Evictions first (they make the room admissions were decided on), then admissions,
        which are written in the background (`Admitting`); writes for different workloads go
        out concurrently. What they change for operators to read is reported in the
        background too."""
        outcomes = await asyncio.gather(*(self._evict(view, e, now) for e in result.evictions),
                                        return_exceptions=True)
        failed = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        admissions = result.admissions
        if failed:
            # The admissions were decided on the room these evictions make; without it
            # they would over-commit. They are decided again by the next pass.
            # a copy still being deleted in a worker is the expected wait, not a fault
            waiting = all(isinstance(outcome, CopyStillRunning) for outcome in failed)
            log.log(logging.INFO if waiting else logging.WARNING,
                    "%d of %d evictions not done, admissions wait for the next pass: %s",
                    len(failed), len(outcomes), failed[0])
            admissions = ()
        evicted = [e.key for e, outcome in zip(result.evictions, outcomes, strict=True)
                   if not isinstance(outcome, BaseException)]
        starting = {admission.key for admission in admissions}
        self.usage.decided(evicted, [w for w in view.snapshot.workloads if w.key in starting],
                           now)
        self.queue_finalizers.sync(view.cluster_queues, view.local_queues, view.workloads,
                                   view.holdings, admissions, now)
        for admission in admissions:
            wl = view.workloads[admission.key]
            token = None if self.fencing_token is None else self.fencing_token()
            status = admission_status(wl, admission, now, token)
            meta = wl["metadata"]
            admitted = {**wl, "status": {**(wl.get("status") or {}), **status},
                        "metadata": {**meta, "resourceVersion":
                                     f"{meta.get('resourceVersion')}+admitting"}}
            self.admitting.start(admitted, meta.get("resourceVersion", ""),
                                 self._admit(wl, admission, status, now))
        self.report(view, result, now)

    async def place_pods(self, now: float) -> None:
        """Give each held pod of an admitted workload its node, one patch per pod, after the
        pass's evictions (a pod of a workload just evicted stays held); evict the workloads
        a host that went down strands."""
        placing = self.placer.place(self.admitting.busy)
        await kube.each([
            *(self._isolated("place-pod", pod, self.placer.patch(pod, patch))
              for pod, patch in placing.patches),
            *(self._isolated("evict-stranded", stranded.job, self._evict_stranded(stranded, now))
              for stranded in placing.stranded)])

    async def _evict_stranded(self, stranded: Stranded, now: float) -> None:
        """A host the admission counted pods on went down before they were placed there:
        requeue the workload at once, for the next pass to decide on the nodes as they are."""
        wl, job = stranded.workload, stranded.job
        message = (f"node {', '.join(stranded.hosts)} of its admission went down (deleted, "
                   "cordoned or unreachable) before its pods were placed there; requeued")
        updated, suspended = await self.actions.evict(wl, job, Reason.HOST_UNAVAILABLE, message,
                                                      now)
        self.caches.workloads.observe(updated)
        if suspended is not None:
            self.caches.observe_job(suspended)
        self._record(wl, job, Reason.HOST_UNAVAILABLE, message, now)

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
        held = view.holdings
        writes = [
            *(self._explain(wl, p, now) for wl, p in explain),
            *self.status.cluster_queue_writes(view.cluster_queues, result, self.usage, held,
                                              now),
            *self.status.local_queue_writes(view.local_queues.values(), pending, held, now),
        ]
        self.reports = asyncio.create_task(kube.each(writes))
        self.reports.add_done_callback(_log_failure)
        # Hazard: a batch cancelled before its first step (the process stopping) never runs
        # `each`, which closes the writes it was given; unclosed, each warns "never awaited".
        self.reports.add_done_callback(lambda _: [write.close() for write in writes])

    async def _evict(self, view: View, eviction: Eviction, now: float) -> None:
        meta = view.workloads[eviction.key]["metadata"]
        await self.admitting.wait(meta["namespace"], meta["name"])
        if self.admitting.is_unsettled(meta["namespace"], meta["name"]):
            # Its admission may have landed unseen: evicting the cached (pending) version
            # would release nothing, and the room it holds would be given twice.
            raise RuntimeError(f"the outcome of admitting {eviction.key} is not known yet")
        wl = self.caches.workloads.get(meta["namespace"], meta["name"])
        if wl is None or not (wl.get("status") or {}).get("admission"):
            return  # its admission was never written; nothing holds its room
        job = self.caches.job_of(wl)
        backoff = eviction.reason is EvictionReason.PODS_READY_TIMEOUT
        # a plain Pod cannot be suspended: deleted
        updated, suspended = await self.actions.evict(wl, job, eviction.reason.value,
                                                      eviction.message, now, backoff,
                                                      stop=self._stop_elsewhere)
        self.metrics.observe_eviction(eviction.queue, eviction.reason.value,
                                      self._cluster_queue_of(view, eviction.preemptor))
        self.caches.workloads.observe(updated)
        if suspended is not None:
            self.caches.observe_job(suspended)
        by = f" for {eviction.preemptor}" if eviction.preemptor else ""
        message = f"{eviction.reason.value}{by}: {eviction.message}"
        self._record(wl, job, eviction.reason.value, message, now)

    async def _requeue_from_worker(self, wl: Obj, reason: str, message: str,
                                   now: float) -> None:
        """Requeue a Workload admitted onto a worker the manager no longer reaches (lost, or
        its WorkerCluster deleted): its quota is released although its copy may still run
        there."""
        job = self.caches.job_of(wl)
        updated, suspended = await self.actions.evict(wl, job, reason, message, now)
        self.caches.workloads.observe(updated)
        if suspended is not None:
            self.caches.observe_job(suspended)
        self._record(wl, job, reason, message, now)

    async def _stop_elsewhere(self, wl: Obj) -> None:
        """Stop what runs for an evicted Workload outside its job: its plain Pod, or its copy
        in a worker (its quota is released once the copy's pods are gone)."""
        await self.plain_pods.stop_owner(wl)
        await self.dispatch.stop(wl)

    def _cluster_queue_of(self, view: View, key: str | None) -> str | None:
        """The ClusterQueue of the Workload `key` (a preemptor), if it is known."""
        wl = view.workloads.get(key) if key is not None else None
        if wl is None:
            return None
        return self.caches.cluster_queue_of(wl["metadata"]["namespace"], wl["spec"]["queueName"])

    async def _admit(self, wl: Obj, admission: Admission, status: dict[str, object],
                     now: float) -> None:
        """Write the admission to the Workload (the source of truth), then start its Job; a
        Job that fails to start is started by a later pass (`converge_jobs`)."""
        try:
            await self.queue_finalizers.held(admission.key)
        except QueueClosing as error:
            raise NotWritten(str(error)) from error
        job = self.caches.job_of(wl)
        updated = await self.actions.patch_workload_status(wl, status)
        self.caches.workloads.observe(updated)
        created = parse_time(wl["metadata"].get("creationTimestamp")) or now
        meta = wl["metadata"]
        self.metrics.observe_admission(admission.queue, max(0.0, now - created), admission.key,
                                       (meta["namespace"], wl["spec"]["queueName"]))
        self._record(wl, job, Reason.ADMITTED, admission.message, now)
        await self.plain_pods.start_owner(updated, self._isolated)
        if job is not None and self.fleet.runs_elsewhere(updated, self.caches.nodes):
            self._touch(job_key(job))  # created in its worker by the pass this wakes
        elif job is not None and not await self._isolated(
                Step.START.value, job, self._observe_job(self.actions.start_job(job, updated))):
            self.touched.add(job_key(job))

    async def _explain(self, wl: Obj, pending: Pending, now: float) -> None:
        """Write why the Workload waits; an Event only when the reason changed and was not
        recorded within REPEAT_AFTER (a reason flipping back and forth as the cluster churns
        is told once), so `kubectl describe` tells the story without an Event per pass."""
        shown = condition(wl, CONDITION_QUOTA_RESERVED) or {}
        updated = await self.status.pending(wl, pending, now)
        if updated is None:
            return  # changed meanwhile; a later pass looks again
        self.caches.workloads.observe(updated)
        if shown.get("reason") != pending.reason:
            self._record(wl, self.caches.job_of(wl), pending.reason, pending.message, now,
                         REPEAT_AFTER, per_reason=True)

    def _record(self, wl: Obj, job: Obj | None, reason: str, message: str, now: float,
                repeat_after: float = 0.0, per_reason: bool = False) -> None:
        """One Event per decision, on the object its owner made: the Job (or plain Pod), or
        the Workload when it was created directly."""
        target, kind = self.caches.event_target(wl, job)
        self.events.record(target, kind, "Normal", reason, message, now, repeat_after,
                           per_reason)


def _log_failure(batch: asyncio.Task[None]) -> None:
    """A background batch of writes failed; a later pass starts over from the API state."""
    if not batch.cancelled() and batch.exception() is not None:
        log.warning("background writes failed, a later pass retries: %s", batch.exception())
