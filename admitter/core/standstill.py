"""When nothing changed, a cycle's answer stands: the kept core (`incremental.IncrementalCore`)
hands back the last one instead of trying every waiting workload again.

The cycle is deterministic: it reads its workloads, nodes, queues, settings, usage, the short
jobs' mean GPUs, and the moment `now`. A cycle that admitted and evicted nothing left the state
it read as it was, so a later cycle decides the same if none of those inputs changed but
`now`, and `now` crossed nothing the cycle compares it with. Those comparisons are the
workloads' own moments: a running workload's protected min runtime ending (who may be
evicted, what yields to the short jobs' room, what a drain may take), its maximum run time and
its pods-ready deadline (step 1), all from `Workload.running_moments`; a waiting workload's
backoff and its starvation bound (step 3, `Workload.starves_at`); and what the cycle noted
itself (`CycleResult.next_change`). Before
the first of them, each comparison comes out as it did, so every step takes the same path.

Besides those, a cycle that held nodes for a starving gang compares, for each long workload
that could start on them, when its min runtime would end with when the gang could start
(`backfill`): the cycle notes the first such comparison to turn (`CycleResult.steady_until`).
A running workload with no admission time and pods not ready has a pods-ready deadline counted
from each cycle's `now`: then the answer does not stand. The one other use of `now`, a
non-resumable victim's lost progress (`preemption`'s eviction order), grows alike for every
such victim and keeps their order.

A standing answer is the last one, with every moment its reasons name measured from the new
`now` (`Pending.redated`). Its cost is comparing the usage (one entry per leaf); the moments
are found once, when the answer is first asked to stand at a later moment (`_first_change`).
"""

from __future__ import annotations

from collections.abc import Mapping

from admitter.core.cycle_state import CycleInputs
from admitter.core.decisions import CycleResult, CycleSettings, Pending


class Standing:
    """The answer of a cycle that admitted and evicted nothing, and what it was given; it
    stands for a cycle given the same (`stands_at`). `changes` is the kept core's count of
    changes to its workloads, nodes or queues when the cycle ran; `inputs` what the core
    handed the cycle, read only while that count holds."""

    __slots__ = ("_dated", "_inputs", "_until", "changes", "now", "result", "settings",
                 "short_gpus", "usage")

    def __init__(self, result: CycleResult, changes: int, now: float,
                 usage: dict[str, float], short_gpus: float, settings: CycleSettings,
                 inputs: CycleInputs) -> None:
        self.result = result
        self.changes = changes
        self.now = now
        self.usage = usage
        self.short_gpus = short_gpus
        self.settings = settings
        self._inputs = inputs
        self._until: float | None = None
        """The first moment after `now` at which the answer may change (found when asked)."""
        self._dated: list[int] | None = None
        """Positions in `result.pending` of the reasons that name a moment."""

    def stands_at(self, changes: int, now: float, usage: Mapping[str, float],
                  short_gpus: float, settings: CycleSettings) -> bool:
        """Whether a cycle at `now` on these inputs decides exactly as this one did."""
        if (changes != self.changes or now < self.now or short_gpus != self.short_gpus
                or settings != self.settings or dict(usage) != self.usage):
            return False
        if now == self.now:
            return True
        if self._until is None:
            self._until = self._first_change()
        return now < self._until

    def result_at(self, now: float) -> CycleResult:
        """The answer as a cycle at `now` gives it (`stands_at` said it stands)."""
        result = self.result
        if now == self.now:
            return result
        return CycleResult((), (), lambda: self._pending_at(now), result.fair_share,
                           result.next_change, result.settled, lambda: result.queues,
                           result.ranking, result.steady_until)

    def _pending_at(self, now: float) -> tuple[Pending, ...]:
        pending = self.result.pending
        if self._dated is None:
            self._dated = [i for i, wait in enumerate(pending) if wait.dated]
        if not self._dated:
            return pending
        restated = list(pending)
        for i in self._dated:
            restated[i] = pending[i].redated(now)
        return tuple(restated)

    def _first_change(self) -> float:
        """`now` if the answer depends on time beyond the workloads' moments (the module
        docstring), else the first after `now` of those moments and the cycle's own
        `next_change`."""
        result, inputs, now = self.result, self._inputs, self.now
        first = result.steady_until
        if result.next_change is not None and result.next_change < first:
            first = result.next_change
        timeout, bound = self.settings.pods_ready_timeout, self.settings.starvation_bound
        for workload in inputs.holding:
            if not workload.pods_ready and workload.admitted_at is None:
                return now  # its pods-ready deadline is counted from each cycle's `now`
            for moment in workload.running_moments(timeout, now):
                if moment is not None and now < moment < first:
                    first = moment
        waiting = [inputs.invalid, *inputs.waiting_funded.values(),
                   *inputs.waiting_unfunded.values()]
        for workloads in waiting:
            for workload in workloads:
                for moment in (workload.eligible_at, workload.starves_at(bound)):
                    if now < moment < first:
                        first = moment
        return first

