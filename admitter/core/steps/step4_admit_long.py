"""Step 4: the rest of the funded work, after the drain has held its nodes. Rank, don't cap: a
funded workload is admitted where it fits, within explicit limits (long non-preemptible work
within its fair share) and leaving the short jobs' headroom, best-ranked allocation first
(level by level, re-ranked after each admission), by priority inside a queue; one that does not
fit may requeue running work past its min runtime (`preemption`, `eviction`). Long work that
cannot delay the drained gang may start on its held nodes (`held_capacity`).
"""

from __future__ import annotations

from admitter.core.cycle_state import CycleState
from admitter.core.steps.funded import admit_funded


def admit_long(cycle: CycleState) -> None:
    admit_funded(cycle, short=False)
