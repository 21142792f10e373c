"""Step 5: long funded work that only the short jobs' room turned away, tried again in the
order it was. Every other funded workload has had its turn, so what is idle now would otherwise
stand idle, and the room is given up to a start where keeping it would idle more GPUs than it
keeps (`Headroom.refusal`, weighing). On idle GPUs only: nothing is evicted for it.
"""

from __future__ import annotations

from admitter.core.cycle_state import CycleState
from admitter.core.placement import Placement, PlacementFailure


def give_up_room(cycle: CycleState) -> None:
    """Again until a round starts nothing: a start moves the others' placements, and one turned
    away on a node partly in use may now fit a node where nothing runs."""
    cycle.headroom.weighing = True
    started = True
    while started:
        started = False
        for key, (workload, said) in cycle.room_refused.items():
            if key in cycle.running or workload is cycle.reserved_for:
                continue
            placed = cycle.place(workload)
            why = placed.reason if isinstance(placed, PlacementFailure) else (
                cycle.headroom.refusal(workload, placed))
            if why is None and isinstance(placed, Placement):
                cycle.admit(workload, placed, "fits; the short jobs' room is given up to it, "
                            "as keeping the room would idle more GPUs than it keeps")
                started = True
            elif why is not None:
                said.text = why  # its message says what decided last
