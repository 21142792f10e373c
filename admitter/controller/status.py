"""ClusterQueue, LocalQueue and pending-Workload status: what `kubectl get` and
`kubectl describe` show. Writes are skipped when nothing visible changed, a queue's status is
written at most once a second and its usage alone once a minute, and pending reasons are
written only when they change, a bounded number per pass, so a busy cluster is not flooded.

What a limit holds back is not dropped: `next_due` says when it may go out, and the reconcile
loop runs a pass by then, so a changed allocation or a Workload's first pending reason shows
within about a second of the decision (the first reason once the Workload is EXPLAIN_AFTER
old), whatever else happens on the cluster. Reasons that change again and messages wait for
their refresh periods and for the periodic pass."""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.quantity import format_quantity, from_base_units
from admitter.api.workload import (
    CONDITION_ACTIVE,
    CONDITION_QUOTA_RESERVED,
    MAX_BLOCKERS_SHOWN,
)
from admitter.controller.actions import with_condition
from admitter.controller.queue_holds import Holdings, active_condition, outside_tree_condition
from admitter.core.decisions import CycleResult, CycleSettings, Pending
from admitter.core.model import GPU, Phase, Workload
from admitter.core.usage import HOUR, UsageLedger
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, condition, format_time, parse_time

log = logging.getLogger(__name__)

USAGE_WRITE_PERIOD = 60.0
"""Seconds between writes of a ClusterQueue's status when only its usage moved (GPU-hours
grow continuously while work runs): the status is the ledger's copy, which a new leader
restores and `kubectl admitter queues` shows, so a minute of usage is what a failover can lose
or a reader miss, against a week's fair-share window."""
QUEUE_WRITE_INTERVAL = 1.0
"""Least seconds between two status writes of one queue: a burst of admissions changes the
counts at every pass, and one write a second per queue shows them as fast as a person reads
them while the later changes of the burst fold into the next write."""
PENDING_WRITES_PER_PASS = 32
"""Most pending reasons written in one pass: thousands of Workloads may wait, and a write
costs the API server about 3 ms of CPU (BENCHMARKS.md, write ceiling), so 32 keep a pass's
status writes near 0.1 s of API-server CPU; queue heads are written first, the rest follow
a batch a pass."""
EXPLAIN_AFTER = 1.0
"""A Workload admitted within this long of its creation is never explained (a burst of
Jobs admitted over a few passes needs no reason each)."""
REASON_REFRESH = 30.0
MESSAGE_REFRESH = 60.0
"""Reasons flip as admissions ahead of a Workload come and go, and each rewrite is an API
write and a watch event for every watcher; half a minute is still fresh for a person reading
`kubectl describe`, a message (amounts, time waited) moves more often and matters less.
A Workload's pending reason is rewritten at most every REASON_REFRESH seconds when the
reason changed, every MESSAGE_REFRESH when only the message did (amounts held, time waited)."""


def quantities(amounts: Mapping[str, int]) -> dict[str, Any]:
    return {r: format_quantity(from_base_units(r, a)) for r, a in sorted(amounts.items())}


class QueueUsage:
    """The core's usage ledger as the controller feeds it; one per leadership.

    Each ClusterQueue's hours are restored from its status (`usage`, `usageAccountedAt`) the
    first time this leader sees it; from then on the ledger is the truth and the status its
    copy, written with the queue's status (at least every USAGE_WRITE_PERIOD). Runs are the
    funded admitted Workloads: the cycle's evictions close and its admissions open at the
    pass's moment, as the simulator's do; each pass closes those no longer admitted (finished,
    deleted, moved) and opens those it does not know from their `admittedAt` (admitted under
    an earlier leader: the restored hours already hold their time up to `usageAccountedAt`).

    Times are whole seconds, the API's resolution (`admittedAt`, `usageAccountedAt`), so the
    persisted form restores exactly. What a new leader cannot know is the time, since the last
    status write, of runs that stopped before it took over: that is lost."""

    def __init__(self, settings: CycleSettings) -> None:
        self.ledger = UsageLedger(settings.fair_share)
        self.window = settings.fair_share.window
        self._is_short = settings.short_jobs.is_short
        """The cycle's own rule for a short job, whose GPU time is counted apart."""
        self._restored: dict[str, str] = {}
        """ClusterQueue name → uid of the object its hours were restored from."""

    def observe(self, cluster_queues: Mapping[str, Obj], workloads: Iterable[Workload],
                now: float) -> dict[str, float]:
        """The windowed usage per queue at `now` for the snapshot, after restoring the queues
        not seen yet and opening and closing runs to match `workloads`."""
        at = float(math.floor(now))
        for name, cq in cluster_queues.items():
            uid = cq["metadata"].get("uid", "")
            if self._restored.get(name) != uid:  # new, or deleted and made again
                self._restored[name] = uid
                self._restore(name, cq.get("status") or {}, at)
        for name in [name for name in self._restored if name not in cluster_queues]:
            del self._restored[name]
            self.ledger.forget(name)
        held = {w.key: w for w in workloads if w.phase is Phase.ADMITTED and w.funded}
        runs = self.ledger.runs()
        for key, run in runs.items():
            workload = held.get(key)
            if workload is None or (workload.queue, _gpus(workload)) != run:
                self.ledger.close(key, at)
        known = self.ledger.runs()
        unknown = [w for w in held.values() if w.key not in known]
        for workload in sorted(unknown, key=lambda w: (w.admitted_at or at, w.key)):
            self.ledger.open(workload.key, workload.queue,
                             min(workload.admitted_at or at, at), _gpus(workload),
                             self._is_short(workload))
        return self.ledger.usage(at)

    def decided(self, evicted: Iterable[str], admitted: Iterable[Workload],
                now: float) -> None:
        """The cycle's evictions stopped and its admissions started at `now`."""
        at = float(math.floor(now))
        for key in evicted:
            self.ledger.close(key, at)
        for workload in admitted:
            if workload.funded:
                self.ledger.open(workload.key, workload.queue, at, _gpus(workload),
                                 self._is_short(workload))

    def status(self, name: str) -> dict[str, Any]:
        """The queue's usage fields as its status persists them."""
        found = self.ledger.hours(name)
        if found is None:
            return {"usage": [], "gpuHoursInWindow": 0.0}
        accounted, hours = found
        return {"usage": [{"start": format_time(hour * HOUR), "gpuSeconds": seconds}
                          for hour, seconds in hours.items()],
                "usageAccountedAt": format_time(accounted),
                "gpuHoursInWindow": _in_hours(hours)}

    def gpu_hours_in_window(self, name: str) -> float:
        """The queue's `gpuHoursInWindow` as `status` has it."""
        found = self.ledger.hours(name)
        return 0.0 if found is None else _in_hours(found[1])

    def _restore(self, name: str, status: Obj, now: float) -> None:
        """Hazard: status is written by whoever may write it, not only by admitter; a bucket
        that cannot be read is skipped (logged) rather than failing every pass, and a charge
        time in the future (another leader's clock) is taken as now."""
        hours: dict[int, float] = {}
        for bucket in status.get("usage") or []:
            try:
                hour = math.floor((parse_time(bucket["start"]) or 0.0) / HOUR)
                seconds = float(bucket["gpuSeconds"])
                if not 0 <= seconds < math.inf:
                    raise ValueError(f"gpuSeconds {seconds} is not a finite amount >= 0")
            except (AttributeError, KeyError, TypeError, ValueError) as error:
                log.warning("ClusterQueue %s: usage bucket %r skipped: %s", name, bucket, error)
                continue
            hours[hour] = hours.get(hour, 0.0) + seconds
        try:
            accounted = min(parse_time(status.get("usageAccountedAt")) or now, now)
        except (AttributeError, TypeError, ValueError) as error:
            log.warning("ClusterQueue %s: usageAccountedAt unreadable, taken as now: %s",
                        name, error)
            accounted = now
        self.ledger.restore(name, hours, accounted)


def _budget(result: CycleResult, ranks: Mapping[str, int], name: str,
            window: float) -> dict[str, Any]:
    """The queue's GPU budget, what it is owed over the window and its rank, as the cycle's
    ranking has them."""
    budget = result.ranking.budget(name) if result.ranking is not None else 0.0
    return {"gpuBudget": round(budget, 3),
            "owedGpuHoursInWindow": round(budget * max(window, 0.0) / HOUR, 3),
            "rank": ranks.get(name, 0)}


def _in_hours(hours: Mapping[int, float]) -> float:
    """GPU-seconds by hour, summed in GPU-hours as the status shows them."""
    return round(sum(hours.values()) / HOUR, 3)


def _gpus(workload: Workload) -> float:
    return float(workload.requests().get(GPU, 0))


def _with_removals(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch for a map: keys that disappeared must be sent as null to go away."""
    return {**dict.fromkeys(old), **new}


class StatusWriter:
    def __init__(self, client: Kube) -> None:
        self.kube = client
        self._written: dict[str, tuple[Any, float]] = {}
        self._explained: dict[tuple[str, str], float] = {}
        """Workload uid and queue → when this process last wrote its pending reason there."""
        self.next_due = math.inf
        """When the earliest write held back by a limit may go out."""

    def _defer(self, until: float) -> None:
        self.next_due = min(self.next_due, until)

    def _due(self, key: str, visible: Any, now: float, refresh: float | None) -> bool:
        """Whether to write `visible` under `key` now; a change held back by the write
        interval is scheduled (`next_due`), a refresh alone waits for a later pass."""
        last = self._written.get(key)
        if last is None:
            return True
        changed = last[0] != visible
        if not changed and (refresh is None or now - last[1] < refresh):
            return False
        if now - last[1] < QUEUE_WRITE_INTERVAL:
            if changed:
                self._defer(last[1] + QUEUE_WRITE_INTERVAL)
            return False
        return True

    async def _write_queue(self, kind: kube.Kind, key: str, meta: Obj, body: Obj,
                           visible: Any, now: float) -> None:
        await self.kube.patch(kind, meta["name"], {"status": body}, meta.get("namespace"),
                              subresource="status")
        self._written[key] = (visible, now)

    def begin(self) -> None:
        """A new report: what it holds back sets `next_due` anew."""
        self.next_due = math.inf

    def cluster_queue_writes(self, cluster_queues: Mapping[str, Obj], result: CycleResult,
                             usage: QueueUsage, held: Holdings,
                             now: float) -> list[Coroutine[Any, Any, None]]:
        """The ClusterQueue status writes due now (decided now, sent by the caller)."""
        fair = result.fair_share
        ranks = result.ranking.sibling_ranks() if result.ranking is not None else {}
        writes: list[Coroutine[Any, Any, None]] = []
        for name, cq in sorted(cluster_queues.items()):
            queue = result.queues.get(name)
            if queue is None:
                writes += self._outside_tree_write(cluster_queues, name, now)
                continue
            listed = dict.fromkeys([GPU, *((cq.get("spec") or {}).get("resources") or {})], 0)
            maps = {
                "allocated": quantities({**listed, **queue.allocated}),
                "fairShare": quantities({r: fair.share(name, r) for r in fair.resources}),
                "deserved": quantities({r: fair.deserved(name, r) for r in fair.resources}),
            }
            active = active_condition(cq, held.of(cq))
            visible = {**maps, "pendingWorkloads": queue.pending,
                       "admittedWorkloads": queue.admitted,
                       **_budget(result, ranks, name, usage.window)}
            if not self._due(f"cq/{name}", (visible, active), now, USAGE_WRITE_PERIOD):
                continue
            status = cq.get("status") or {}
            conditions = with_condition(status.get("conditions", []), CONDITION_ACTIVE, *active,
                                        now)
            cleared = {field: _with_removals(status.get(field) or {}, amounts)
                       for field, amounts in maps.items()}
            body = {**visible, **cleared, "conditions": conditions, **usage.status(name)}
            writes.append(self._write_queue(kube.CLUSTER_QUEUES, f"cq/{name}", cq["metadata"],
                                            body, (visible, active), now))
        return writes

    def _outside_tree_write(self, cluster_queues: Mapping[str, Obj], name: str,
                            now: float) -> list[Coroutine[Any, Any, None]]:
        """Active=False on a queue left out of the tree by a parent cycle or missing parent."""
        cut = outside_tree_condition(cluster_queues, name)
        if cut is None or not self._due(f"cq/{name}", cut, now, None):
            return []
        cq = cluster_queues[name]
        conditions = with_condition((cq.get("status") or {}).get("conditions", []),
                                    CONDITION_ACTIVE, *cut, now)
        return [self._write_queue(kube.CLUSTER_QUEUES, f"cq/{name}", cq["metadata"],
                                  {"conditions": conditions}, cut, now)]

    def local_queue_writes(self, local_queues: Iterable[Obj], pending: Iterable[Obj],
                           held: Holdings, now: float) -> list[Coroutine[Any, Any, None]]:
        """Counts per LocalQueue: admitted Workloads (`held`), and `pending`, those the cycle
        left waiting; and whether it is being deleted."""
        waiting: dict[tuple[str, str], int] = {}
        for wl in pending:
            place = (wl["metadata"]["namespace"], wl["spec"]["queueName"])
            waiting[place] = waiting.get(place, 0) + 1
        writes: list[Coroutine[Any, Any, None]] = []
        for lq in local_queues:
            meta = lq["metadata"]
            admitted = held.of(lq)
            visible = {"pendingWorkloads": waiting.get((meta["namespace"], meta["name"]), 0),
                       "admittedWorkloads": len(admitted)}
            active = active_condition(lq, admitted)
            key = f"lq/{meta['namespace']}/{meta['name']}"
            if self._due(key, (visible, active), now, None):
                conditions = with_condition((lq.get("status") or {}).get("conditions", []),
                                            CONDITION_ACTIVE, *active, now)
                writes.append(self._write_queue(kube.LOCAL_QUEUES, key, meta,
                                                {**visible, "conditions": conditions},
                                                (visible, active), now))
        return writes

    def pending_due(self, workloads: Mapping[str, Obj],
                    pending: Iterable[Pending], now: float) -> list[tuple[Obj, Pending]]:
        """The pending reasons to write this pass, at most PENDING_WRITES_PER_PASS: first
        explanations (once a Workload has waited EXPLAIN_AFTER), then changed reasons, then
        changed messages, queue heads first in each. What a Workload shows is never
        rewritten."""
        first, reasons, messages = [], [], []
        explained: dict[tuple[str, str], float] = {}
        for decision in pending:
            wl = workloads.get(decision.key)
            if wl is None:
                continue
            explaining = _explaining(wl, decision)
            last = self._explained.get(explaining)
            if last is not None:
                explained[explaining] = last
            shown = condition(wl, CONDITION_QUOTA_RESERVED) or {}
            if shown.get("status") == "False" and shown.get("reason") == decision.reason:
                if shown.get("message") != decision.message and (
                        last is None or now - last >= MESSAGE_REFRESH):
                    messages.append((wl, decision))
            elif last is not None:
                if now - last >= REASON_REFRESH:
                    reasons.append((wl, decision))
            else:
                explain_at = (parse_time(wl["metadata"].get("creationTimestamp")) or now
                              ) + EXPLAIN_AFTER
                if explain_at <= now:
                    first.append((wl, decision))
                else:
                    self._defer(explain_at)
        self._explained = explained  # forget Workloads no longer pending
        if len(first) > PENDING_WRITES_PER_PASS:
            self._defer(now + QUEUE_WRITE_INTERVAL)  # the rest of a burst, a batch at a time

        def heads_first(item: tuple[Obj, Pending]) -> tuple[int, str]:
            return item[1].position, item[1].key

        due: list[tuple[Obj, Pending]] = []
        for group in (first, reasons, messages):  # thousands wait, a few dozen are written
            due += heapq.nsmallest(PENDING_WRITES_PER_PASS - len(due), group, key=heads_first)
        return due

    async def pending(self, wl: Obj, decision: Pending, now: float) -> Obj | None:
        """Say why the workload waits (not its place in the queue: that changes with every
        admission ahead of it); returns the updated Workload, or None when it changed since
        (written in the background, this must not undo a later pass's admission)."""
        conditions = with_condition((wl.get("status") or {}).get("conditions", []),
                                    CONDITION_QUOTA_RESERVED, "False", decision.reason,
                                    decision.message, now)
        meta = wl["metadata"]
        blocked = None if decision.retry_at is None else format_time(decision.retry_at)
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                 "status": {"conditions": conditions, "blockedUntil": blocked,
                            "blockedBy": list(decision.blockers[:MAX_BLOCKERS_SHOWN]) or None}}
        try:
            updated = await self.kube.patch(kube.WORKLOADS, meta["name"], patch,
                                            meta["namespace"], subresource="status")
        except ApiException as error:
            if not kube.is_conflict(error):
                raise
            return None
        self._explained[_explaining(wl, decision)] = now
        return updated


def _explaining(wl: Obj, decision: Pending) -> tuple[str, str]:
    """What an explanation was about: the Workload in its queue (a move starts afresh)."""
    return wl["metadata"].get("uid", decision.key), wl["spec"]["queueName"]
