"""Invariants of the admission cycle over random clusters, queue trees and workloads."""

from __future__ import annotations

import math
import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from admitter.core.cycle import run_cycle
from admitter.core.decisions import CycleSettings, Eviction
from admitter.core.model import GPU, UNLIMITED, FairShareSettings, Node, Phase
from admitter.core.nodes import ClusterState
from admitter.core.placement import Placement, place
from admitter.core.topology import HOSTNAME

from builders.core import BLOCK, RACK, job, queue, racks, running_on
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


FILLS = [(8,), (8,), (8,), (8,), (4,), (4, 2), (6,), (7,)]
"""What a node runs besides the idle one: mostly full, so that the few idle GPUs are often
the room's."""


@st.composite
def room_worlds(draw: st.DrawFn) -> World:
    """64 GPUs (4 racks of two 8-GPU nodes) partly full of protected work (10 h, so nothing
    can be requeued in the cycle and what a waiting job fits afterwards is what it could have
    had), short jobs that held `short_gpus` on average (none, less than a GPU, a few, many),
    and long and short funded jobs waiting in queues without quota (no guarantee) or limit. The
    starvation bound is never reached: the short jobs' room is the only reserve."""
    nodes = [f"b0-r{r}-n{n}" for r in range(4) for n in range(2)]
    world = World(racks(4), [queue("run"), queue("a", order=1), queue("b", order=2)],
                  settings=CycleSettings(starvation_bound=100 * 3600.0))
    world.short_gpus = draw(st.sampled_from([0.0, 0.3, 1.5, 4.0, 11.0]))
    idle = draw(st.integers(0, 7))  # one node stands idle (or none: 8)
    free = []
    for n, node in enumerate(nodes):
        fill = () if n == idle else draw(st.sampled_from(FILLS))
        free.append(8 - sum(fill))
        for slot, gpus in enumerate(fill):
            world.submit(running_on(f"run-{n}-{slot}", "run", node, gpus=gpus,
                                    min_runtime=36000.0))
    if any(free):  # a long job the size of one node's idle GPUs: the room's closest call
        world.submit(job("exact", "a", gpus=draw(st.sampled_from([f for f in free if f]))))
    for i in range(draw(st.integers(0, 3))):
        gpus, pods = draw(st.sampled_from([1, 2, 4, 8])), draw(st.integers(1, 2))
        short = pods == 1 and gpus <= 4 and draw(st.booleans())
        world.submit(job(f"w{i}", draw(st.sampled_from(["a", "b"])), gpus=gpus, pods=pods,
                         at=float(i), min_runtime=300.0 if short else 3600.0))
    return world


def _room_oracle(world: World, state: ClusterState, key: str, placement: Placement) -> str:
    """Why the short jobs' room may hold idle GPUs that `key` fits at `placement`, computed
    apart from the cycle (docs/admission-cycle.md, Short jobs and their headroom), or what is
    wrong with it."""
    policy = world.settings.short_jobs
    gpus = state.schedulable_capacity()[GPU]
    floor = math.floor(policy.least_room_fraction * gpus)
    used = math.ceil(world.short_gpus - 1e-9)
    needed = max(used, floor)
    backed = used if used > floor else min(floor, math.floor(world.short_gpus + 1e-9))
    need = world.workloads[key].requests()[GPU]
    pool = state.free_total(GPU)
    short = min(need, max(0, needed - (pool - need)))
    node_room = min(policy.max_gpus, needed)
    taken: dict[str, int] = {}
    for pod_set, counts in zip(world.workloads[key].pod_sets, placement.node_counts,
                               strict=True):
        for node, count in counts.items():
            taken[node] = taken.get(node, 0) + pod_set.requests[GPU] * count
    lone = node_room > 0 and not any(
        state.free_of(name, GPU) - taken.get(name, 0) >= node_room for name in state.names)
    kept = max(short, node_room if lone else 0)
    if kept == 0:
        return "nothing of the room is at stake"
    if (short and pool - need < backed) or (lone and backed > 0):
        return ""  # room GPUs that short-job demand backs
    if any(state.free_of(name, GPU) == 8 for name in taken):
        return "a room no demand backs keeps a node where nothing runs idle"
    return "" if need - kept <= kept else f"it keeps {kept} GPUs and idles {need - kept}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(room_worlds())
def test_no_waiting_job_fits_idle_gpus_unless_a_reserve_demand_backs_holds_them(
        world: World) -> None:
    """After a cycle, a waiting funded job that fits the idle GPUs is held off them only by
    the short jobs' room, named in its reason, and only where that room is worth what it
    idles: GPUs short-job demand backs, or a floor no demand backs that the job would take at
    least as much of as it would use beyond it, on nodes already partly in use."""
    result = world.cycle(100.0)
    admitted = [w for w in world.workloads.values() if w.phase is Phase.ADMITTED]
    state = ClusterState(world.nodes, world.topology, admitted)
    for waiting in result.pending:
        placement = place(state, world.workloads[waiting.key])
        if not isinstance(placement, Placement):
            continue
        assert any(room in waiting.message for room in (
            "kept for short jobs", "short pod's room")), (waiting.key, waiting.message)
        wrong = _room_oracle(world, state, waiting.key, placement)
        assert not wrong, (waiting.key, waiting.message, wrong)
