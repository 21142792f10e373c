"""Starting work on the capacity a drain holds for its starving gang (`reservation`), without
delaying the gang: held GPUs stand idle for hours otherwise, while the gang waits for protected
occupants.
"""

from __future__ import annotations

from admitter.core.backfill import Backfill
from admitter.core.cycle_state import CycleState
from admitter.core.model import Workload
from admitter.core.moments import moment
from admitter.core.placement import Placement, PlacementFailure, place
from admitter.core.reservation import (
    RESERVATION_KEY,
    choose,
    drain_alike,
    drainable_gpus,
    hold,
    unfunded_gpus,
)


def start_on_held(cycle: CycleState, workload: Workload) -> bool:
    """Start `workload` on capacity held for the drain's gang, if it stays within its queues'
    deserved GPUs (a hold is a reserve, and a reserve is never taken out of another queue's
    guarantee; inside the gang's own queue, the gang keeps its place), or if it cannot delay
    the gang (`backfill.Backfill`: backfilled) and the drain's choice stays put with it running
    (`keeps_choice`); the rest of the held capacity stays held."""
    backfill = cycle.backfill
    if backfill is None:
        return False
    guaranteed = (workload.queue != backfill.gang.queue
                  and cycle.ledger.within_deserved(workload))
    if not guaranteed:
        if backfill.start_at is not None:  # `may_take` turns false once this is past
            cycle.steady(backfill.start_at - workload.min_runtime)
        if not backfill.may_take(workload, cycle.now):
            return False
    shape = ("backfill", workload.shape(), workload.topology.required,
             workload.topology.preferred)
    if shape in cycle.failures:
        return False
    statement = cycle.statement
    mark = statement.checkpoint()
    statement.release(RESERVATION_KEY)
    placed = place(cycle.state, workload, explain=False)  # the reason is never read here
    if isinstance(placed, PlacementFailure):
        cycle.failures[shape] = placed  # capacity only shrinks until something is evicted
    if not isinstance(placed, Placement) or cycle.headroom.refusal(
            workload, placed) is not None or not (
                guaranteed or keeps_choice(cycle, backfill, workload, placed)):
        statement.rollback(mark)  # the hold is back as it was
        return False
    start_at = backfill.start_at  # known unless guaranteed (`Backfill.may_take`)
    cycle.admit(workload, placed, (
        f"within its queues' deserved quota, on nodes held for {backfill.gang.key}"
        if guaranteed or start_at is None else
        f"backfilled on nodes held for {backfill.gang.key}, its min runtime over by "
        f"{moment(start_at, cycle.now)}, when that gang could start"))
    hold(statement, backfill.chosen)
    return True


def keeps_choice(cycle: CycleState, backfill: Backfill, workload: Workload,
                 placed: Placement) -> bool:
    """Whether the drain would choose the same nodes with `workload` running at `placed`
    (assumed on the statement for the question only). Hazard: a backfill that moved the choice
    would release the hold to long work and start the drain over."""
    mark = cycle.statement.checkpoint()
    cycle.statement.assume(workload.key, workload.pod_sets, placed.node_counts)
    running = [*cycle.running.values(), workload.admitted(cycle.now, placed.node_counts)]
    chosen = choose(cycle.state, cycle.nodes, backfill.gang, *drainable_gpus(
        running, unfunded_gpus(running), cycle.now, backfill.takes, backfill.waits_for,
        drain_alike(cycle.eviction, backfill.gang)))
    cycle.statement.rollback(mark)
    return sorted(chosen) == sorted(backfill.chosen)
