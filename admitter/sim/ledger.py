"""Funded GPU time per leaf queue, kept as the usage records the core's fair share reads.

One record per run of a funded workload: closed when it stops or finishes, open (ending now)
while it runs. The scenario's `history` enters as records spread over the window before time 0.
Records that ended before the window are dropped, since the core would ignore them anyway.

A month-long run closes tens of thousands of records, and the core would integrate every one
of them each cycle. Without decay (`half_life == 0`) a record counts its plain GPU-seconds
inside the window, whatever their position, so the ledger adds them up itself and hands over
one record per queue, spread evenly across the window. Closed records are folded by the hour
their run started, and an hour is unfolded back into its records once the window's start
passes it, from when they must be clipped; only those, and the runs going on, are summed
again each cycle. With decay a record's weight depends on when it was used, so records are
handed over as they are.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping

from admitter.core.model import FairShareSettings, UsageRecord
from admitter.core.usage import HOUR, spread_history


class UsageLedger:
    """Records for `Snapshot.usage`; empty when time-based fair share is off (window 0)."""

    def __init__(self, settings: FairShareSettings, history: Mapping[str, float]) -> None:
        self._window = settings.window
        self._folds = settings.half_life <= 0
        self._loose: list[UsageRecord] = spread_history(history, 0.0, settings)
        """Closed records handed over as they are."""
        self._hours: dict[int, list[UsageRecord]] = {}
        """Folded records by the hour their run started, to unfold them again."""
        self._hour_heap: list[int] = []
        self._folded: dict[str, dict[int, float]] = {}
        """GPU-seconds per queue per start hour of the folded records."""
        self._folded_sum: dict[str, float] = {}
        """Sum of `_folded` per queue, until its hours change (a week holds 168 of them)."""
        self._open: dict[str, tuple[str, float, float]] = {}
        self._open_sums: dict[str, list[float]] = {}
        """Per queue, Σ gpus and Σ gpus·start of the runs going on: their GPU-seconds at `now`
        are now·Σ gpus − Σ gpus·start, while none started before the window."""
        self._open_starts: list[tuple[float, str]] = []
        """Starts of runs going on (stale entries skipped): the earliest tells whether one
        started before the window, whose time the core would clip."""

    def open(self, key: str, queue: str, start: float, gpus: int) -> None:
        """A funded workload started holding `gpus`."""
        if self._window > 0 and gpus > 0:
            self._open[key] = (queue, start, float(gpus))
            if not self._folds:  # with decay, runs are handed over one by one
                return
            sums = self._open_sums.setdefault(queue, [0.0, 0.0])
            sums[0] += gpus
            sums[1] += gpus * start
            heapq.heappush(self._open_starts, (start, key))

    def close(self, key: str, end: float) -> None:
        """It stopped or finished; unfunded and GPU-less workloads were never opened."""
        entry = self._open.pop(key, None)
        if entry is None:
            return
        queue, start, gpus = entry
        record = UsageRecord(queue, start, end, gpus)
        if not self._folds:
            self._loose.append(record)
            return
        sums = self._open_sums[queue]
        sums[0] -= gpus
        sums[1] -= gpus * start
        hour = math.floor(start / HOUR)
        if hour not in self._hours:
            self._hours[hour] = []
            heapq.heappush(self._hour_heap, hour)
        self._hours[hour].append(record)
        seconds = self._folded.setdefault(queue, {})
        seconds[hour] = seconds.get(hour, 0.0) + gpus * (end - start)
        self._folded_sum.pop(queue, None)

    def records(self, now: float) -> list[UsageRecord]:
        """Records whose windowed GPU time at `now` is that of every run reaching into it."""
        if self._window <= 0:
            return []
        oldest = now - self._window
        while self._hour_heap and self._hour_heap[0] * HOUR < oldest:
            self._unfold(heapq.heappop(self._hour_heap))
        if not self._folds:
            self._loose = [record for record in self._loose if record.end > oldest]
            return [*self._loose, *(UsageRecord(queue, start, now, gpus)
                                    for queue, start, gpus in self._open.values())]
        seconds: dict[str, float] = {}
        for queue, hours in self._folded.items():
            total = self._folded_sum.get(queue)
            if total is None:
                total = self._folded_sum[queue] = sum(hours.values())
            seconds[queue] = total
        kept: list[UsageRecord] = []
        for record in self._loose:  # clipped to the window, as the core would
            end, start = record.end, record.start
            if end > oldest:  # conditionals, not min/max: this loop runs every cycle
                kept.append(record)
                seconds[record.queue] = seconds.get(record.queue, 0.0) + record.gpus * (
                    (end if end < now else now) - (start if start > oldest else oldest))
        self._loose = kept
        if self._open_started_before(oldest):
            for queue, start, gpus in self._open.values():
                seconds[queue] = seconds.get(queue, 0.0) + gpus * (
                    now - (start if start > oldest else oldest))
        else:
            for queue, (gpus, gpu_starts) in self._open_sums.items():
                if gpus:
                    seconds[queue] = seconds.get(queue, 0.0) + (now * gpus - gpu_starts)
        return [UsageRecord(queue, oldest, now, total / self._window)
                for queue, total in seconds.items() if total > 0]

    def _open_started_before(self, moment: float) -> bool:
        starts, running = self._open_starts, self._open
        while starts:
            start, key = starts[0]
            entry = running.get(key)
            if entry is not None and entry[1] == start:
                return start < moment
            heapq.heappop(starts)
        return False

    def _unfold(self, hour: int) -> None:
        for record in self._hours.pop(hour):
            self._loose.append(record)
            self._folded[record.queue].pop(hour, None)
            self._folded_sum.pop(record.queue, None)
