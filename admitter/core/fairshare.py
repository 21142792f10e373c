"""Hierarchical fair share: how much of each resource every queue should hold right now.

Per resource, top down: the roots divide the schedulable capacity, every parent's fair share is
what its children divide. At each level, with requestable = min(demand, limit):

1. Deserved: min(quota, requestable) (quota -1 = the whole amount being divided), granted
   even when the quotas add up to more than there is. Priority plays no part.
2. Over-quota: the rest goes to the highest priority bucket first; a lower bucket only sees
   what the higher one cannot use. Inside a bucket, in rounds, each queue with weight > 0 that
   wants more is offered a portion in proportion to its share weight
   max(0, nW + k·(nW − usage)); a queue wanting no more than its portion takes what it wants,
   the others take the floor of their portion. Rounds repeat while some queue took less than
   its portion, since only then is there something new to divide.
3. Remainder: the units lost to flooring in the last round go one each to the queues of the
   bucket with the largest fractional part of that round's portion, ties to the queue created
   first, then to the smaller name. Queues that were satisfied have no fraction.

Arithmetic is exact: share weights are floats (weights, usage and k are), but each round turns
them into integers over a common power-of-two denominator, so portions, floors and fractions
are integer arithmetic. The result is therefore independent of the order queues are given in,
and memory in bytes is divided without rounding error. Nothing loops per unit of a resource:
the remainder step hands out fewer units than the bucket has queues.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby

from admitter.core.model import UNLIMITED, PlainRecord
from admitter.core.queue_tree import QueueTree


class ResourceShare(PlainRecord):
    """One queue's division of one resource.

    `deserved` is step 1's grant, min(quota, requestable): what the queue is owed whatever
    its siblings do. `fair_share` adds its over-quota part. Both are capped by `requestable`.
    A plain class, read-only by convention: every cycle makes one per queue and resource, and
    a named tuple's constructor runs interpreted (docs/admission-cycle.md, Speed).
    """

    __slots__ = ("deserved", "fair_share", "requestable")

    def __init__(self, fair_share: int, deserved: int, requestable: int) -> None:
        self.fair_share = fair_share
        self.deserved = deserved
        self.requestable = requestable

    def _fields(self) -> tuple[object, ...]:
        return self.fair_share, self.deserved, self.requestable


_NOTHING = ResourceShare(0, 0, 0)
_NO_DEMAND: dict[str, int] = {}


@dataclass(frozen=True, slots=True)
class FairShare:
    """Every queue's `ResourceShare` per resource; unknown pairs read as all zero."""

    shares: dict[str, dict[str, ResourceShare]]
    resources: tuple[str, ...]

    def of(self, queue: str, resource: str) -> ResourceShare:
        return self.shares.get(queue, {}).get(resource, _NOTHING)

    def share(self, queue: str, resource: str) -> int:
        return self.of(queue, resource).fair_share

    def deserved(self, queue: str, resource: str) -> int:
        return self.of(queue, resource).deserved

    def requestable(self, queue: str, resource: str) -> int:
        return self.of(queue, resource).requestable


class _Claim:
    """One queue's working state while one resource is divided among its siblings."""

    __slots__ = ("deserved", "fair", "quota", "requestable", "usage", "weight")

    def __init__(self, quota: int, weight: float, usage: float, requestable: int) -> None:
        self.quota = quota
        self.weight = weight
        self.usage = usage
        self.requestable = requestable
        self.deserved = 0
        self.fair = 0


def compute_fair_share(
    tree: QueueTree,
    capacity: dict[str, int],
    demand: dict[str, dict[str, int]],
    usage: dict[str, float],
    k_value: float,
) -> FairShare:
    """Divide `capacity` (schedulable nodes) over the tree.

    `demand` is per leaf queue: the summed requests of its pending and admitted funded
    workloads. `usage` is normalised per queue (see `usage.normalised_usage`) and serves every
    resource; it only shapes over-quota shares, and `k_value` 0 ignores it.
    """
    leaves = _leaves(tree)
    for queue in demand:
        if queue not in leaves:
            tree.validate_leaf(queue)  # raises, naming the queue
    resources = tuple(sorted(set(capacity).union(*demand.values())))
    groups = _layout(tree)
    shares: dict[str, dict[str, ResourceShare]] = {name: {} for name in tree}
    for resource in resources:
        claims = _claims(_knobs(tree, resource), resource, demand, usage)
        for parent, buckets in groups:
            amount = capacity.get(resource, 0) if parent is None else claims[parent].fair
            _divide(amount, [[claims[name] for name in bucket] for bucket in buckets], k_value)
        for name, claim in claims.items():
            shares[name][resource] = ResourceShare(claim.fair, claim.deserved, claim.requestable)
    return FairShare(shares, resources)


@lru_cache(maxsize=8)
def _layout(tree: QueueTree) -> list[tuple[str | None, list[list[str]]]]:
    """The priority buckets of every sibling group: fixed for a tree, which a caller running
    cycle after cycle keeps (as for `_leaves` and `_knobs`)."""
    return [
        (parent, _priority_buckets(tree, children)) for parent, children in tree.sibling_groups()
    ]


@lru_cache(maxsize=8)
def _leaves(tree: QueueTree) -> frozenset[str]:
    return frozenset(tree.leaves())


_Knobs = tuple[str, str | None, int, float, int]


@lru_cache(maxsize=32)
def _knobs(tree: QueueTree, resource: str) -> list[_Knobs]:
    """Children before parents: name, parent, quota, over-quota weight and limit of `resource`."""
    knobs = []
    for name in reversed(tuple(tree)):
        queue = tree.queue(name)
        quota = queue.knobs(resource)
        knobs.append((name, queue.parent, quota.quota, quota.over_quota_weight, quota.limit))
    return knobs


def _claims(
    knobs: Sequence[_Knobs],
    resource: str,
    demand: dict[str, dict[str, int]],
    usage: dict[str, float],
) -> dict[str, _Claim]:
    """Claims for every queue (`knobs`: children before parents), requestable first.

    A parent's demand is what its children can request (their demand already capped by their
    limits), so a parent is never handed capacity that no child below it could use.
    """
    claims: dict[str, _Claim] = {}
    below: dict[str, int] = {}
    for name, parent, quota, weight, limit in knobs:
        wanted = below.pop(name, None)
        if wanted is None:
            wanted = demand.get(name, _NO_DEMAND).get(resource, 0)
        requestable = wanted if limit == UNLIMITED else min(wanted, limit)
        claims[name] = _Claim(quota, weight, usage.get(name, 0.0), requestable)
        if parent is not None:
            below[parent] = below.get(parent, 0) + requestable
    return claims


def _priority_buckets(tree: QueueTree, siblings: Sequence[str]) -> list[list[str]]:
    """Siblings grouped by priority, highest first, creation order kept inside each group."""
    by_priority = sorted(siblings, key=lambda name: -tree.queue(name).priority)
    return [
        list(bucket) for _, bucket in groupby(by_priority, key=lambda n: tree.queue(n).priority)
    ]


def _divide(amount: int, buckets: Sequence[list[_Claim]], k_value: float) -> None:
    """Split `amount` among siblings given as priority buckets: deserved, then over-quota."""
    remaining = amount
    for bucket in buckets:
        for claim in bucket:
            quota = amount if claim.quota == UNLIMITED else claim.quota
            claim.deserved = claim.fair = max(0, min(quota, claim.requestable))
            remaining -= claim.fair
    for bucket in buckets:
        if remaining <= 0:
            return
        remaining = _share_bucket(remaining, bucket, k_value)


def _share_bucket(remaining: int, bucket: list[_Claim], k_value: float) -> int:
    """Over-quota rounds and remainder for one priority bucket; returns what it could not use."""
    wanting = [claim for claim in bucket if claim.weight > 0 and claim.fair < claim.requestable]
    fractions: list[int] = []
    while remaining > 0 and wanting:
        weights = _share_weights(wanting, k_value)
        total = sum(weights)
        offered = remaining
        still_wanting: list[_Claim] = []
        fractions = []
        took_less = False
        for claim, weight in zip(wanting, weights, strict=True):
            units, fraction = divmod(offered * weight, total)
            want = claim.requestable - claim.fair
            if want <= units:
                claim.fair += want
                remaining -= want
                took_less = took_less or want < units or fraction > 0
            else:
                claim.fair += units
                remaining -= units
                still_wanting.append(claim)
                fractions.append(fraction)
        wanting = still_wanting
        if not took_less:
            break
    # a stable sort: equal fractions keep creation order (then name), the documented tie-break
    ranked = sorted(zip(fractions, wanting, strict=True), key=lambda item: -item[0])
    for fraction, claim in ranked:
        if remaining <= 0 or fraction == 0:
            break
        claim.fair += 1
        remaining -= 1
    return remaining


def _share_weights(wanting: Sequence[_Claim], k_value: float) -> list[int]:
    """KAI's share weights, exactly, as integers proportional to them.

    nW + k·(nW − usage) is scaled by Σ weight to w·(1 + k) − k·usage·Σw, which avoids a
    division and is exactly w when k is 0. If usage clips every weight to 0 (possible only at
    the roots, when recorded usage exceeds the cluster's current GPU-time), plain weights
    decide: usage may reorder who gets surplus, never leave it undivided.
    """
    total_weight = math.fsum(claim.weight for claim in wanting)
    weights = [
        max(0.0, claim.weight * (1 + k_value) - k_value * claim.usage * total_weight)
        for claim in wanting
    ]
    if not any(weights):
        weights = [claim.weight for claim in wanting]
    ratios = [weight.as_integer_ratio() for weight in weights]
    scale = max(denominator for _, denominator in ratios)
    return [numerator * (scale // denominator) for numerator, denominator in ratios]
