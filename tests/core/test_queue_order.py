"""Offer order: siblings by deserved, DRF saturation, priority, usage, creation; then workloads."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest
from fairshare_builders import CPU, divide, knobs, queue, tree

from admitter.core.fairshare import FairShare, ResourceShare
from admitter.core.model import GPU, PodSet, Queue, Workload
from admitter.core.queue_order import (
    below_deserved,
    ordered_leaves,
    saturation,
    sibling_key,
    workload_key,
)


def gpu_fair(shares: Mapping[str, int], deserved: Mapping[str, int] | None = None) -> FairShare:
    """A division fixed by hand, so ordering is tested apart from how shares are computed."""
    per_queue = {
        name: {GPU: ResourceShare(share, (deserved or {}).get(name, 0), share)}
        for name, share in shares.items()
    }
    return FairShare(per_queue, (GPU,))


def test_below_deserved_goes_first_even_when_more_saturated() -> None:
    queues = tree(queue("idle"), queue("owed"))
    # owed holds 3 of its 4 deserved GPUs; idle holds nothing but is owed nothing
    fair = gpu_fair({"idle": 2, "owed": 6}, deserved={"owed": 4})
    assert below_deserved(fair, "owed", {GPU: 3})
    assert not below_deserved(fair, "idle", {})
    assert ordered_leaves(queues, fair, {}, {"owed": {GPU: 3}}) == ["owed", "idle"]


def test_below_deserved_on_any_one_resource_counts() -> None:
    queues = tree(queue("q", gpu=knobs(0), cpu=knobs(1_000)))
    fair = divide(queues, {GPU: 4, CPU: 4_000}, {"q": {GPU: 4, CPU: 4_000}})
    assert below_deserved(fair, "q", {GPU: 4, CPU: 500})
    assert not below_deserved(fair, "q", {GPU: 4, CPU: 1_000})


def test_drf_the_dominant_resource_decides() -> None:
    queues = tree(
        queue("gpu-heavy", gpu=knobs(0), cpu=knobs(0)),
        queue("cpu-heavy", gpu=knobs(0), cpu=knobs(0)),
    )
    # fair share: 4 GPUs and 50,000 millicores each
    allocated = {"gpu-heavy": {GPU: 3, CPU: 5_000}, "cpu-heavy": {GPU: 1, CPU: 45_000}}
    demand = {name: {GPU: 8, CPU: 100_000} for name in queues}
    fair = divide(queues, {GPU: 8, CPU: 100_000}, demand)
    assert saturation(fair, "gpu-heavy", allocated["gpu-heavy"]) == pytest.approx(0.75)
    assert saturation(fair, "cpu-heavy", allocated["cpu-heavy"]) == pytest.approx(0.9)
    assert ordered_leaves(queues, fair, {}, allocated) == ["gpu-heavy", "cpu-heavy"]


def test_holding_a_resource_with_zero_fair_share_is_last() -> None:
    queues = tree(queue("hoarder"), queue("busy"), queue("light"))
    fair = gpu_fair({"hoarder": 0, "busy": 4, "light": 4})
    allocated = {"hoarder": {GPU: 1}, "busy": {GPU: 4}, "light": {GPU: 1}}
    assert saturation(fair, "hoarder", allocated["hoarder"]) == math.inf
    assert saturation(fair, "idle", {GPU: 0}) == 0.0
    assert ordered_leaves(queues, fair, {}, allocated) == ["light", "busy", "hoarder"]


@pytest.mark.parametrize(
    ("queues", "usage", "expected"),
    [
        pytest.param(
            [queue("low", priority=1), queue("high", priority=2)],
            {},
            ["high", "low"],
            id="higher priority first",
        ),
        pytest.param(
            [queue("heavy", gpu=knobs(0, weight=1)), queue("light", gpu=knobs(0, weight=2))],
            {"heavy": 0.3, "light": 0.4},
            ["light", "heavy"],
            id="lower usage per weight first",
        ),
        pytest.param(
            [queue("unweighted", gpu=knobs(0, weight=0)), queue("weighted", gpu=knobs(0))],
            {"unweighted": 0.1, "weighted": 0.9},
            ["weighted", "unweighted"],
            id="usage with zero weight is infinitely heavy",
        ),
        pytest.param(
            [queue("busy", priority=2), queue("quiet", priority=1)],
            {"busy": 0.9, "quiet": 0.0},
            ["busy", "quiet"],
            id="priority before usage",
        ),
        pytest.param(
            [queue("b"), queue("a"), queue("c")],
            {},
            ["b", "a", "c"],
            id="creation order",
        ),
    ],
)
def test_tie_breaks_at_equal_saturation(
    queues: list[Queue], usage: dict[str, float], expected: list[str]
) -> None:
    t = tree(*queues)
    fair = gpu_fair({name: 4 for name in t})
    assert ordered_leaves(t, fair, usage, {name: {GPU: 2} for name in t}) == expected


def test_levels_are_ordered_on_subtree_allocation() -> None:
    t = tree(
        queue("a"),
        queue("b"),
        queue("a1", "a"),
        queue("a2", "a"),
        queue("b1", "b"),
        queue("b2", "b"),
    )
    fair = gpu_fair({"a": 4, "b": 4, "a1": 2, "a2": 2, "b1": 2, "b2": 2})
    # a's subtree holds 5 of its 4 GPUs, b's 2 of 4: all of b comes first, then each level
    # on its own (b2 holds nothing, a1 is at half its share)
    allocated = {"a1": {GPU: 1}, "a2": {GPU: 4}, "b1": {GPU: 2}}
    assert ordered_leaves(t, fair, {}, allocated) == ["b2", "b1", "a1", "a2"]


def test_sibling_key_is_usable_directly() -> None:
    t = tree(queue("q", gpu=knobs(2), priority=3))
    fair: FairShare = divide(t, {GPU: 4}, {"q": {GPU: 4}})
    assert sibling_key(t, fair, {"q": 0.5}, "q", {GPU: 1}) == (False, 0.25, -3, 0.5, 0, "q")


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
