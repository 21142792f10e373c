"""The priority at which workloads stop being preemptible is a setting: Kueue's PriorityClass
values (1000, 10000) must not turn preemption off when the administrator says so."""

from __future__ import annotations

from dataclasses import replace

import pytest

from admitter.core.decisions import EvictionReason
from admitter.core.model import NON_PREEMPTIBLE_PRIORITY

from builders.core import job, queue, racks
from builders.world import NO_TIME_FAIRNESS, World, admitted, evicted


def _kueue_priorities(threshold: int | None) -> World:
    """Two running 8-GPU Jobs at priority 1000, past their min runtime, fill the queue; one at
    10000 arrives."""
    settings = replace(NO_TIME_FAIRNESS, non_preemptible_priority=threshold)
    world = World(racks(1), [queue("a", 16)], settings=settings)
    world.submit(job("low0", "a", at=0, priority=1000, min_runtime=60),
                 job("low1", "a", at=1, priority=1000, min_runtime=60))
    assert admitted(world.cycle(0)) == ["low0", "low1"]
    world.submit(job("high", "a", at=100, priority=10000))
    return world


def test_the_default_threshold_keeps_kueue_priorities_from_being_preempted() -> None:
    assert NON_PREEMPTIBLE_PRIORITY == 100
    result = _kueue_priorities(NON_PREEMPTIBLE_PRIORITY).cycle(120)
    assert result.evictions == () and admitted(result) == []


@pytest.mark.parametrize("threshold", [None, 100_000])
def test_a_raised_or_absent_threshold_lets_priority_preempt(threshold: int | None) -> None:
    result = _kueue_priorities(threshold).cycle(120)
    assert admitted(result) == ["high"]
    assert evicted(result) == {"low1": EvictionReason.PREEMPTED}


def test_the_threshold_is_inclusive() -> None:
    assert not job("x", "a", priority=100).preemptible(100)
    assert job("x", "a", priority=99).preemptible(100)
    assert job("x", "a", priority=10**9).preemptible(None)
