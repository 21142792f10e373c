"""One admission cycle: snapshot in, decisions out. Builds the cycle's state (`cycle_state`:
fair share for the snapshot's demand, usage and schedulable capacity, what `admitter fairshare`
and the ClusterQueue status show, and the ranking of allocations, funded GPU time over the
window against each queue's GPU budget, `ranking`), then runs the steps (`steps`, one file each)
in this order, for these reasons:

1. Evictions that depend on no one pending (maximum run time, pods never ready, cordoned
   nodes): what they free is there for every later step.
2. Funded short jobs, before any capacity is held: they see all the headroom kept for them.
3. One drain for a starving gang, before the long work: its held nodes then turn away every
   long admission that could delay it.
4. The rest of the funded work, best-ranked allocation first; what cannot delay the gang may
   start on its held nodes.
5. Long work that only the short jobs' room turned away, once every other funded workload has
   had its turn: what is idle now would otherwise stand idle.
6. Unfunded work, last: it takes only what funded work leaves idle.

Every workload still pending leaves with the fact that blocks it (`CycleState.wait`), if the
caller asked for reasons (`CycleSettings.reasons`; the simulator does not). As many workloads
are admitted per cycle as fit; there is no one-head-per-queue limit.
"""

from __future__ import annotations

from admitter.core.cycle_state import CycleInputs, CycleState, scan
from admitter.core.decisions import CycleResult, Snapshot
from admitter.core.nodes import ClusterState
from admitter.core.queue_tree import QueueTree
from admitter.core.quota import Allocations
from admitter.core.steps.step1_evict_expired import evict_expired
from admitter.core.steps.step2_admit_short import admit_short
from admitter.core.steps.step3_drain_for_starving import drain_for_starving
from admitter.core.steps.step4_admit_long import admit_long
from admitter.core.steps.step5_give_up_room import give_up_room
from admitter.core.steps.step6_admit_unfunded import admit_unfunded


def run_cycle(snapshot: Snapshot) -> CycleResult:
    """Decide admissions and evictions for one snapshot, everything built afresh; pure and
    deterministic. The reference that `incremental.IncrementalCore` decides exactly as."""
    tree = QueueTree(snapshot.queues)
    inputs = scan(snapshot.workloads, tree.leaves())
    nodes = ClusterState(snapshot.nodes, snapshot.topology, inputs.holding)
    return _decide(CycleState(snapshot, tree, inputs, nodes,
                              Allocations(tree, inputs.admitted)))


def run_kept_cycle(snapshot: Snapshot, tree: QueueTree, inputs: CycleInputs,
                   nodes: ClusterState, allocations: Allocations) -> CycleResult:
    """`run_cycle` on models a caller keeps between cycles (`incremental.IncrementalCore`):
    `tree` is `QueueTree(snapshot.queues)`, `inputs` what `scan` makes of the workloads, `nodes`
    the node model holding `inputs.holding` and `allocations` the sums of `inputs.admitted`.
    The cycle changes the two models only through its `Statement` and rolls that back before
    returning, so the caller gets them back unchanged, their memos warm."""
    cycle = CycleState(snapshot, tree, inputs, nodes, allocations)
    mark = cycle.statement.checkpoint()
    try:
        return _decide(cycle)
    finally:
        cycle.statement.rollback(mark)


def _decide(cycle: CycleState) -> CycleResult:
    """The steps, in the module docstring's order."""
    evict_expired(cycle)
    admit_short(cycle)
    drain_for_starving(cycle)
    admit_long(cycle)
    give_up_room(cycle)
    admit_unfunded(cycle)
    return cycle.result()
