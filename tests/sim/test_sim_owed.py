"""Owed GPU-hours as Ai2 means them, computed by hand: the run's schedulable GPU-time
water-filled down the queue tree by over-quota weight (Ai2's budgets), each team capped by the
funded work it submitted that could run (the definition the scenario family's own scorer uses,
kept outside the repository)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from admitter.core.model import GPU, PodSet, Queue, ResourceQuota, Workload
from admitter.core.queue_tree import QueueTree
from admitter.sim.owed import owed_gpu_seconds, runnable_gpu_seconds, water_fill
from admitter.sim.workloads import Instance

from builders.scenario import simulate

HOUR = 3600.0


def test_water_fill_gives_what_a_capped_name_cannot_take_to_the_others():
    # 10 by weight 1 : 1 : 2 is 2.5 : 2.5 : 5; a wants only 2, and its 0.5 goes to b and c
    # 1 : 2, so b gets 8/3 and c 16/3.
    got = water_fill(10.0, {"a": 2.0, "b": 100.0, "c": 100.0}, {"a": 1, "b": 1, "c": 2})
    assert got == pytest.approx({"a": 2.0, "b": 8 / 3, "c": 16 / 3})


def test_water_fill_caps_in_cascade_and_keeps_what_nobody_wants():
    # 12 by equal weights is 4 each: a (1) and b (3) are capped, c takes the 8 left.
    assert water_fill(12.0, {"a": 1.0, "b": 3.0, "c": 100.0}, dict.fromkeys("abc", 1.0)) == {
        "a": 1.0, "b": 3.0, "c": 8.0}
    # Everybody capped: the other 93 are owed to nobody.
    assert water_fill(100.0, {"a": 3.0, "b": 4.0}, {"a": 1.0, "b": 1.0}) == {"a": 3.0, "b": 4.0}


def test_water_fill_gives_nothing_without_weight_or_demand():
    assert water_fill(8.0, {"a": 5.0, "b": 5.0, "c": 0.0}, {"a": 0.0, "b": 1.0, "c": 1.0}) == {
        "a": 0.0, "b": 5.0, "c": 0.0}


@given(st.floats(0, 1000), st.dictionaries(st.sampled_from("abcdef"), st.tuples(
    st.floats(0, 500), st.sampled_from([0.0, 0.5, 1.0, 2.0, 7.0])), min_size=1))
def test_water_fill_is_a_level_that_only_caps_break(amount: float,
                                                    wants: dict[str, tuple[float, float]]) -> None:
    """Nobody above its cap; all of `amount` given while someone with weight wants more; and
    every name below its cap at the same level per unit of weight, none capped above it."""
    caps = {name: cap for name, (cap, _) in wants.items()}
    weights = {name: weight for name, (_, weight) in wants.items()}
    got = water_fill(amount, caps, weights)
    assert all(0 <= got[name] <= caps[name] * (1 + 1e-9) for name in caps)
    wanted = sum(cap for name, cap in caps.items() if weights[name] > 0)
    assert sum(got.values()) == pytest.approx(min(amount, wanted), abs=1e-6)
    levels = {got[n] / weights[n] for n in caps if weights[n] > 0 and got[n] < caps[n] - 1e-9}
    assert max(levels, default=0) - min(levels, default=0) <= 1e-6
    assert all(caps[n] / weights[n] <= min(levels) + 1e-6 for n in caps
               if weights[n] > 0 and levels and got[n] >= caps[n] - 1e-9)


def _queue(name: str, parent: str | None = None, quota: int = 0, weight: float = 1.0,
           order: int = 0) -> Queue:
    return Queue(name, parent, resources={GPU: ResourceQuota(quota=quota,
                                                             over_quota_weight=weight)},
                 order=order)


def test_owed_descends_the_tree_level_by_level():
    """Programs p (weight 3) and q (weight 1) divide 400 GPU-hours: 300 : 100, but q's team
    submitted 40, so p is owed 360; p's teams (equal weights) 180 each, but p1 submitted 30,
    so p2 is owed 330."""
    tree = QueueTree([_queue("p", weight=3.0), _queue("q", order=1),
                      _queue("p1", "p", order=2), _queue("p2", "p", order=3),
                      _queue("q1", "q", order=4)])
    runnable = {"p1": 30 * HOUR, "p2": 1000 * HOUR, "q1": 40 * HOUR}
    owed = owed_gpu_seconds(tree, 400 * HOUR, runnable)
    assert {leaf: seconds / HOUR for leaf, seconds in owed.items()} == pytest.approx(
        {"p1": 30.0, "p2": 330.0, "q1": 40.0})


def test_owed_divides_by_weight_not_by_quota():
    """Quota 24 and 8 with weights 1 and 3: Ai2's budget is the weight, so the 64 GPU-hours
    are owed 16 : 48 (score.py's reading; the quotas play no part)."""
    tree = QueueTree([_queue("big", quota=24), _queue("small", quota=8, weight=3.0, order=1)])
    owed = owed_gpu_seconds(tree, 64 * HOUR, {"big": 100 * HOUR, "small": 100 * HOUR})
    assert owed == pytest.approx({"big": 16 * HOUR, "small": 48 * HOUR})


def _instance(key: str, queue: str, gpus: int, submit: float, duration: float,
              min_runtime: float = HOUR) -> Instance:
    workload = Workload(key, queue, (PodSet("main", 2, {GPU: gpus // 2}),), submit,
                        min_runtime=min_runtime)
    return Instance(key, 0, "training", duration, workload)


def test_runnable_work_is_funded_work_that_fits_before_the_end():
    instances = [
        _instance("whole", "t", 8, 0.0, 2 * HOUR),  # 16 GPU-h
        _instance("clipped", "t", 8, 9 * HOUR, 5 * HOUR),  # 1 h of it fits: 8 GPU-h
        _instance("too-late", "t", 8, 11 * HOUR, HOUR),
        _instance("free", "t", 8, 0.0, 2 * HOUR, min_runtime=0.0),  # unfunded: owed nothing
    ]
    assert runnable_gpu_seconds(instances, 10 * HOUR) == {"t": 24 * HOUR}


BY_BUDGET = """
horizon: 10h
settings: {fairShare: {window: 0}}
cluster:
  nodeGroups: [{count: 4, namePrefix: n-, capacity: {nvidia.com/gpu: 8}}]
events:
  - {at: 2h, cordon: n-3}
  - {at: 4h, uncordon: n-3}
queues:
  - {name: prog-a, resources: {nvidia.com/gpu: {quota: 0, overQuotaWeight: 3}}}
  - {name: prog-b, resources: {nvidia.com/gpu: {quota: 0, overQuotaWeight: 1}}}
  - {name: a1, parent: prog-a, resources: {nvidia.com/gpu: {quota: 0}}}
  - {name: a2, parent: prog-a, resources: {nvidia.com/gpu: {quota: 0}}}
  - {name: b1, parent: prog-b, resources: {nvidia.com/gpu: {quota: 0}}}
workloads:
  - {name: small, queue: a1, podRequests: {nvidia.com/gpu: 8}, duration: 2h, minRuntime: 1h}
  - {name: train, queue: a2, count: 10, podRequests: {nvidia.com/gpu: 8}, duration: 10h,
     minRuntime: 1h, resumable: true}
  - {name: late, queue: b1, submit: 5h, podRequests: {nvidia.com/gpu: 8}, duration: 20h,
     minRuntime: 1h}
  - {name: free, queue: b1, podRequests: {nvidia.com/gpu: 8}, duration: 10h}
"""


def test_the_reports_owed_is_the_runs_schedulable_time_water_filled_by_weight():
    """Schedulable: 32 GPUs × 10 h less n-3's 8 GPUs cordoned for 2 h, 304 GPU-h. Runnable:
    a1 16 GPU-h, a2 800, b1 8 GPUs × the 5 h left after its submission, 40 (its unfunded job
    counts for nothing). Programs 3 : 1 would be 228 : 76, but prog-b wants only 40, so prog-a
    is owed 264; a1 and a2 would have 132 each, but a1 wants only 16, so a2 is owed 248."""
    result = simulate(BY_BUDGET)
    queues = result["queues"]
    assert {name: q["owed_gpu_hours"] for name, q in queues.items()} == {
        "a1": 16.0, "a2": 248.0, "b1": 40.0}
    summary = result["summary"]
    assert summary["owed_gpu_hours"] == 304.0
    capped = sum(min(q["delivered_gpu_hours"], q["owed_gpu_hours"]) for q in queues.values())
    assert summary["owed_delivered_ratio"] == pytest.approx(capped / 304.0, abs=1e-6)
