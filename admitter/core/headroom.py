"""A small headroom for short jobs, which long protected starts respect.

Once work is time-sliced, nearly everything running has started recently and is still inside
its protected min runtime (hours), so a short debug job would find neither idle GPUs nor any
victim. Hence a long funded start must leave a pool of at least `needed` GPUs that are idle or
held by unfunded work (which yields at once). Short jobs (`is_short`) may use the pool, and
unfunded work may fill it; evicting unfunded work does not grow it (the GPUs only change hands
inside it). A workload too large ever to leave the pool (more GPUs than the cluster's minus the
pool) is not held to it, nor is the drain's target (`exempt`): it has waited past the starvation
bound, and once its domain is emptied nothing else may keep it out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from admitter.core.model import GPU, Phase, Workload
from admitter.core.nodes import ClusterState

HEADROOM_FRACTION = 0.02
"""Part of the schedulable GPUs kept for short jobs, rounded down (none below 50 GPUs). Ai2 runs
at 98 % occupancy with debug p90 at 30 s: 2 % fits inside what is not occupied anyway, and at
most that stands idle when short jobs and unfunded work use none of it. Kept whether or not short
work is waiting now: debug jobs arrive one at a time, and a pool refilled only once one waits
would be taken by long work in between."""

SHORT_MIN_RUNTIME = 900.0
"""A workload protected for at most this long may be short (Ai2's debug workloads: "a minimum
runtime of 15 minutes or less")."""

SHORT_MAX_GPUS = 4
"""...and asking for at most this many GPUs ("a small number of GPUs"): half an 8-GPU host, so
that a short job never needs a whole node emptied."""


def is_short(workload: Workload) -> bool:
    """A debug job: funded, protected for at most `SHORT_MIN_RUNTIME`, one pod of at most
    `SHORT_MAX_GPUS` GPUs."""
    return (0 < workload.min_runtime <= SHORT_MIN_RUNTIME
            and sum(p.count for p in workload.pod_sets) == 1
            and workload.requests().get(GPU, 0) <= SHORT_MAX_GPUS)


def flexible(workload: Workload) -> bool:
    """Work that may use the pool: short or unfunded."""
    return not workload.funded or is_short(workload)


class Headroom:
    """The pool's bound for one cycle and what unfunded work holds, kept current by the cycle's
    `Statement` (`change`) as it allocates and evicts, simulations included."""

    def __init__(self, state: ClusterState, workloads: Iterable[Workload]) -> None:
        self._state = state
        self.held = 0
        for workload in workloads:
            if workload.phase is Phase.ADMITTED and not workload.funded:
                self.held += workload.requests().get(GPU, 0)
        self._gpus = state.schedulable_capacity().get(GPU, 0)
        self.needed = math.floor(HEADROOM_FRACTION * self._gpus)
        self.exempt: str | None = None
        """The key of the workload a drain is for, set by the cycle once it is chosen."""

    def applies(self, workload: Workload) -> bool:
        """Whether `workload` is held to the headroom at all."""
        return self.needed > 0 and workload.key != self.exempt and not flexible(workload) and (
            workload.requests().get(GPU, 0) <= self._gpus - self.needed)

    def pool(self) -> int:
        """GPUs in the pool now: idle, or held by unfunded work."""
        return self._state.free_total(GPU) + self.held

    def allows(self, workload: Workload) -> bool:
        """Whether `workload` may start on what is free now (unfunded work evicted for it has
        left `held` as its GPUs became free: they were in the pool already)."""
        if not self.applies(workload):
            return True
        return self.pool() - workload.requests().get(GPU, 0) >= self.needed

    def change(self, workload: Workload, sign: int) -> None:
        """`workload` started (1) or stopped (-1)."""
        if not workload.funded:
            self.held += sign * workload.requests().get(GPU, 0)
