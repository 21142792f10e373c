"""ClusterQueue, LocalQueue and pending-Workload status: what `kubectl get` and
`kubectl describe` show. Writes are skipped when nothing visible changed, a queue's status is
written at most once a second and its usage alone once a minute, and pending reasons are
written only when they change, a bounded number per pass, so a busy cluster is not flooded."""

from __future__ import annotations

import heapq
import math
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.quantity import format_quantity, from_base_units
from admitter.controller import kube
from admitter.controller.actions import with_condition
from admitter.controller.kube import Kube, Obj
from admitter.controller.translate import condition, format_time, parse_time
from admitter.core.decisions import CycleResult, Pending
from admitter.core.model import GPU, Phase, Workload

HOUR = 3600.0
USAGE_WRITE_PERIOD = 60.0
QUEUE_WRITE_INTERVAL = 1.0
PENDING_WRITES_PER_PASS = 32
EXPLAIN_AFTER = 5.0
"""A Workload admitted within this long of its creation is never explained."""
REASON_REFRESH = 30.0
MESSAGE_REFRESH = 60.0
"""A Workload's pending reason is rewritten at most every REASON_REFRESH seconds when the
reason changed, every MESSAGE_REFRESH when only the message did (amounts held, time waited)."""


def quantities(amounts: Mapping[str, int]) -> dict[str, Any]:
    return {r: format_quantity(from_base_units(r, a)) for r, a in sorted(amounts.items())}


def charge(buckets: list[Obj], gpus: float, start: float, end: float, window: float) -> list[Obj]:
    """Add `gpus` held from `start` to `end` to hourly buckets; drop those out of the window."""
    by_start = {parse_time(b["start"]) or 0.0: float(b["gpuSeconds"]) for b in buckets}
    moment = start
    while gpus > 0 and moment < end:
        hour = math.floor(moment / HOUR) * HOUR
        until = min(end, hour + HOUR)
        by_start[hour] = by_start.get(hour, 0.0) + gpus * (until - moment)
        moment = until
    horizon = end - window
    return [{"start": format_time(hour), "gpuSeconds": round(seconds, 3)}
            for hour, seconds in sorted(by_start.items()) if hour + HOUR > horizon]


def _with_removals(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch for a map: keys that disappeared must be sent as null to go away."""
    return {**dict.fromkeys(old), **new}


class StatusWriter:
    def __init__(self, client: Kube, window: float) -> None:
        self.kube = client
        self.window = window
        self._written: dict[str, tuple[Any, float]] = {}
        self._explained: dict[str, float] = {}
        """Workload uid → when this process last wrote its pending reason."""

    def _due(self, key: str, visible: Any, now: float, refresh: float | None) -> bool:
        last = self._written.get(key)
        if last is None:
            return True
        if now - last[1] < QUEUE_WRITE_INTERVAL:
            return False
        return last[0] != visible or (refresh is not None and now - last[1] >= refresh)

    async def _write_queue(self, kind: kube.Kind, key: str, meta: Obj, body: Obj,
                           visible: Any, now: float) -> None:
        await self.kube.patch(kind, meta["name"], {"status": body}, meta.get("namespace"),
                              subresource="status")
        self._written[key] = (visible, now)

    async def cluster_queues(self, cluster_queues: Mapping[str, Obj], result: CycleResult,
                             running: Iterable[Workload], now: float) -> None:
        held: dict[str, float] = {}
        for workload in running:
            if workload.phase is Phase.ADMITTED and workload.funded:
                held[workload.queue] = held.get(workload.queue, 0.0) + workload.requests().get(
                    GPU, 0)
        fair = result.fair_share
        writes: list[Coroutine[Any, Any, None]] = []
        for name, cq in sorted(cluster_queues.items()):
            queue = result.queues.get(name)
            if queue is None:
                continue
            maps = {
                "allocated": quantities(queue.allocated),
                "fairShare": quantities({r: fair.share(name, r) for r in fair.resources}),
                "deserved": quantities({r: fair.deserved(name, r) for r in fair.resources}),
            }
            visible = {**maps, "pendingWorkloads": queue.pending,
                       "admittedWorkloads": queue.admitted}
            if not self._due(f"cq/{name}", visible, now, USAGE_WRITE_PERIOD):
                continue
            status = cq.get("status") or {}
            accounted = parse_time(status.get("usageAccountedAt")) or now
            buckets = charge(status.get("usage", []), held.get(name, 0.0), accounted, now,
                             self.window)
            conditions = with_condition(status.get("conditions", []), "Active", "True",
                                        "Ready", "admitting workloads", now)
            cleared = {field: _with_removals(status.get(field) or {}, amounts)
                       for field, amounts in maps.items()}
            body = {**visible, **cleared, "conditions": conditions, "usage": buckets,
                    "usageAccountedAt": format_time(now),
                    "gpuHoursInWindow": round(sum(b["gpuSeconds"] for b in buckets) / HOUR, 3)}
            writes.append(self._write_queue(kube.CLUSTER_QUEUES, f"cq/{name}", cq["metadata"],
                                            body, visible, now))
        await kube.each(writes)

    async def local_queues(self, local_queues: Iterable[Obj], workloads: Iterable[Obj],
                           pending: Iterable[Obj], now: float) -> None:
        """Counts per LocalQueue: admitted Workloads, and `pending`, those the cycle left
        waiting."""
        counts: dict[tuple[str, str], list[int]] = {}

        def count(wl: Obj, slot: int) -> None:
            place = (wl["metadata"]["namespace"], wl["spec"]["queueName"])
            counts.setdefault(place, [0, 0])[slot] += 1

        for wl in pending:
            count(wl, 0)
        for wl in workloads:
            if (wl.get("status") or {}).get("admission"):
                count(wl, 1)
        writes: list[Coroutine[Any, Any, None]] = []
        for lq in local_queues:
            meta = lq["metadata"]
            waiting, admitted = counts.get((meta["namespace"], meta["name"]), [0, 0])
            visible = {"pendingWorkloads": waiting, "admittedWorkloads": admitted}
            key = f"lq/{meta['namespace']}/{meta['name']}"
            if self._due(key, visible, now, None):
                writes.append(self._write_queue(kube.LOCAL_QUEUES, key, meta, visible, visible,
                                                now))
        await kube.each(writes)

    def pending_due(self, workloads: Mapping[str, Obj],
                    pending: Iterable[Pending], now: float) -> list[tuple[Obj, Pending]]:
        """The pending reasons to write this pass, at most PENDING_WRITES_PER_PASS: first
        explanations (once a Workload has waited EXPLAIN_AFTER), then changed reasons, then
        changed messages, queue heads first in each. What a Workload shows is never
        rewritten."""
        first, reasons, messages = [], [], []
        explained: dict[str, float] = {}
        for decision in pending:
            wl = workloads.get(decision.key)
            if wl is None:
                continue
            meta = wl["metadata"]
            uid = meta.get("uid", decision.key)
            last = self._explained.get(uid)
            if last is not None:
                explained[uid] = last
            shown = condition(wl, "QuotaReserved") or {}
            if shown.get("status") == "False" and shown.get("reason") == decision.reason:
                if shown.get("message") != decision.message and (
                        last is None or now - last >= MESSAGE_REFRESH):
                    messages.append((wl, decision))
            elif last is not None:
                if now - last >= REASON_REFRESH:
                    reasons.append((wl, decision))
            elif now - (parse_time(meta.get("creationTimestamp")) or now) >= EXPLAIN_AFTER:
                first.append((wl, decision))
        self._explained = explained  # forget Workloads no longer pending

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
                                    "QuotaReserved", "False", decision.reason, decision.message,
                                    now)
        meta = wl["metadata"]
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                 "status": {"conditions": conditions}}
        try:
            updated = await self.kube.patch(kube.WORKLOADS, meta["name"], patch,
                                            meta["namespace"], subresource="status")
        except ApiException as error:
            if not kube.is_conflict(error):
                raise
            return None
        self._explained[meta.get("uid", decision.key)] = now
        return updated
