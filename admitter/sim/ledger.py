"""Funded GPU time per leaf queue, kept as the usage records the core's fair share reads.

One record per run of a funded workload: closed when it stops or finishes, open (ending now)
while it runs. The scenario's `history` enters as records spread over the window before time 0.
Records that ended before the window are dropped, since the core would ignore them anyway.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from admitter.core.model import FairShareSettings, UsageRecord
from admitter.core.usage import spread_history


class UsageLedger:
    """Records for `Snapshot.usage`; empty when time-based fair share is off (window 0)."""

    def __init__(self, settings: FairShareSettings, history: Mapping[str, float]) -> None:
        self._window = settings.window
        self._closed: deque[UsageRecord] = deque(spread_history(history, 0.0, settings))
        """Closed records in order of their end, so the oldest leave from the front."""
        self._open: dict[str, tuple[str, float, float]] = {}

    def open(self, key: str, queue: str, start: float, gpus: int) -> None:
        """A funded workload started holding `gpus`."""
        if self._window > 0 and gpus > 0:
            self._open[key] = (queue, start, float(gpus))

    def close(self, key: str, end: float) -> None:
        """It stopped or finished; unfunded and GPU-less workloads were never opened."""
        entry = self._open.pop(key, None)
        if entry is not None:
            queue, start, gpus = entry
            self._closed.append(UsageRecord(queue, start, end, gpus))

    def records(self, now: float) -> list[UsageRecord]:
        """Every record reaching into the window ending at `now`."""
        if self._window <= 0:
            return []
        oldest = now - self._window
        while self._closed and self._closed[0].end <= oldest:
            self._closed.popleft()
        running = (UsageRecord(q, start, now, gpus) for q, start, gpus in self._open.values())
        return [*self._closed, *running]
