"""Who may be evicted (`eviction`): the rule case by case, and the two readers of it agreeing:
the victim search's candidate lists, decided per kind and subtree, and the check each victim of
a simulated plan passes."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from test_cycle_properties import PROPERTY

from admitter.core.cycle_state import CycleState, scan
from admitter.core.decisions import CycleSettings, Snapshot
from admitter.core.eviction import (
    EVER_EVICTABLE,
    FUNDED,
    RESUMABLE,
    SHORT,
    SPREAD,
    UNFUNDED_KIND,
    Standing,
    kind_of,
    may_evict,
    swappable,
)
from admitter.core.model import (
    GPU,
    FairShareSettings,
    Node,
    Phase,
    PodSet,
    Workload,
    held_per_node,
)
from admitter.core.nodes import ClusterState
from admitter.core.policy import ShortJobs
from admitter.core.queue_tree import QueueTree
from admitter.core.quota import Allocations
from admitter.core.reservation import drain_alike, drainable_gpus, unfunded_gpus
from admitter.core.room import Search
from admitter.core.topology import HOSTNAME

from builders.core import BLOCK, RACK, job, queue, racks, running_on
from builders.world import World

RANKED, DRAIN = Search.RANKED, Search.DRAIN
LONG = FUNDED | EVER_EVICTABLE | RESUMABLE
"""Long resumable funded work on one node, preemptible: swappable."""
LONG_LOST = FUNDED | EVER_EVICTABLE
"""Long non-resumable funded work."""
SHORT_JOB = FUNDED | EVER_EVICTABLE | SHORT | RESUMABLE
ALL_STANDINGS = (Standing.NONE, Standing.OUTRANKED, Standing.OTHER_QUEUE, Standing.WORSE,
                 Standing.CLEARLY_WORSE, Standing.FAR_WORSE)


def test_unfunded_work_is_always_evictable_and_non_preemptible_work_never():
    for standing in ALL_STANDINGS:
        for search in (RANKED, DRAIN):
            assert may_evict(UNFUNDED_KIND, standing, False, search)
            assert not may_evict(LONG & ~EVER_EVICTABLE, standing, True, search)


def test_lower_priority_in_the_queue_takes_resumable_work_only():
    assert may_evict(LONG, Standing.OUTRANKED, False, RANKED)
    assert not may_evict(LONG_LOST, Standing.OUTRANKED, False, RANKED)
    assert not may_evict(LONG, Standing.NONE, False, RANKED)


def test_a_short_preemptor_takes_no_gang_spread_over_nodes_by_priority():
    assert not may_evict(LONG | SPREAD, Standing.OUTRANKED, True, RANKED)
    assert may_evict(LONG | SPREAD, Standing.OUTRANKED, False, RANKED)


def test_the_swap_margin_takes_swappable_work_and_the_larger_gap_the_rest():
    assert may_evict(LONG, Standing.CLEARLY_WORSE, False, RANKED)
    assert not may_evict(LONG_LOST, Standing.CLEARLY_WORSE, False, RANKED)
    assert not may_evict(SHORT_JOB, Standing.CLEARLY_WORSE, False, RANKED)
    for kind in (LONG, LONG_LOST, SHORT_JOB, LONG | SPREAD):
        assert may_evict(kind, Standing.FAR_WORSE, False, RANKED)


def test_a_short_preemptor_never_takes_long_non_resumable_work():
    assert not may_evict(LONG_LOST, Standing.FAR_WORSE, True, RANKED)
    assert may_evict(SHORT_JOB & ~RESUMABLE, Standing.FAR_WORSE, True, RANKED)


def test_a_short_preemptor_takes_swappable_work_on_one_node_from_any_other_allocation():
    assert may_evict(LONG, Standing.OTHER_QUEUE, True, RANKED)
    assert not may_evict(LONG | SPREAD, Standing.OTHER_QUEUE, True, RANKED)
    assert not may_evict(SHORT_JOB, Standing.OTHER_QUEUE, True, RANKED)
    assert not may_evict(LONG, Standing.OTHER_QUEUE, False, RANKED)


def test_no_one_takes_work_of_their_own_queue_without_a_lower_priority():
    for kind in (LONG, LONG_LOST, SHORT_JOB, LONG | SPREAD):
        for short in (False, True):
            for search in (RANKED, DRAIN):
                assert not may_evict(kind, Standing.NONE, short, search)


def test_a_short_job_leaves_its_own_queues_work_of_equal_priority_running():
    """Through the cycle: the node is full of its queue's resumable work past its min runtime,
    of the same priority; another allocation's the short job would take."""
    for owner, evicted in (("q", ()), ("other", ("long",))):
        world = World(racks(1, nodes_per_rack=1), [queue("q", 8), queue("other", order=1)])
        world.submit(running_on("long", owner, "b0-r0-n0", min_runtime=60.0))
        world.submit(job("debug", "q", gpus=2, min_runtime=600.0, at=100.0))
        result = world.cycle(1000.0)
        assert tuple(e.key for e in result.evictions) == evicted


def test_a_drain_takes_resumable_or_short_work_of_any_worse_standing():
    for standing in (Standing.OUTRANKED, Standing.WORSE):
        assert may_evict(LONG, standing, False, DRAIN)
        assert may_evict(SHORT_JOB & ~RESUMABLE, standing, False, DRAIN)
        assert not may_evict(LONG_LOST, standing, False, DRAIN)
    assert not may_evict(LONG, Standing.OTHER_QUEUE, False, DRAIN)


def test_swappable_is_long_resumable_funded_work():
    short = ShortJobs()
    assert swappable(kind_of(job("long", "q"), short, None))
    assert not swappable(kind_of(job("lost", "q", resumable=False), short, None))
    assert not swappable(kind_of(job("debug", "q", gpus=2, min_runtime=600.0), short, None))
    unfunded = job("unfunded", "q", min_runtime=0.0)
    assert kind_of(unfunded, short, None) == UNFUNDED_KIND and not swappable(UNFUNDED_KIND)
    assert not kind_of(job("vip", "q", priority=100), short, 100) & EVER_EVICTABLE


# ---- The search's candidates and each victim's check read the one rule ---------------------

LEAVES = ("a1", "a2", "b1", "b2")
NODES = [Node(f"n{i}", {GPU: 64}, {BLOCK: "b0", RACK: f"r{i % 2}", HOSTNAME: f"n{i}"})
         for i in range(4)]
NOW = 10_000.0


@st.composite
def running_work(draw: st.DrawFn) -> tuple[list[Workload], dict[str, float]]:
    """Running work of every kind in three leaves under two parents, and windowed use."""
    running = []
    for i in range(draw(st.integers(1, 10))):
        spread = draw(st.booleans())
        gpus = draw(st.sampled_from([1, 4, 8]))
        nodes = ["n0", "n1"] if spread else [draw(st.sampled_from(["n0", "n1", "n2", "n3"]))]
        running.append(Workload(
            f"r{i}", draw(st.sampled_from(LEAVES)), (PodSet("main", len(nodes), {GPU: gpus}),),
            0.0, draw(st.sampled_from([0, 10, 100])),
            min_runtime=draw(st.sampled_from([0.0, 600.0, 7200.0, 2 * NOW])),
            resumable=draw(st.booleans()), phase=Phase.ADMITTED,
            admitted_at=draw(st.sampled_from([0.0, NOW - 300.0])),
            placement={node: 1 for node in nodes},
            pod_set_placements=({node: 1 for node in nodes},)))
    # GPU-hours on either side of the swap margin and of the non-resumable gap
    hours = st.sampled_from([0.0, 1.0, 1.04, 1.2, 30.0])
    usage = {leaf: draw(hours) * 3600.0 for leaf in LEAVES}
    return running, usage


def _cycle_state(running: list[Workload], usage: dict[str, float], window: float,
                 pending: list[Workload]) -> CycleState:
    queues = [queue("a", 8), queue("b", 8, order=1), queue("a1", 4, parent="a", order=2),
              queue("a2", 4, parent="a", order=3), queue("b1", 4, parent="b", order=4),
              queue("b2", 4, parent="b", order=5)]
    settings = CycleSettings(fair_share=FairShareSettings(window=window),
                             non_preemptible_priority=100)
    snapshot = Snapshot(NOW, NODES, (BLOCK, RACK, HOSTNAME), queues, [*running, *pending],
                        usage, settings, 0.0)
    tree = QueueTree(snapshot.queues)
    inputs = scan(snapshot.workloads, tree.leaves())
    return CycleState(snapshot, tree, inputs,
                      ClusterState(snapshot.nodes, snapshot.topology, inputs.holding),
                      Allocations(tree, inputs.admitted))


def _candidates_and_victims(cycle: CycleState, preemptor: Workload
                            ) -> tuple[set[str], set[str]]:
    """The keys the search's candidate list holds, and those of the running work past its
    min runtime that the victim check lets go (the search's private parts, read on purpose:
    their agreement is what is tested)."""
    finder, rule = cycle.finder, cycle.eviction
    finder._rank()
    listed = {w.key for _, w in finder._eligible(finder._evictable, preemptor, None, RANKED)}
    allowed = {w.key for w in cycle.running.values()
               if (w.protected_until() or 0.0) <= NOW
               and rule.victim(preemptor, w, RANKED, drained=False) is not None}
    return listed, allowed


preemptors = st.builds(
    lambda q, gpus, pods, min_runtime, priority: job(
        "p", q, gpus=gpus, pods=pods, at=1.0, min_runtime=min_runtime, priority=priority),
    st.sampled_from(LEAVES), st.sampled_from([1, 4, 8]), st.integers(1, 2),
    st.sampled_from([0.0, 600.0, 7200.0]), st.sampled_from([0, 10, 50]))


@PROPERTY
@given(running_work(), preemptors)
def test_the_search_lists_exactly_whom_the_victim_check_lets_go(work, preemptor):
    """With use over a window the ranking is fixed for the cycle: the candidates decided per
    kind and subtree are exactly the workloads the per-victim check allows."""
    running, usage = work
    cycle = _cycle_state(running, usage, 7 * 86400.0, [preemptor])
    listed, allowed = _candidates_and_victims(cycle, preemptor)
    assert listed == allowed


@PROPERTY
@given(running_work(), preemptors)
def test_with_use_held_the_victim_check_is_at_most_stricter(work, preemptor):
    """With use counted as what is held, the check also refuses a swap the victim's side would
    swap back (`Ranking.clearly_worse`), which the lists do not ask: it lets go a subset."""
    running, usage = work
    cycle = _cycle_state(running, usage, 0.0, [preemptor])
    listed, allowed = _candidates_and_victims(cycle, preemptor)
    assert allowed <= listed


# ---- A drain's questions, asked once per kind of running work ------------------------------

@PROPERTY
@given(running_work(), preemptors, st.sampled_from([0.0, 7 * 86400.0]))
def test_a_drain_answers_alike_for_running_work_alike(work, gang, window):
    """What a drain takes and waits for reads of a funded running workload only what
    `reservation.drain_alike` keys: a twin in any leaf that compares alike with the gang's,
    on other nodes, started and submitted at other moments, gets the same answers, with use
    held and over a window."""
    running, usage = work
    cycle = _cycle_state(running, usage, window, [gang])
    rule = cycle.eviction
    takes, waits_for, alike = rule.drain_takes(gang), rule.drain_waits_for(gang), drain_alike(
        rule, gang)
    twins = 0
    for workload in running:
        if not workload.funded:
            continue
        nodes = ["n2", "n3"] if len(workload.placement) > 1 else ["n3"]
        for leaf in LEAVES:
            twin = replace(workload, key=f"{workload.key}-twin", queue=leaf, submitted_at=5.0,
                           admitted_at=NOW - 60.0, placement={node: 1 for node in nodes},
                           pod_set_placements=({node: 1 for node in nodes},))
            if alike(twin) != alike(workload):
                continue
            twins += leaf != workload.queue
            assert takes(twin) == takes(workload)
            assert waits_for(twin) == waits_for(workload)
    assert twins or all(w.queue[0] == gang.queue[0] or not w.funded for w in running)


@PROPERTY
@given(running_work(), preemptors, st.sampled_from([0.0, 7 * 86400.0]))
def test_a_drains_maps_are_its_questions_asked_of_each_running_workload(work, gang, window):
    """`drainable_gpus`, asking once per kind of running work, counts exactly the GPUs that
    asking every running workload afresh counts."""
    running, usage = work
    cycle = _cycle_state(running, usage, window, [gang])
    rule = cycle.eviction
    takes, waits_for = rule.drain_takes(gang), rule.drain_waits_for(gang)
    unfunded = unfunded_gpus(running)
    now_held, later_held = dict(unfunded), dict(unfunded)
    for workload in running:
        until = workload.protected_until()
        if until is None or not (takes(workload) or waits_for(workload)):
            continue
        for node, gpus in held_per_node(workload, GPU).items():
            later_held[node] = later_held.get(node, 0) + gpus
            if takes(workload) and until <= NOW:
                now_held[node] = now_held.get(node, 0) + gpus
    assert drainable_gpus(running, unfunded, NOW, takes, waits_for,
                          drain_alike(rule, gang)) == (
        now_held, later_held)
