"""Step 2: funded short jobs (`ShortJobs.is_short`, debug jobs) first, before a drain holds
capacity: they see all the headroom kept for them, and what they take on drained nodes the drain
takes back past their min runtime (`eviction`). A short job may make room by requeueing work
(`funded.try_funded`).
"""

from __future__ import annotations

from admitter.core.cycle_state import CycleState
from admitter.core.steps.funded import admit_funded


def admit_short(cycle: CycleState) -> None:
    admit_funded(cycle, short=True)
