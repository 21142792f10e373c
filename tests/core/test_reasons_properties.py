"""Properties of the reasons over random clusters: explaining a wait never changes a decision,
a cycle asked for no reasons decides as one asked for them, and the time a ProtectedVictims
reason promises is kept."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from unittest.mock import patch

from hypothesis import event, given
from hypothesis import strategies as st
from test_cycle_properties import PROPERTY, crowded_worlds, worlds

from admitter.core.cycle import run_cycle
from admitter.core.decisions import PendingReason
from admitter.core.model import Phase
from admitter.core.preemption import RoomFinder
from admitter.core.room import Blocked

from builders.core import RACK, job, queue, racks
from builders.world import World, decisions


@st.composite
def contested_worlds(draw: st.DrawFn) -> World:
    """Team a borrowed the cluster at 10 s with work protected for 10 to 30 minutes; team b,
    with the larger quota, submits at 15 s (`World.later`): work of its own that preempts by
    priority, and gangs that must stay in a rack."""
    world = World(racks(draw(st.integers(1, 3)), draw(st.integers(1, 3))),
                  [queue("org", -1), queue("a", draw(st.integers(0, 8)), parent="org", order=1),
                   queue("b", draw(st.integers(8, 32)), parent="org", order=2)])
    for i in range(draw(st.integers(1, 8))):
        world.submit(job(f"a{i}", "a", gpus=draw(st.sampled_from([2, 4, 8])),
                         min_runtime=float(draw(st.sampled_from([600, 1200, 1800]))),
                         priority=draw(st.sampled_from([0, 100]))))
    world.cycle(10.0)
    for i in range(draw(st.integers(1, 4))):
        world.submit(job(f"b{i}", "b", gpus=draw(st.sampled_from([2, 4, 8])),
                         pods=draw(st.integers(1, 3)), at=15.0,
                         min_runtime=float(draw(st.sampled_from([600, 1200]))),
                         priority=draw(st.sampled_from([0, 10])),
                         required=draw(st.sampled_from([None, RACK]))))
    return world


def _unexplained(*_: object) -> Blocked:
    return Blocked((), None)


@PROPERTY
@given(st.one_of(worlds(), contested_worlds()))
def test_explaining_a_wait_changes_no_decision(world: World) -> None:
    """The proof behind ProtectedVictims is rolled back and uncounted: without it, every
    cycle admits, evicts, settles and names its next change the same."""
    for now in (10.0, 300.0, 700.0):
        snapshot = world.snapshot(now)
        with patch.object(RoomFinder, "_waited_for", _unexplained):
            unexplained = run_cycle(snapshot)
        result = world.cycle(now)
        assert (result.admissions, result.evictions, result.next_change, result.settled) == (
            unexplained.admissions, unexplained.evictions, unexplained.next_change,
            unexplained.settled)


@PROPERTY
@given(st.one_of(worlds(), contested_worlds(), crowded_worlds()))
def test_a_cycle_asked_for_no_reasons_decides_as_one_asked_for_them(world: World) -> None:
    """Without reasons (the simulator's way) the cycle skips the ProtectedVictims proof, the
    never-fits check, messages and naming failed placements: every admission, eviction, fair
    share, queue status, next change and settling is the same, in the same order, and no
    workload is told why it waits. Past the starvation bound (1,800 s) a drain decides too."""
    for now in (10.0, 300.0, 700.0, 2000.0):
        snapshot = world.snapshot(now)
        quiet = run_cycle(replace(snapshot, settings=replace(snapshot.settings, reasons=False)))
        told = world.cycle(now)
        assert decisions(quiet) == decisions(told)
        assert quiet.pending == ()
        # Each leaf queue's pending count is the number of its workloads told why they wait.
        parents = {q.parent for q in world.queues}
        told_per_leaf = Counter(p.queue for p in told.pending)
        assert {q.name: told.queues[q.name].pending for q in world.queues
                if q.name not in parents} == {q.name: told_per_leaf[q.name]
                                              for q in world.queues if q.name not in parents}
        for reason in {p.reason for p in told.pending}:
            event(f"told {reason}")


@PROPERTY
@given(contested_worlds())
def test_a_protected_victims_promise_is_kept_when_the_protection_ends(world: World) -> None:
    """A workload told it waits for protections ending at T starts at T, when nothing else
    changed and no other workload waits beside it. The promise is read from a cycle that
    admitted nothing: an admission later in a cycle can take the room a search proved earlier
    in it, and the next cycle's search says so."""
    world.cycle(20.0)
    quiet = world.cycle(30.0)
    if quiet.admissions or quiet.evictions:
        return
    for waiting in quiet.pending:
        if waiting.reason is not PendingReason.PROTECTED_VICTIMS:
            continue
        assert waiting.retry_at is not None and waiting.blockers
        event("a promise to keep")
        alone = World(world.nodes, world.queues, settings=world.settings)
        alone.submit(*(w for w in world.workloads.values()
                       if w.phase is Phase.ADMITTED or w.key == waiting.key))
        later = alone.cycle(waiting.retry_at)
        assert waiting.key in [a.key for a in later.admissions], (waiting, later)
