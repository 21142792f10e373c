"""Who is offered capacity first: queues level by level, then workloads inside a leaf queue.

Among siblings, in order of precedence:
1. queues still owed part of their deserved quota;
2. lower saturation, allocated / fair share of the queue's dominant resource (DRF), so a
   CPU-heavy and a GPU-heavy queue are compared on what each uses most; holding a resource
   with zero fair share is infinitely saturated, hence last;
3. higher queue priority;
4. lower windowed usage per unit of GPU over-quota weight (usage is GPU time);
5. creation order, then name.
Inside a leaf: higher workload priority, then earlier submission (kept across requeues).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from admitter.core.fairshare import FairShare
from admitter.core.model import GPU, Resources, Workload
from admitter.core.queue_tree import QueueTree

SiblingKey = tuple[bool, float, int, float, int, str]


def below_deserved(fair: FairShare, queue: str, allocated: Resources) -> bool:
    """True while the queue holds less than its deserved amount of some resource.

    Any one resource is enough: quota left unset defaults to 0, so asking for every resource
    to be within quota would make almost no queue count as owed anything.
    """
    for resource, share in fair.shares.get(queue, {}).items():  # a loop: hot, no generator
        if allocated.get(resource, 0) < share.deserved:
            return True
    return False


def saturation(fair: FairShare, queue: str, allocated: Resources) -> float:
    """max over held resources of allocated / fair share: the dominant resource decides."""
    shares = fair.shares.get(queue, {})
    worst = 0.0
    for resource, amount in allocated.items():
        if amount <= 0:
            continue
        held = shares.get(resource)
        share = 0 if held is None else held.fair_share
        worst = max(worst, amount / share if share > 0 else math.inf)
    return worst


def sibling_key(
    tree: QueueTree,
    fair: FairShare,
    usage: Mapping[str, float],
    queue: str,
    allocated: Resources,
) -> SiblingKey:
    """Sort key among siblings, smaller first; `allocated` is the queue's whole subtree's."""
    return (*allocation_key(fair, queue, allocated), *standing_key(tree, usage, queue))


def allocation_key(fair: FairShare, queue: str, allocated: Resources) -> tuple[bool, float]:
    """The part of `sibling_key` that moves with every admission: owed, then saturation."""
    return not below_deserved(fair, queue, allocated), saturation(fair, queue, allocated)


def standing_key(tree: QueueTree, usage: Mapping[str, float],
                 queue: str) -> tuple[int, float, int, str]:
    """The part of `sibling_key` fixed for a whole cycle: priority, usage per weight,
    creation order, name."""
    spec = tree.queue(queue)
    weight = spec.knobs(GPU).over_quota_weight
    used = usage.get(queue, 0.0)
    usage_per_weight = used / weight if weight > 0 else (math.inf if used > 0 else 0.0)
    return -spec.priority, usage_per_weight, spec.order, queue


def ordered_leaves(
    tree: QueueTree,
    fair: FairShare,
    usage: Mapping[str, float],
    allocated: Mapping[str, Resources],
) -> list[str]:
    """Every leaf queue in offer order: siblings sorted by `sibling_key` at each level.

    `allocated` is per leaf queue (what its admitted workloads hold); parents are compared on
    the sum over their subtree. The caller skips leaves with nothing pending.
    """
    subtree = _subtree_allocation(tree, allocated)

    def visit(siblings: tuple[str, ...]) -> list[str]:
        ranked = sorted(
            siblings, key=lambda name: sibling_key(tree, fair, usage, name, subtree[name])
        )
        leaves: list[str] = []
        for name in ranked:
            children = tree.children(name)
            leaves.extend(visit(children) if children else [name])
        return leaves

    return visit(tree.roots)


def workload_key(workload: Workload) -> tuple[int, float, str]:
    """Order inside a leaf queue: higher priority, then earlier submission, then key."""
    return (-workload.priority, workload.submitted_at, workload.key)


def _subtree_allocation(
    tree: QueueTree, allocated: Mapping[str, Resources]
) -> dict[str, dict[str, int]]:
    resources = {resource for held in allocated.values() for resource in held}
    totals: dict[str, dict[str, int]] = {name: {} for name in tree}
    for resource in resources:
        per_queue = tree.roll_up(
            {name: held.get(resource, 0) for name, held in allocated.items()}, 0
        )
        for name, amount in per_queue.items():
            totals[name][resource] = amount
    return totals
