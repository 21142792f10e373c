"""Properties of compute_fair_share over random trees, quotas, limits, weights and usage."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.core.fairshare import FairShare, compute_fair_share
from admitter.core.model import GPU, UNLIMITED, Queue, ResourceQuota
from admitter.core.queue_tree import QueueTree

from builders.core import GIB, MEMORY, knobs

RESOURCES = (GPU, MEMORY)
SCALE = {GPU: 1, MEMORY: GIB + 7}  # memory in odd byte counts, far too many to loop over
PROPERTY_SETTINGS = settings(max_examples=120, deadline=None)


@dataclass(frozen=True)
class Problem:
    queues: list[Queue]
    capacity: dict[str, int]
    demand: dict[str, dict[str, int]]
    usage: dict[str, float]
    k: float

    def solve(self, **changes: object) -> FairShare:
        problem = replace(self, **changes)
        return compute_fair_share(
            QueueTree(problem.queues), problem.capacity, problem.demand, problem.usage, problem.k
        )


@st.composite
def resource_knobs(draw: st.DrawFn, resource: str) -> ResourceQuota:
    scale = SCALE[resource]
    # mostly small quotas and no limit, so that siblings compete for a surplus
    quota = draw(st.sampled_from([0, 0, 0, 0, 1, 2, 3, UNLIMITED]))
    limit = draw(st.sampled_from([UNLIMITED, UNLIMITED, UNLIMITED, 0, 4, 8]))
    return knobs(
        quota=quota if quota == UNLIMITED else quota * scale,
        weight=draw(st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, 3.0])),
        limit=limit if limit == UNLIMITED else limit * scale,
    )


@st.composite
def problems(draw: st.DrawFn, flat: bool = False) -> Problem:
    """Up to 10 queues; `flat`: 2 to 6 roots, one group where every knob interacts."""
    count = draw(st.integers(2, 6) if flat else st.integers(1, 10))
    queues: list[Queue] = []
    for i in range(count):
        # parents among the first three queues: few only children, groups that compete
        parent = None if flat else draw(st.sampled_from([None, *range(min(i, 3))]))
        resources = {r: draw(resource_knobs(r)) for r in RESOURCES}
        queues.append(
            Queue(
                name=f"q{i}",
                parent=None if parent is None else f"q{parent}",
                priority=draw(st.sampled_from([0, 0, 1, 2])),
                resources=resources,
                order=draw(st.integers(0, 3)),
            )
        )
    leaves = QueueTree(queues).leaves()
    demand = {
        leaf: {r: draw(st.integers(1, 12)) * SCALE[r] + draw(st.integers(0, 3)) for r in RESOURCES}
        for leaf in leaves
    }
    # a quarter to all of what is demanded, sometimes more: contention is where rules matter
    wanted = {r: sum(d[r] for d in demand.values()) for r in RESOURCES}
    capacity = {r: draw(st.integers(wanted[r] // 4, wanted[r] + SCALE[r])) for r in RESOURCES}
    usage = {q.name: draw(st.floats(0.0, 1.0)) for q in queues}
    k = draw(st.sampled_from([0.0, 0.5, 1.0, 2.0]))
    return Problem(queues, capacity, demand, usage, k)


def groups(problem: Problem) -> list[tuple[str | None, tuple[str, ...]]]:
    return list(QueueTree(problem.queues).sibling_groups())


@PROPERTY_SETTINGS
@given(problems())
def test_shares_stay_within_bounds_and_leave_nothing_usable_idle(problem: Problem) -> None:
    result = problem.solve()
    by_name = {q.name: q for q in problem.queues}
    for resource in RESOURCES:
        for parent, children in groups(problem):
            amount = (
                problem.capacity[resource] if parent is None else result.share(parent, resource)
            )
            shares = [result.of(child, resource) for child in children]
            for child, share in zip(children, shares, strict=True):
                limit = by_name[child].knobs(resource).limit
                assert 0 <= share.deserved <= share.fair_share <= share.requestable
                assert limit == UNLIMITED or share.requestable <= limit
            total = sum(share.fair_share for share in shares)
            deserved = sum(share.deserved for share in shares)
            # over the parent only through deserved quota, and then not a unit beyond it
            assert total <= max(amount, deserved)
            still_wanting = any(
                share.fair_share < share.requestable
                and by_name[child].knobs(resource).over_quota_weight > 0
                for child, share in zip(children, shares, strict=True)
            )
            if deserved <= amount and still_wanting:
                assert total == amount


@PROPERTY_SETTINGS
@given(problems(), st.randoms(use_true_random=False))
def test_input_order_does_not_matter(problem: Problem, shuffler: random.Random) -> None:
    queues = list(problem.queues)
    demand = list(problem.demand.items())
    shuffler.shuffle(queues)
    shuffler.shuffle(demand)
    reordered = problem.solve(queues=queues, demand=dict(demand))
    assert reordered.shares == problem.solve().shares


@PROPERTY_SETTINGS
@given(problems(), st.dictionaries(st.sampled_from([f"q{i}" for i in range(10)]), st.floats(0, 1)))
def test_without_k_usage_plays_no_part(problem: Problem, other_usage: Mapping[str, float]) -> None:
    assert problem.solve(k=0.0).shares == problem.solve(k=0.0, usage=dict(other_usage)).shares


@PROPERTY_SETTINGS
@given(problems(flat=True), st.data())
def test_more_weight_never_costs_more_than_one_unit(problem: Problem, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(problem.queues) - 1))
    chosen = problem.queues[index]
    gpu = chosen.knobs(GPU)
    heavier_gpu = replace(
        gpu,
        over_quota_weight=gpu.over_quota_weight
        + data.draw(st.sampled_from([0.5, 1.0, 5.0, 100.0])),
    )
    heavier = replace(chosen, resources={**chosen.resources, GPU: heavier_gpu})
    queues = [heavier if q is chosen else q for q in problem.queues]
    before = problem.solve().share(chosen.name, GPU)
    after = problem.solve(queues=queues).share(chosen.name, GPU)
    assert after >= before - 1
