"""The incremental core decides exactly what the from-scratch cycle decides.

Random clusters, queue trees and workloads go through random event sequences (cycles whose
decisions are carried out, arrivals, finishes, requeues, cordons, queue edits, pods turning not
ready, time passing with usage or the short jobs' GPUs moving, or with nothing changing, where a
settled answer may stand, `standstill`), told to `IncrementalCore` as events; after each, its
cycle must equal `run_cycle` on the equivalent snapshot, field by field (admissions, evictions,
every pending reason and position, fair share, queue statuses, `next_change`, `settled`).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from admitter.core.cycle import run_cycle
from admitter.core.decisions import CycleResult, CycleSettings
from admitter.core.incremental import IncrementalCore
from admitter.core.model import GPU, UNLIMITED, FairShareSettings, Node, Phase, PodSet, Workload
from admitter.core.topology import HOSTNAME

from builders.core import BLOCK, RACK, gang, job, knobs, queue, racks, running_on, workload
from builders.world import World, decisions

EQUIVALENCE = settings(max_examples=80, deadline=None,
                       suppress_health_check=[HealthCheck.too_slow])
WINDOWED = CycleSettings(fair_share=FairShareSettings(window=86400.0), starvation_bound=600.0,
                         pods_ready_timeout=300.0)


@st.composite
def _workload(draw: st.DrawFn, key: str, queues: int, at: float) -> Workload:
    leaf = f"q{draw(st.integers(0, queues - 1))}" if draw(st.integers(0, 9)) else "org"
    min_runtime = float(draw(st.sampled_from([0, 0, 300, 900, 3600])))
    max_runtime = draw(st.sampled_from([None, None, None, min_runtime + 600.0]))
    if draw(st.booleans()):
        return replace(job(key, leaf, gpus=draw(st.integers(1, 8)), pods=draw(st.integers(1, 3)),
                   at=at, min_runtime=min_runtime, priority=draw(st.sampled_from([0, 10, 100])),
                   resumable=draw(st.booleans()),
                   required=draw(st.sampled_from([None, RACK, HOSTNAME])),
                   preferred=draw(st.sampled_from([None, RACK]))), max_runtime=max_runtime)
    # Explicit pod sets, one naming a resource with amount 0 that no node has: fair share
    # divides it all the same, while a funded workload names it.
    return workload(key, gang(1, draw(st.integers(1, 4)), name="launcher"),
                    PodSet("workers", draw(st.integers(1, 2)), {GPU: 2, "example.com/nic": 0}),
                    queue=leaf, at=at, min_runtime=min_runtime)


def _queues(draw: st.DrawFn, count: int) -> list:
    leaves = []
    for i in range(count):
        quota = draw(st.integers(0, 16))
        leaves.append(queue(f"q{i}", quota, parent="org", order=i + 1,
                            limit=draw(st.sampled_from([UNLIMITED, quota + 8])),
                            weight=draw(st.sampled_from([0.0, 1.0, 2.0])),
                            cpu=knobs(draw(st.integers(0, 4)))))
    return [queue("org", -1), *leaves]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[World, list[tuple[str, int]]]:
    """A world and the events to run through it: (kind, a drawn number)."""
    nodes = []
    for r in range(draw(st.integers(1, 3))):
        for n in range(draw(st.integers(1, 3))):
            name = f"r{r}-n{n}"
            nodes.append(Node(name, {GPU: draw(st.sampled_from([4, 8])), "cpu": 64},
                              {BLOCK: "b0", RACK: f"r{r}", HOSTNAME: name}))
    count = draw(st.integers(1, 3))
    world = World(nodes, _queues(draw, count), settings=WINDOWED,
                  short_gpus=float(draw(st.integers(0, 3))))
    for i in range(draw(st.integers(0, 8))):
        world.submit(draw(_workload(f"w{i}", count, float(draw(st.integers(0, 5))))))
    kinds = st.sampled_from(["cycle", "cycle", "cycle", "submit", "finish", "requeue",
                             "cordon", "queues", "usage", "short", "unready", "wait", "wait"])
    events = draw(st.lists(st.tuples(kinds, st.integers(0, 1_000)), min_size=1, max_size=12))
    return world, events


def _same(incremental: CycleResult, reference: CycleResult) -> None:
    assert incremental == reference
    assert [p.message for p in incremental.pending] == [p.message for p in reference.pending]
    assert [a.message for a in incremental.admissions] == [
        a.message for a in reference.admissions]


def _apply(core: IncrementalCore, world: World, result: CycleResult) -> None:
    for key in [e.key for e in result.evictions] + [a.key for a in result.admissions]:
        if key in world.workloads:
            core.put(world.workloads[key])
        else:  # stopped for good at its maximum run time
            core.remove(key)


@EQUIVALENCE
@pytest.mark.parametrize("reasons", [True, False])
@given(scenarios(), st.data())
def test_event_sequences_decide_as_the_from_scratch_cycle(reasons, case, data) -> None:
    """Without reasons (`CycleSettings.reasons`, the simulator's way), the kept core decides
    as the reference that gives them."""
    world, events = case
    core = IncrementalCore(world.nodes, world.topology, world.queues,
                           replace(world.settings, reasons=reasons), world.workloads.values())
    now, submitted = 10.0, len(world.workloads)
    for kind, number in events:
        now += 60.0 * (1 + number % 20)
        if kind == "submit":
            added = data.draw(_workload(f"w{submitted}", len(world.queues) - 1, now))
            submitted += 1
            world.submit(added)
            core.put(added)
        elif kind == "finish" and world.running():
            key = world.running()[number % len(world.running())]
            world.finish(key)
            core.remove(key)
        elif kind == "requeue" and world.running():
            key = world.running()[number % len(world.running())]
            world.workloads[key] = replace(world.workloads[key], phase=Phase.PENDING,
                                           admitted_at=None, placement={},
                                           pod_set_placements=(), eligible_at=now + 120.0)
            core.put(world.workloads[key])
        elif kind == "cordon":
            name = world.nodes[number % len(world.nodes)].name
            world.nodes = [replace(n, unschedulable=not n.unschedulable) if n.name == name
                           else n for n in world.nodes]
            core.set_nodes(world.nodes)
        elif kind == "queues":
            edited = world.queues[1 + number % (len(world.queues) - 1)]
            world.queues = [replace(q, priority=number % 3) if q is edited else q
                            for q in world.queues]
            core.set_queues(world.queues)
        elif kind == "usage":
            world.usage = {f"q{number % (len(world.queues) - 1)}": 3600.0 * (number % 40)}
        elif kind == "short":
            world.short_gpus = float(number % 4)
        elif kind == "unready" and world.running():
            key = world.running()[number % len(world.running())]
            world.workloads[key] = replace(world.workloads[key], pods_ready=False)
            core.put(world.workloads[key])
        incremental = core.cycle(now, world.usage, world.short_gpus)
        reference = run_cycle(world.snapshot(now))
        if reasons:
            _same(incremental, reference)
        else:
            assert decisions(incremental) == decisions(reference)
            assert incremental.pending == ()
        if kind == "cycle":
            _apply(core, world, world.cycle(now))


@EQUIVALENCE
@given(scenarios())
def test_syncing_to_snapshots_decides_as_the_from_scratch_cycle(case) -> None:
    """The controller's way: a snapshot each pass, workloads and nodes kept when unchanged,
    queues translated anew every pass (equal, not identical) and edited now and then."""
    world, events = case
    core = IncrementalCore((), (), (), world.settings)
    for step, (kind, number) in enumerate([*events, ("cycle", 0)]):
        now = 100.0 + 700.0 * step
        world.queues = [replace(q, priority=number % 3) if kind == "queues" and q.parent
                        else replace(q) for q in world.queues]
        snapshot = world.snapshot(now)
        _same(core.decide(snapshot), run_cycle(snapshot))
        world.cycle(now)
        if kind == "finish" and world.running():
            world.finish(world.running()[number % len(world.running())])
        if kind == "cordon":
            world.cordon(world.nodes[number % len(world.nodes)].name)


def test_a_cycle_hands_the_kept_models_back_unchanged() -> None:
    nodes = [Node(f"n{i}", {GPU: 8}, {BLOCK: "b0", RACK: "r0", HOSTNAME: f"n{i}"})
             for i in range(2)]
    world = World(nodes, [queue("q", 8)]).submit(job("a", "q"), job("b", "q"), job("c", "q"))
    core = IncrementalCore(world.nodes, world.topology, world.queues, world.settings,
                           world.workloads.values())
    before = {name: core.node_model.free(name) for name in core.node_model.names}
    result = core.cycle(0.0)
    assert [a.key for a in result.admissions] == ["a", "b"]
    assert {name: core.node_model.free(name) for name in core.node_model.names} == before
    assert core.allocations.count() == 0


def test_a_workload_put_twice_is_counted_once() -> None:
    nodes = [Node("n0", {GPU: 8}, {BLOCK: "b0", RACK: "r0", HOSTNAME: "n0"})]
    world = World(nodes, [queue("q", 8)]).submit(job("a", "q", gpus=4))
    core = IncrementalCore(world.nodes, world.topology, world.queues, world.settings)
    core.put(world.workloads["a"])
    core.put(replace(world.workloads["a"], priority=5))
    result = core.cycle(0.0)
    assert [a.key for a in result.admissions] == ["a"]
    assert result.fair_share.of("q", GPU).requestable == 4
    core.remove("a")
    core.remove("a")
    assert core.cycle(1.0).admissions == ()


@pytest.mark.parametrize("phase", [Phase.PENDING, Phase.ADMITTED])
def test_a_workload_of_a_queue_that_is_not_a_leaf_is_kept_apart(phase) -> None:
    nodes = [Node("n0", {GPU: 8}, {BLOCK: "b0", RACK: "r0", HOSTNAME: "n0"})]
    queues = [queue("org", -1), queue("q", 8, parent="org")]
    stray = job("stray", "org", gpus=4)
    if phase is Phase.ADMITTED:
        stray = stray.admitted(0.0, ({"n0": 1},))
    core = IncrementalCore(nodes, (BLOCK, RACK, HOSTNAME), queues, WINDOWED, [stray])
    snapshot = core.snapshot(10.0)
    _same(core.cycle(10.0), run_cycle(snapshot))
    core.put(job("late", "q", gpus=8, at=5.0))
    _same(core.cycle(20.0), run_cycle(core.snapshot(20.0)))


# A settled answer stands only while nothing it depends on changed (`standstill`) -------------

TRIGGERS = ["none", "none", "submit", "finish", "requeue", "cordon", "uncordon", "quota",
            "limit", "usage", "short", "unready", "priority"]
"""One event after a settled cycle; "none" lets only time pass."""


def _settle(core: IncrementalCore, world: World, now: float) -> None:
    """Cycles, each checked against the reference and carried out, until one decides
    nothing (or a few have run: a cycle may keep finding room by searches it was short of)."""
    for _ in range(6):
        _same(core.cycle(now, world.usage, world.short_gpus), run_cycle(world.snapshot(now)))
        result = world.cycle(now)
        _apply(core, world, result)
        if not result.admissions and not result.evictions:
            return
        now += 10.0


def _trigger(core: IncrementalCore, world: World, kind: str, number: int, now: float,
             data: st.DataObject) -> None:
    """Tell both the world and the kept core of one event of `kind`."""
    pending = sorted(k for k, w in world.workloads.items() if w.phase is Phase.PENDING)
    leaves = [q for q in world.queues if q.parent is not None]
    if kind == "submit":
        added = data.draw(_workload("late", len(leaves), now))
        world.submit(added)
        core.put(added)
    elif kind in ("finish", "requeue", "unready") and world.running():
        key = world.running()[number % len(world.running())]
        if kind == "finish":
            world.finish(key)
            core.remove(key)
            return
        was = world.workloads[key]
        world.workloads[key] = (replace(was, pods_ready=False) if kind == "unready" else replace(
            was, phase=Phase.PENDING, admitted_at=None, placement={}, pod_set_placements=()))
        core.put(world.workloads[key])
    elif kind in ("cordon", "uncordon"):
        name = world.nodes[number % len(world.nodes)].name
        world.nodes = [replace(n, unschedulable=kind == "cordon") if n.name == name else n
                       for n in world.nodes]
        core.set_nodes(world.nodes)
    elif kind in ("quota", "limit"):
        edited = leaves[number % len(leaves)]
        was = edited.resources[GPU]
        amount = number % 24
        changed = replace(was, quota=amount) if kind == "quota" else replace(
            was, limit=max(amount, was.quota))
        world.queues = [replace(q, resources={**q.resources, GPU: changed}) if q is edited
                        else q for q in world.queues]
        core.set_queues(world.queues)
    elif kind == "usage":
        world.usage = {**world.usage, leaves[number % len(leaves)].name: 600.0 * (number % 50)}
    elif kind == "short":
        world.short_gpus = float(number % 5)
    elif kind == "priority" and pending:
        key = pending[number % len(pending)]
        world.workloads[key] = replace(world.workloads[key], priority=number % 200)
        core.put(world.workloads[key])


@EQUIVALENCE
@given(scenarios(), st.sampled_from(TRIGGERS), st.integers(0, 1_000),
       st.lists(st.sampled_from([0.0, 1.0, 60.0, 299.0, 300.0, 600.0, 901.0, 3600.0]),
                min_size=1, max_size=3), st.data())
def test_one_event_after_a_settled_cycle_decides_as_the_from_scratch_cycle(
        case, kind, number, waits, data) -> None:
    """A kept core that settled, then one event (or none) and time passing by steps that land
    on and past protections, backoffs and starvation bounds: every later cycle, whether its
    answer stands or is tried again, is the reference's."""
    world, _ = case
    core = IncrementalCore(world.nodes, world.topology, world.queues, world.settings,
                           world.workloads.values())
    now = 100.0
    _settle(core, world, now)
    now += 20.0
    _trigger(core, world, kind, number, now, data)
    for wait in waits:
        now += wait
        _same(core.cycle(now, world.usage, world.short_gpus), run_cycle(world.snapshot(now)))


def _protected_victim() -> tuple[World, IncrementalCore]:
    """Team a (no quota) runs 8-GPU jobs on a node of each rack, protected until 600 (rack r1)
    and 1,200 (rack r0); team b's non-preemptible job keeps rack r1's other node. Team c waits
    with a gang of 2 × 8 GPUs in one rack: it may start once a's job on r0 may leave."""
    world = World(racks(2), [queue("a", 0), queue("b", 8), queue("c", 16)]).submit(
        running_on("a-r1", "a", "b0-r1-n0", min_runtime=600.0),
        running_on("a-r0", "a", "b0-r0-n0", min_runtime=1200.0),
        running_on("b-0", "b", "b0-r1-n1", gpus=4, priority=100),
        job("gang", "c", pods=2, at=50.0, required=RACK))
    core = IncrementalCore(world.nodes, world.topology, world.queues, world.settings,
                           world.workloads.values())
    return world, core


def test_an_answer_stands_while_nothing_changed_and_names_its_moments_from_now() -> None:
    world, core = _protected_victim()
    first = core.cycle(100.0)
    _same(first, run_cycle(world.snapshot(100.0)))
    [waits] = first.pending
    assert (waits.reason, waits.retry_at) == ("ProtectedVictims", 1200.0)
    assert "(in 18m20s)" in waits.message
    later = core.cycle(300.0)
    _same(later, run_cycle(world.snapshot(300.0)))
    assert later.fair_share is first.fair_share  # not tried again
    assert "(in 15m)" in later.pending[0].message
    core.put(world.workloads["gang"])  # the same object: nothing changed
    core.put(replace(world.workloads["a-r0"]))  # an equal one (a new version, same values)
    assert core.cycle(301.0).fair_share is first.fair_share


def test_a_protection_ending_is_tried_again_at_that_moment() -> None:
    world, core = _protected_victim()
    core.cycle(100.0)
    core.cycle(1199.0)
    ended = core.cycle(1200.0)
    _same(ended, run_cycle(world.snapshot(1200.0)))
    assert [e.key for e in ended.evictions] == ["a-r0"]


@pytest.mark.parametrize("change", ["finish", "usage", "short"])
def test_any_change_is_tried_again(change) -> None:
    world, core = _protected_victim()
    first = core.cycle(100.0)
    if change == "finish":
        world.finish("a-r1")
        core.remove("a-r1")
    elif change == "usage":
        world.usage = {"a": 3600.0}
    else:
        world.short_gpus = 2.0
    again = core.cycle(200.0, world.usage, world.short_gpus)
    _same(again, run_cycle(world.snapshot(200.0)))
    assert again.fair_share is not first.fair_share
