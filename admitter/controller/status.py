"""ClusterQueue, LocalQueue and pending-Workload status: what `kubectl get` and
`kubectl describe` show. Writes are skipped when nothing visible changed, and usage-only
changes are written at most once a minute, so a busy cluster is not flooded with updates."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from admitter.api.quantity import format_quantity, from_base_units
from admitter.controller import kube
from admitter.controller.actions import with_condition
from admitter.controller.kube import Kube, Obj
from admitter.controller.translate import format_time, parse_time
from admitter.core.decisions import CycleResult, Pending
from admitter.core.model import GPU, Phase, Workload

HOUR = 3600.0
USAGE_WRITE_PERIOD = 60.0


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

    def _due(self, key: str, visible: Any, now: float, period: float | None) -> bool:
        last = self._written.get(key)
        if last is None or last[0] != visible:
            return True
        return period is not None and now - last[1] >= period

    async def cluster_queues(self, cluster_queues: Mapping[str, Obj], result: CycleResult,
                             running: Iterable[Workload], now: float) -> None:
        held: dict[str, float] = {}
        for workload in running:
            if workload.phase is Phase.ADMITTED and workload.funded:
                held[workload.queue] = held.get(workload.queue, 0.0) + workload.requests().get(
                    GPU, 0)
        fair = result.fair_share
        for name, cq in sorted(cluster_queues.items()):
            queue = result.queues.get(name)
            if queue is None:
                continue
            status = cq.get("status") or {}
            accounted = parse_time(status.get("usageAccountedAt")) or now
            buckets = charge(status.get("usage", []), held.get(name, 0.0), accounted, now,
                             self.window)
            maps = {
                "allocated": quantities(queue.allocated),
                "fairShare": quantities({r: fair.share(name, r) for r in fair.resources}),
                "deserved": quantities({r: fair.deserved(name, r) for r in fair.resources}),
            }
            visible = {**maps, "pendingWorkloads": queue.pending,
                       "admittedWorkloads": queue.admitted}
            if not self._due(f"cq/{name}", visible, now, USAGE_WRITE_PERIOD):
                continue
            conditions = with_condition(status.get("conditions", []), "Active", "True",
                                        "Ready", "admitting workloads", now)
            cleared = {field: _with_removals(status.get(field) or {}, amounts)
                       for field, amounts in maps.items()}
            body = {**visible, **cleared, "conditions": conditions, "usage": buckets,
                    "usageAccountedAt": format_time(now),
                    "gpuHoursInWindow": round(sum(b["gpuSeconds"] for b in buckets) / HOUR, 3)}
            await self.kube.patch(kube.CLUSTER_QUEUES, name, {"status": body},
                                  subresource="status")
            self._written[f"cq/{name}"] = (visible, now)

    async def local_queues(self, local_queues: Iterable[Obj], workloads: Iterable[Obj],
                           pending_keys: set[str], now: float) -> None:
        counts: dict[tuple[str, str], list[int]] = {}
        for wl in workloads:
            meta = wl["metadata"]
            slot = counts.setdefault((meta["namespace"], wl["spec"]["queueName"]), [0, 0])
            if (wl.get("status") or {}).get("admission"):
                slot[1] += 1
            elif f"{meta['namespace']}/{meta['name']}" in pending_keys:
                slot[0] += 1
        for lq in local_queues:
            meta = lq["metadata"]
            pending, admitted = counts.get((meta["namespace"], meta["name"]), [0, 0])
            visible = {"pendingWorkloads": pending, "admittedWorkloads": admitted}
            key = f"lq/{meta['namespace']}/{meta['name']}"
            if not self._due(key, visible, now, None):
                continue
            await self.kube.patch(kube.LOCAL_QUEUES, meta["name"], {"status": visible},
                                  meta["namespace"], subresource="status")
            self._written[key] = (visible, now)

    async def pending(self, wl: Obj, decision: Pending, now: float) -> bool:
        """Say why the workload waits, and its place in its queue; True if written."""
        message = f"{decision.message} (position {decision.position} in its queue)"
        key = f"wl/{wl['metadata'].get('uid', decision.key)}"
        if not self._due(key, (decision.reason, message), now, None):
            return False
        conditions = with_condition((wl.get("status") or {}).get("conditions", []),
                                    "QuotaReserved", "False", decision.reason, message, now)
        meta = wl["metadata"]
        await self.kube.patch(kube.WORKLOADS, meta["name"], {"status": {"conditions": conditions}},
                              meta["namespace"], subresource="status")
        self._written[key] = ((decision.reason, message), now)
        return True
