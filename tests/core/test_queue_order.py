"""Offer order: siblings by use / GPU budget (level by level), then priority, usage per weight,
creation order; inside a queue, workloads by priority and submission."""

from __future__ import annotations

import math

import pytest

from admitter.core.model import GPU, PodSet, Queue, Workload
from admitter.core.queue_order import workload_key
from admitter.core.queue_tree import QueueTree
from admitter.core.quota import Allocations, QuotaLedger
from admitter.core.ranking import Ranking, gpu_budgets
from admitter.core.selection import QueueSelector

from builders.core import CPU, knobs, queue, tree
from builders.fairshare import divide


def _running(key: str, queue_name: str, gpus: int) -> Workload:
    return Workload(key, queue_name, (PodSet("main", 1, {GPU: gpus}),), 0.0, min_runtime=60.0)


def offer_order(t: QueueTree, gpus: int, held: dict[str, int],
                used: dict[str, float] | None = None,
                usage: dict[str, float] | None = None) -> list[str]:
    """Leaves in the order a cycle offers them capacity, each served once: `held` funded GPUs
    per leaf, `used` windowed GPU-seconds per queue (None: use is what is held)."""
    allocations = Allocations(t, [_running(f"{leaf}-run", leaf, n) for leaf, n in held.items()])
    ledger = QuotaLedger(t, divide(t, {GPU: gpus}, {}), allocations)
    ranking = Ranking(t, gpu_budgets(t, gpus), None if used is None else t.roll_up(used, 0.0),
                      ledger.funded)
    selector = QueueSelector(t, ranking, usage or {}, ledger, t.leaves())
    order = []
    while (leaf := selector.best()) is not None:
        order.append(leaf)
        selector.retire(leaf)
    return order


def test_gpu_budgets_quota_first_then_weights_down_the_tree() -> None:
    t = tree(queue("a", 8, weight=1), queue("b", weight=3),
             queue("a1", parent="a", weight=1), queue("a2", 2, parent="a", weight=3))
    budgets = gpu_budgets(t, 24)  # a: 8 + 16 × 1/4 = 12, b: 12; a1: 10 × 1/4, a2: 2 + 10 × 3/4
    assert budgets == {"a": 12.0, "b": 12.0, "a1": 2.5, "a2": 9.5}


def test_cpu_knobs_do_not_make_a_budget() -> None:
    t = tree(queue("gpu"), queue("cpu-only", weight=0, cpu=knobs(64_000)))
    assert gpu_budgets(t, 16) == {"gpu": 16.0, "cpu-only": 0.0}
    assert CPU not in gpu_budgets(t, 16)


def test_lower_use_per_budget_first_even_with_more_gpus_held() -> None:
    t = tree(queue("small", weight=1), queue("big", weight=3))
    # budgets 4 and 12; big used 2.4 × as much over the window but per budget 0.8 × as much
    used = {"small": 10.0, "big": 24.0}
    assert offer_order(t, 16, {"small": 1, "big": 10}, used) == ["big", "small"]


def test_use_counted_as_held_without_a_window() -> None:
    t = tree(queue("a"), queue("b"))
    assert offer_order(t, 8, {"a": 3, "b": 1}) == ["b", "a"]


def test_queue_without_a_budget_is_offered_last() -> None:
    t = tree(queue("unfunded", weight=0), queue("funded"))
    assert offer_order(t, 8, {"funded": 8}) == ["funded", "unfunded"]
    assert math.isinf(Ranking(t, gpu_budgets(t, 8), None,
                              {"unfunded": {GPU: 1}, "funded": {}}).ratio("unfunded"))


def test_levels_are_ordered_on_their_subtree_use() -> None:
    t = tree(queue("a"), queue("b"), queue("a1", parent="a"), queue("a2", parent="a"),
             queue("b1", parent="b"), queue("b2", parent="b"))
    # a's subtree used 5, b's 2: all of b comes first, then each level on its own
    used = {"a1": 1.0, "a2": 4.0, "b1": 2.0}
    assert offer_order(t, 8, {}, used) == ["b2", "b1", "a1", "a2"]


@pytest.mark.parametrize(
    ("queues", "usage", "expected"),
    [
        pytest.param([queue("low", priority=1), queue("high", priority=2)], {},
                     ["high", "low"], id="higher priority first"),
        pytest.param([queue("heavy", weight=1), queue("light", weight=2)],
                     {"heavy": 0.3, "light": 0.4}, ["light", "heavy"],
                     id="lower usage per weight first"),
        pytest.param([queue("unweighted", weight=0), queue("weighted")],
                     {"unweighted": 0.1, "weighted": 0.9}, ["weighted", "unweighted"],
                     id="usage with zero weight is infinitely heavy"),
        pytest.param([queue("busy", priority=2), queue("quiet", priority=1)],
                     {"busy": 0.9, "quiet": 0.0}, ["busy", "quiet"], id="priority before usage"),
        pytest.param([queue("b"), queue("a"), queue("c")], {}, ["b", "a", "c"],
                     id="creation order"),
    ],
)
def test_tie_breaks_at_equal_use(
    queues: list[Queue], usage: dict[str, float], expected: list[str]
) -> None:
    t = tree(*queues)
    held = {name: 2 for name in t}
    assert offer_order(t, 32, held, dict.fromkeys(t, 1.0), usage) == expected


def test_workloads_by_priority_then_submission() -> None:
    def workload(key: str, priority: int, submitted_at: float) -> Workload:
        pods = (PodSet("main", 1, {GPU: 1}),)
        return Workload(key, "q", pods, submitted_at=submitted_at, priority=priority)

    workloads = [
        workload("late-low", 0, 20.0),
        workload("early-low", 0, 10.0),
        workload("high", 5, 30.0),
        workload("same-time", 0, 10.0),
    ]
    ordered = [w.key for w in sorted(workloads, key=workload_key)]
    assert ordered == ["high", "early-low", "same-time", "late-low"]
