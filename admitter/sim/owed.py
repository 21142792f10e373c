"""What each team is owed over a run, as Ai2 means it: "each active group should receive its
allocated GPU time if it continues submitting enough demand".

The run's schedulable GPU-time (every node's GPUs over the run, cordoned stretches left out) is
water-filled down the queue tree: siblings divide their parent's part in proportion to their
GPU over-quota weight (Ai2's budgets are weights), each capped by the funded work its subtree
submitted that could run before the end (GPUs × the part of its duration that fits between its
submission and the end); what a capped sibling cannot take goes to the others. So a team that
submitted too little is owed only that, and a team with enough demand is owed its weight's
part of what the idle teams leave. It follows the scoring the scenario family uses: the same
measure of what a team was owed. Quotas do not enter it (a queue with weight 0 is owed
nothing); the admission cycle's budget (`ranking.gpu_budgets`) counts them, so where quotas
are not in proportion to weights the two differ.

Computed once per run (not per simulated moment), from the submissions alone: what the
scheduler did cannot change what a team is owed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from admitter.core.model import GPU
from admitter.core.queue_tree import QueueTree
from admitter.sim.workloads import Instance


def runnable_gpu_seconds(instances: Iterable[Instance], end: float) -> dict[str, float]:
    """Per leaf, the funded GPU-seconds it submitted that could run before `end`."""
    runnable: dict[str, float] = {}
    for instance in instances:
        if instance.pending.funded:
            fits = max(0.0, min(instance.duration, end - instance.submitted_at))
            runnable[instance.queue] = runnable.get(instance.queue, 0.0) + instance.gpus * fits
    return runnable


def water_fill(amount: float, caps: Mapping[str, float],
               weights: Mapping[str, float]) -> dict[str, float]:
    """`amount` divided in proportion to `weights`, nobody above its cap, what a capped one
    leaves going to the others; names without weight or cap get nothing (so `amount` is not
    all given out when the caps add up to less, or only weightless names want more)."""
    given = dict.fromkeys(caps, 0.0)
    wanting = [name for name in caps if caps[name] > 0 and weights.get(name, 0.0) > 0]
    left = amount
    while wanting and left > 0:
        level = left / sum(weights[name] for name in wanting)  # per unit of weight
        capped = [name for name in wanting if caps[name] <= level * weights[name]]
        if not capped:
            for name in wanting:
                given[name] = level * weights[name]
            break
        for name in capped:
            given[name] = caps[name]
            left -= caps[name]
        wanting = [name for name in wanting if name not in capped]
    return given


def owed_gpu_seconds(tree: QueueTree, schedulable: float,
                     runnable: Mapping[str, float]) -> dict[str, float]:
    """Per leaf, its part of the `schedulable` GPU-seconds: water-filled level by level by GPU
    over-quota weight, each queue capped by its subtree's `runnable` work."""
    caps = tree.roll_up({leaf: runnable.get(leaf, 0.0) for leaf in tree.leaves()}, 0.0)
    owed: dict[str, float] = {}
    for parent, siblings in tree.sibling_groups():  # top down: a parent's part comes first
        amount = schedulable if parent is None else owed[parent]
        owed.update(water_fill(
            amount, {name: caps[name] for name in siblings},
            {name: tree.queue(name).knobs(GPU).over_quota_weight for name in siblings}))
    return {leaf: owed[leaf] for leaf in tree.leaves()}
