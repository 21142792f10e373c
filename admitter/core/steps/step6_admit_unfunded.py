"""Step 6, the last: unfunded workloads take what is still idle, nothing evicted for them. They
may fill nodes held for the drain's gang until it can use them (the gang evicts them at once).
"""

from __future__ import annotations

from admitter.core.cycle_state import CycleState
from admitter.core.decisions import PendingReason
from admitter.core.model import GPU, Workload
from admitter.core.placement import Placement, PlacementFailure
from admitter.core.reservation import RESERVATION_KEY
from admitter.core.steps.offer import Work, serve


def admit_unfunded(cycle: CycleState) -> None:
    if cycle.reserved_for is not None:  # unfunded work may fill reserved nodes until used
        cycle.statement.release(RESERVATION_KEY)
        cycle.failures.clear()
    serve(cycle, _could_run(cycle, cycle.waiting(funded=False)),
          lambda workload: _try_unfunded(cycle, workload),
          lambda rest: _could_run(cycle, rest))


def _could_run(cycle: CycleState, work: Work) -> Work:
    """Drop, with their reason, workloads needing more GPUs than the whole cluster has idle, or
    whose pods fit on no set of idle nodes at all: on a saturated cluster that is most of them,
    and no placement search is needed to know it (idle capacity only shrinks while unfunded work
    is admitted). A caller that asked for no reasons is told none."""
    idle = cycle.state.free_total(GPU)
    short_of = f"the cluster has {idle} idle {GPU}; "  # once, not per workload
    possible: Work = {}
    for leaf, workloads in work.items():
        possible[leaf] = []
        for workload in workloads:
            need = workload.requests().get(GPU, 0)
            if need <= idle and cycle.fits_idle(workload):
                possible[leaf].append(workload)
            elif not cycle.reasons:  # what follows names the reason only (a failed
                continue  # placement remembered or not: capacity only shrinks meanwhile)
            elif (limit := cycle.ledger.limit_block(workload)) is not None:
                cycle.wait(workload, PendingReason.LIMIT_EXCEEDED, limit)
            elif need > idle and not cycle.state.tree.fleet:  # a fleet names its clusters
                cycle.wait(workload, PendingReason.NO_FIT, short_of, need, " needed")
            else:
                failed = cycle.place(workload)
                assert isinstance(failed, PlacementFailure)  # place() checks fits() first
                cycle.wait(workload, PendingReason.NO_FIT, failed.reason)
    return possible


def _try_unfunded(cycle: CycleState, workload: Workload) -> bool:
    limit = cycle.ledger.limit_block(workload)
    if limit is not None:
        cycle.wait(workload, PendingReason.LIMIT_EXCEEDED, limit)
        return False
    placed = cycle.place(workload)
    if isinstance(placed, Placement):
        cycle.admit(workload, placed, "unfunded, on idle capacity")
        cycle.borrowed = True
        return True
    cycle.wait(workload, PendingReason.NO_FIT, placed.reason)
    return False
