"""Time-based fair share: how much funded GPU time each queue used inside the lookback window.

One ledger keeps it, for the controller and the simulator alike: `UsageLedger` charges the
runs of funded workloads into hourly buckets per queue and reads the window off them. Hourly
buckets are the form the controller persists in each ClusterQueue's status (a week is 168 of
them, whatever the number of runs); the simulator keeps the same form, so the usage its
figures rest on is the usage the controller would decide on.

The rule the hourly form sets: an hour's GPU-seconds count as if spread evenly over the hour
(up to `now` for the hour going on). Only the hour the window's start cuts through, and the
decay inside an hour, depend on it; a run's GPU-seconds are otherwise counted exactly.

Only funded time is charged (Ai2's allocated occupancy): callers open runs for funded
workloads only, so the ledger never sees unfunded time and never needs to ask.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from admitter.core.fairshare import FairShare, compute_fair_share
from admitter.core.model import GPU, FairShareSettings
from admitter.core.queue_tree import QueueTree

HOUR = 3600.0


class _QueueHours:
    """One queue's GPU-seconds by hour (index `start // HOUR`), complete up to `accounted`,
    and the GPUs its open runs hold since then."""

    __slots__ = ("accounted", "gpus", "hours", "runs", "settled", "span")

    def __init__(self, accounted: float) -> None:
        self.accounted = accounted
        self.gpus = 0.0
        self.runs = 0
        self.hours: dict[int, float] = {}
        """Ascending: charging only moves forward."""
        self.span = (0, -1)
        self.settled = 0.0
        """Σ of the hours in `range(*span)`: whole hours inside the window and no longer
        charged, summed again only when the window's start or the hour charged moves on (a
        week is 168 hours, a simulation runs tens of thousands of cycles)."""

    def start(self, at: float, gpus: float) -> None:
        """A run holding `gpus` opened at `at`."""
        self.advance(at)
        self.gpus += gpus
        self.runs += 1

    def stop(self, at: float, gpus: float) -> None:
        """A run holding `gpus` closed at `at`."""
        self.advance(at)
        self.gpus -= gpus
        self.runs -= 1
        if not self.runs:
            self.gpus = 0.0  # no rounding left over from a long sequence of runs

    def window_seconds(self, now: float, window: float, half_life: float) -> float:
        """GPU-seconds inside `[now - window, now]`, decayed, after charging up to `now`;
        hours wholly before it are dropped."""
        oldest = now - window
        edge = math.floor(oldest / HOUR)
        self.advance(now)
        self.drop_before(edge)
        return (self.decayed(now, oldest, edge, half_life) if half_life > 0
                else self.plain(now, oldest, edge))

    def advance(self, to: float) -> None:
        """Charge what the open runs held from `accounted` to `to`; earlier times are
        already charged."""
        if to <= self.accounted:
            return
        if self.gpus > 0:
            _charge(self.hours, self.gpus, self.accounted, to)
        self.accounted = to

    def drop_before(self, hour: int) -> None:
        hours = self.hours
        while hours:
            first = next(iter(hours))
            if first >= hour:
                return
            del hours[first]

    def plain(self, now: float, oldest: float, edge: int) -> float:
        """Undecayed GPU-seconds in the window: whole hours as they are, the hour the window's
        start cuts (`edge`) as much of it as lies inside."""
        first = edge if edge * HOUR >= oldest else edge + 1
        current = math.floor(now / HOUR)
        if self.span != (first, current):
            self.span = (first, current)
            self.settled = 0.0
            for hour in range(first, current):
                self.settled += self.hours.get(hour, 0.0)
        total = self.settled
        if current >= first:
            total += self.hours.get(current, 0.0)
        if first > edge:
            total += self.share(edge, now, oldest, 0.0)
        return total

    def decayed(self, now: float, oldest: float, edge: int, half_life: float) -> float:
        total = 0.0
        for hour in self.hours:
            if hour >= edge:
                total += self.share(hour, now, oldest, half_life)
        return total

    def share(self, hour: int, now: float, oldest: float, half_life: float) -> float:
        """The hour's GPU-seconds spread evenly over `[start, min(start + HOUR, now)]`, the
        part inside the window, decayed."""
        seconds = self.hours.get(hour, 0.0)
        start = hour * HOUR
        end = start + HOUR if start + HOUR < now else now
        first = start if start > oldest else oldest
        if seconds <= 0 or end <= first:
            return 0.0
        return seconds / (end - start) * _decayed_seconds(now - end, now - first, half_life)


def _charge(hours: dict[int, float], gpus: float, start: float, end: float) -> None:
    """Add `gpus` held from `start` to `end` to the hours they fall in."""
    moment = start
    while moment < end:
        hour = math.floor(moment / HOUR)
        until = min(end, (hour + 1) * HOUR)
        hours[hour] = hours.get(hour, 0.0) + gpus * (until - moment)
        moment = until


class UsageLedger:
    """Funded GPU-seconds per leaf queue by hour, fed with runs that open and close.

    Pure: every time is an argument, and times given to one queue must not go back (an
    earlier one counts as the queue's last). Off (every call a no-op, `usage` empty) when the
    window is 0.

    Hazard: a run opened at a time before its queue's `accounted` is charged from `accounted`
    only: the hours restored from a ClusterQueue's status already hold what it used before.
    """

    def __init__(self, settings: FairShareSettings) -> None:
        self._window = settings.window
        self._half_life = settings.half_life
        self._queues: dict[str, _QueueHours] = {}
        self._runs: dict[str, tuple[str, float]] = {}
        """Open runs: workload key → (queue, GPUs)."""
        self._short: _QueueHours | None = None
        """Short jobs' GPU-seconds by hour, whatever their queue (`short_gpus`)."""
        self._short_since = 0.0
        """When the first short run opened: the part of the window the ledger has seen."""
        self._short_runs: dict[str, float] = {}
        """Open runs of short jobs: workload key → GPUs."""

    def restore(self, queue: str, hours: Mapping[int, float], accounted: float) -> None:
        """Take a queue's hours as persisted, complete up to `accounted`; open runs of that
        queue are dropped (their holders open them again)."""
        if self._window <= 0:
            return
        self.forget(queue)
        state = self._queues[queue] = _QueueHours(accounted)
        state.hours = {hour: float(hours[hour]) for hour in sorted(hours)}

    def forget(self, queue: str) -> None:
        """Drop a queue and its open runs (its ClusterQueue is gone)."""
        self._queues.pop(queue, None)
        for key in [key for key, (held_by, _) in self._runs.items() if held_by == queue]:
            del self._runs[key]
            self._close_short(key, None)

    def add_history(self, gpu_hours: Mapping[str, float], now: float) -> None:
        """Per-queue lumps of GPU-hours with no timestamps (a scenario's `history`), read as
        used evenly over the window ending at `now`: the only reading that needs no invented
        timestamps. Before any run of those queues."""
        window = self._window
        for queue, amount in gpu_hours.items():
            if window > 0 and amount > 0:
                state = self._queues.setdefault(queue, _QueueHours(now))
                _charge(state.hours, amount * HOUR / window, now - window, now)
                state.span = (0, -1)

    def open(self, key: str, queue: str, at: float, gpus: float, short: bool = False) -> None:
        """A funded workload started holding `gpus` at `at`; `short`: a debug job
        (`ShortJobs.is_short`), whose GPU time is also counted apart (`short_gpus`)."""
        if self._window <= 0 or gpus <= 0 or key in self._runs:
            return
        state = self._queues.get(queue)
        if state is None:
            state = self._queues[queue] = _QueueHours(at)
        state.start(at, gpus)
        self._runs[key] = (queue, gpus)
        if short:
            if self._short is None:
                self._short, self._short_since = _QueueHours(at), at
            self._short.start(at, gpus)
            self._short_runs[key] = gpus

    def close(self, key: str, at: float) -> None:
        """It stopped (finished, evicted, gone) at `at`; an unknown key is ignored."""
        run = self._runs.pop(key, None)
        if run is None:
            return
        queue, gpus = run
        self._queues[queue].stop(at, gpus)
        self._close_short(key, at)

    def _close_short(self, key: str, at: float | None) -> None:
        """Close `key`'s short run, if it has one, charged up to `at` (None: no further than
        the short hours are charged already)."""
        gpus = self._short_runs.pop(key, None)
        if gpus is not None and self._short is not None:
            self._short.stop(self._short.accounted if at is None else at, gpus)

    def runs(self) -> dict[str, tuple[str, float]]:
        """Open runs: workload key → (queue, GPUs) (a copy)."""
        return dict(self._runs)

    def hours(self, queue: str) -> tuple[float, dict[int, float]] | None:
        """The persisted form of a queue: up to when it is charged, and its GPU-seconds by
        hour index (ascending); None for a queue the ledger does not know."""
        state = self._queues.get(queue)
        return None if state is None else (state.accounted, dict(state.hours))

    def usage(self, now: float) -> dict[str, float]:
        """Decayed GPU-seconds per queue inside `[now - window, now]`, after charging the open
        runs up to `now`; hours wholly before the window are dropped.

        Each hour counts as its GPU-seconds spread evenly over `[start, min(start + HOUR,
        now)]`, clipped to the window and weighed by 0.5^((now - t) / half_life) integrated
        exactly over what is left (`half_life == 0`: no decay, and an hour wholly inside the
        window counts its GPU-seconds as they are). Queues that used nothing are left out."""
        if self._window <= 0:
            return {}
        used: dict[str, float] = {}
        for queue, state in self._queues.items():
            total = state.window_seconds(now, self._window, self._half_life)
            if total > 0:
                used[queue] = total
        return used

    def short_gpus(self, now: float) -> float:
        """The GPUs short jobs held on average (decayed as usage is) over the window, or over
        the part of it since the first short job ran if that is shorter: a ledger that saw one
        day of a week averages that day, rather than spreading it over six days it never saw.
        Not persisted: a new leader starts from its own first short job."""
        state = self._short
        if self._window <= 0 or state is None:
            return 0.0
        seen = min(self._window, now - self._short_since)
        span = _decayed_seconds(0.0, seen, self._half_life)
        total = state.window_seconds(now, self._window, self._half_life)
        return total / span if span > 0 else 0.0


def _decayed_seconds(age_from: float, age_to: float, half_life: float) -> float:
    """∫ 0.5^(age / half_life) d(age) from `age_from` to `age_to` (plain length without decay)."""
    if half_life <= 0:
        return age_to - age_from
    rate = math.log(2) / half_life
    return -math.exp(-rate * age_from) * math.expm1(-rate * (age_to - age_from)) / rate


def normalised_usage(
    tree: QueueTree, raw: Mapping[str, float], cluster_gpus: int, settings: FairShareSettings
) -> dict[str, float]:
    """Usage as the fraction fair share compares against normalised over-quota weights.

    A root's usage is its GPU-seconds over the cluster's GPU-seconds in the window (cluster GPUs
    × window, KAI's normalisation, so 24 GPU-h on 10 GPUs over 10 h scores 0.24). A deeper
    queue's usage is its share of its parent's usage, so siblings add up to 1 like their
    normalised weights do; this deliberately departs from KAI, which compares child weights
    with a cluster-wide fraction. A parent that used nothing gives its children 0.

    Only the leaves' entries of `raw` are read (workloads, hence records, only run on leaves)
    and rolled up here, so `raw` may or may not already hold parent sums. Every queue of the
    tree is in the result; all 0 when the feature is off (`window == 0`).
    The same number serves every resource: usage is GPU time, and a queue that used the GPUs
    is the one that should yield CPU and memory surplus too.
    """
    window = max(settings.window, 0.0)
    own = {name: raw.get(name, 0.0) for name in tree.leaves()} if window else {}
    total = tree.roll_up(own, 0.0)
    cluster = cluster_gpus * window
    usage: dict[str, float] = {}
    for name in tree:
        parent = tree.parent(name)
        whole = cluster if parent is None else total[parent]
        usage[name] = total[name] / whole if whole > 0 else 0.0
    return usage


def fair_share_now(
    tree: QueueTree,
    capacity: dict[str, int],
    demand: dict[str, dict[str, int]],
    used: Mapping[str, float],
    settings: FairShareSettings,
) -> tuple[dict[str, float] | None, dict[str, float], FairShare]:
    """Fair share of `demand` (funded requests per leaf) on `capacity`, surplus weighed by
    `used`, the window's GPU-seconds per leaf (`UsageLedger.usage`): the division every cycle
    makes and `admitter fairshare` prints. Also the window's GPU-seconds per queue (subtree
    sums; None with the window off, when usage plays no part) and their normalised form."""
    usage: dict[str, float] = {}
    raw: dict[str, float] | None = None
    if settings.window > 0:
        raw = tree.roll_up(used, 0.0)
        usage = normalised_usage(tree, raw, capacity.get(GPU, 0), settings)
    k_value = settings.k_value if settings.window > 0 else 0.0
    return raw, usage, compute_fair_share(tree, capacity, demand, usage, k_value)
