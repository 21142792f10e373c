"""Invariants of the admission cycle over random clusters, queue trees and workloads."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from admitter.core.cycle import run_cycle
from admitter.core.decisions import Eviction
from admitter.core.model import GPU, UNLIMITED, FairShareSettings, Node, Phase
from admitter.core.topology import HOSTNAME

from builders.core import BLOCK, RACK, job, queue
from builders.world import World

PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def worlds(draw: st.DrawFn) -> World:
    rack_count = draw(st.integers(1, 3))
    per_rack = draw(st.integers(1, 3))
    nodes = []
    for r in range(rack_count):
        for n in range(per_rack):
            name = f"r{r}-n{n}"
            gpus = draw(st.sampled_from([4, 8]))
            used = draw(st.integers(0, 2))
            nodes.append(Node(name, {GPU: gpus}, {BLOCK: "b0", RACK: f"r{r}", HOSTNAME: name},
                              used={GPU: used} if used else {}))
    queue_count = draw(st.integers(1, 3))
    queues = [queue("org", -1)]
    for i in range(queue_count):
        quota = draw(st.integers(0, 16))
        limit = draw(st.sampled_from([UNLIMITED, quota + 8, quota + 16]))
        queues.append(queue(f"q{i}", quota, parent="org", limit=limit, order=i + 1,
                            weight=draw(st.sampled_from([0.0, 1.0, 2.0]))))
    world = World(nodes, queues)
    for i in range(draw(st.integers(1, 10))):
        world.submit(job(
            f"w{i}", f"q{draw(st.integers(0, queue_count - 1))}",
            gpus=draw(st.integers(1, 8)), pods=draw(st.integers(1, 3)),
            at=float(draw(st.integers(0, 5))),
            min_runtime=float(draw(st.sampled_from([0, 60, 600]))),
            priority=draw(st.sampled_from([0, 10, 100])),
            required=draw(st.sampled_from([None, RACK, HOSTNAME])),
            preferred=draw(st.sampled_from([None, RACK])),
        ))
    return world


def _check_invariants(world: World) -> None:
    held: dict[str, int] = {}
    for workload in world.workloads.values():
        if workload.phase is not Phase.ADMITTED:
            continue
        pod_set = workload.pod_sets[0]
        placed = workload.pod_set_placements[0]
        assert sum(placed.values()) == pod_set.count, f"partial gang {workload.key}"
        for node, count in placed.items():
            held[node] = held.get(node, 0) + count * pod_set.requests[GPU]
        required = workload.topology.required
        if required is not None:
            labels = {n.labels[required] for n in world.nodes if n.name in placed}
            assert len(labels) == 1, f"{workload.key} spans {required} {labels}"
    for node in world.nodes:
        assert held.get(node.name, 0) <= node.allocatable[GPU] - node.used.get(GPU, 0)
    per_queue: dict[str, int] = {}
    for workload in world.workloads.values():
        if workload.phase is Phase.ADMITTED:
            per_queue[workload.queue] = per_queue.get(workload.queue, 0) + workload.requests()[GPU]
    for q in world.queues:
        limit = q.knobs(GPU).limit
        if limit != UNLIMITED:
            assert per_queue.get(q.name, 0) <= limit, f"queue {q.name} over its limit"


@PROPERTY
@given(worlds())
def test_no_overcommit_no_partial_gang_no_topology_violation(world: World) -> None:
    for now in (10.0, 100.0, 1000.0):
        world.cycle(now)
        _check_invariants(world)


@PROPERTY
@given(worlds(), st.integers(0, 3))
def test_no_eviction_inside_a_protected_min_runtime(world: World, finished: int) -> None:
    world.cycle(10.0)
    for key in world.running()[:finished]:
        world.finish(key)
    for now in (20.0, 300.0, 700.0):
        before = {k: w for k, w in world.workloads.items() if w.phase is Phase.ADMITTED}
        result = world.cycle(now)
        for eviction in result.evictions:
            victim = before[eviction.key]
            until = victim.protected_until()
            assert until is None or until <= now, f"{eviction.key} evicted while protected"
            assert not (victim.funded and victim.priority >= 100)


@PROPERTY
@given(worlds(), st.randoms(use_true_random=False))
def test_same_input_in_any_order_gives_the_same_decisions(world: World, rng: random.Random):
    world.cycle(10.0)
    snapshot = world.snapshot(20.0)
    shuffled = replace(
        snapshot,
        nodes=rng.sample(list(snapshot.nodes), len(snapshot.nodes)),
        queues=rng.sample(list(snapshot.queues), len(snapshot.queues)),
        workloads=rng.sample(list(snapshot.workloads), len(snapshot.workloads)),
    )
    assert run_cycle(snapshot) == run_cycle(shuffled)


@PROPERTY
@given(worlds())
def test_no_allocation_swaps_gpus_back_and_forth_without_a_change_in_demand(
        world: World) -> None:
    """With demand unchanged, every protection over and use counted as what is held, once one
    queue's workload has taken GPUs from another queue's, the other never takes GPUs back from
    the first (a queue may still regain idle capacity in between)."""
    _run_without_swapping_back(world)


@st.composite
def crowded_worlds(draw: st.DrawFn) -> World:
    """More queues with waiting work than a cycle has searches for (16), on a small cluster."""
    nodes = [Node(f"r0-n{n}", {GPU: 8}, {BLOCK: "b0", RACK: "r0", HOSTNAME: f"r0-n{n}"})
             for n in range(draw(st.integers(1, 3)))]
    queue_count = draw(st.integers(14, 22))
    queues = [queue("org", -1)] + [
        queue(f"q{i}", draw(st.integers(0, 4)), parent="org", order=i + 1)
        for i in range(queue_count)]
    world = World(nodes, queues)
    for i in range(draw(st.integers(queue_count, 2 * queue_count))):
        world.submit(job(
            f"w{i}", f"q{draw(st.integers(0, queue_count - 1))}",
            gpus=draw(st.sampled_from([1, 2, 4, 8])), at=float(draw(st.integers(0, 5))),
            min_runtime=float(draw(st.sampled_from([0, 600]))),
            priority=draw(st.sampled_from([0, 10]))))
    return world


@PROPERTY
@given(st.one_of(worlds(), crowded_worlds()), st.sampled_from([0.0, 900.0]))
def test_a_settled_cycle_run_again_decides_nothing_more(world: World, bound: float) -> None:
    world.settings = replace(world.settings, starvation_bound=bound)
    for now in (10.0, 700.0, 1400.0):
        result = world.cycle(now)
        if result.settled:
            again = world.cycle(now)
            assert again.admissions == () and again.evictions == (), (result, again)


@PROPERTY
@given(worlds(), st.lists(st.floats(0, 100), min_size=3, max_size=3))
def test_no_allocation_swaps_gpus_back_and_forth_without_a_change_in_use(
        world: World, used: list[float]) -> None:
    """With use over a window (fixed here: nobody's use moves) and demand unchanged, once one
    queue's workload has taken GPUs from another queue's, the other never takes GPUs back from
    the first, and no protection is ever cut."""
    world.settings = replace(world.settings, fair_share=FairShareSettings(window=7 * 86400))
    world.usage = {f"q{i}": gpus * 3600.0 for i, gpus in enumerate(used)}
    _run_without_swapping_back(world)


def _run_without_swapping_back(world: World) -> None:
    """Eight cycles 1000 s apart: no protection cut, and no pair of allocations swapping GPUs
    back (`_time_slicing`). Not necessarily settled: work of a clearly worse allocation may take
    idle GPUs again and yield them again (rank, don't cap), as long as the allocation it yields
    to never takes from it in turn."""
    took: set[tuple[str, str]] = set()
    now = 1000.0
    for _ in range(8):
        now += 1000.0
        before = {k: w for k, w in world.workloads.items() if w.phase is Phase.ADMITTED}
        for eviction in world.cycle(now).evictions:
            until = before[eviction.key].protected_until()
            assert until is None or until <= now
            if not _time_slicing(world, eviction):
                continue
            winner, loser = world.workloads[eviction.preemptor].queue, eviction.queue
            assert (loser, winner) not in took, f"{loser} and {winner} swapped GPUs back"
            took.add((winner, loser))


def _time_slicing(world: World, eviction: Eviction) -> bool:
    """Funded work of one allocation requeued for another's: unfunded work belongs to no
    allocation (any funded workload takes it), and a short job gives its GPUs back within
    minutes, so neither is a swap between allocations."""
    if eviction.preemptor is None:
        return False
    preemptor, victim = world.workloads[eviction.preemptor], world.workloads[eviction.key]
    return (preemptor.queue != victim.queue and victim.funded
            and not world.settings.short_jobs.is_short(preemptor))
