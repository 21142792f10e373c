"""The over-served test (`Ranking.over_served`), which finds each sibling group's two best
wanting queues once, says what its definition says: some queue on the leaf's path ranks worse
than its best wanting sibling by more than the margin."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.core.model import GPU, PodSet, Workload
from admitter.core.policy import TimeSlicing
from admitter.core.queue_tree import QueueTree
from admitter.core.quota import Allocations
from admitter.core.ranking import Ranking, gpu_budgets

from builders.core import queue, tree

PARENTS = ("p0", "p1", "p2")
MARGIN = TimeSlicing().swap_margin

LEAVES = tuple(f"{parent}-{i}" for parent in PARENTS for i in range(4))


def _by_definition(t: QueueTree, ranking: Ranking, leaf: str, wanting: set[str]) -> bool:
    for name in t.path(leaf):
        parent = t.parent(name)
        siblings = t.children(parent) if parent is not None else t.roots
        best = min((ranking.ratio(s) for s in siblings if s != name and s in wanting),
                   default=math.inf)
        if ranking.ratio(name) > (1.0 + MARGIN) * best:
            return True
    return False


@settings(max_examples=200, deadline=None)
@given(quotas=st.lists(st.integers(0, 8), min_size=len(LEAVES), max_size=len(LEAVES)),
       held=st.lists(st.integers(0, 16), min_size=len(LEAVES), max_size=len(LEAVES)),
       used=st.none() | st.lists(st.sampled_from([0.0, 100.0, 105.0, 400.0]),
                                 min_size=len(LEAVES), max_size=len(LEAVES)),
       wanting=st.sets(st.sampled_from(LEAVES)))
def test_over_served_says_what_its_definition_says(quotas: list[int], held: list[int],
                                                   used: list[float] | None,
                                                   wanting: set[str]) -> None:
    t = tree(*[queue(p, weight=1 + i) for i, p in enumerate(PARENTS)],
             *[queue(leaf, quota, parent=leaf.split("-")[0])
               for leaf, quota in zip(LEAVES, quotas, strict=True)])
    running = [Workload(f"{leaf}-run", leaf, (PodSet("main", 1, {GPU: gpus}),), 0.0,
                        min_runtime=60.0)
               for leaf, gpus in zip(LEAVES, held, strict=True) if gpus]
    allocations = Allocations(t, running)
    window = None if used is None else t.roll_up(dict(zip(LEAVES, used, strict=True)), 0.0)
    ranking = Ranking(t, gpu_budgets(t, 64), window, allocations.funded)
    with_paths = {name for leaf in wanting for name in t.path(leaf)}  # as the drain builds it
    over_served = ranking.over_served(with_paths, MARGIN)
    for leaf in LEAVES:
        assert over_served(leaf) == _by_definition(t, ranking, leaf, with_paths), leaf


def test_sibling_ranks_put_the_lower_use_of_budget_first_at_every_level() -> None:
    t = tree(queue("p0"), queue("p1", weight=3), queue("a", 8, parent="p0"),
             queue("b", 8, parent="p0"), queue("c", 0, parent="p1"))
    allocations = Allocations(t, [])
    # p0's leaves used 900 and 100 GPU-seconds, p1's none; p1 budgets 3/4 of 64 GPUs
    used = t.roll_up({"a": 900.0, "b": 100.0}, 0.0)
    ranking = Ranking(t, gpu_budgets(t, 64), used, allocations.funded)
    assert ranking.budget("p1") == 48.0 and ranking.budget("a") == 8.0
    assert ranking.sibling_ranks() == {"p1": 1, "p0": 2, "b": 1, "a": 2, "c": 1}
