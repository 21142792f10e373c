"""The cycle's one operation log: whatever goes through it, a rollback restores the node model,
the allocations and the headroom's count exactly, nested marks included."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from admitter.core.headroom import Headroom
from admitter.core.model import GPU, Node, Phase, PodSet, Workload
from admitter.core.nodes import ClusterState
from admitter.core.placement import Placement, place
from admitter.core.policy import ShortJobs
from admitter.core.quota import Allocations
from admitter.core.statement import Statement
from admitter.core.topology import HOSTNAME

from builders.core import BLOCK, LEVELS, RACK, cluster, gang, node, queue, tree, workload

PROPERTY = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUEUES = tree(queue("org", -1), queue("a", 8, parent="org"), queue("b", 4, parent="org"))
PROBES = (workload("probe-1", gang(1, 4)), workload("probe-2", gang(2, 8), required=RACK),
          workload("probe-3", gang(1, 2), gang(3, 2, "workers"), required=BLOCK))
"""Placements asked before and after a rollback: a stale fit memo shows as a different answer."""


def statement_over(state: ClusterState, admitted: Sequence[Workload] = ()) -> Statement:
    return Statement(state, Allocations(QUEUES, admitted), Headroom(state, admitted, 0.0, None,
                                                                        ShortJobs()))


def fingerprint(statement: Statement, keys: list[str]) -> object:
    """Everything a cycle reads from the three: free capacity per node and per domain, who is
    assumed and counted, the sums per queue, the headroom, and where probes would go."""
    state, allocations, headroom = statement.nodes, statement.allocations, statement.headroom
    assert headroom is not None
    domains = [state.tree.root, *(d for level in state.tree.levels
                                  for d in state.tree.domains(level))]
    return (
        {name: state.free(name) for name in state.names},
        [[list(row) for row in domain.free] for domain in domains],
        {key: (state.assumed(key), allocations.holds(key)) for key in keys},
        state.held_count(), allocations.count(),
        {name: _nonzero(allocations.held[name]) for name in QUEUES},
        {name: _nonzero(allocations.funded[name]) for name in QUEUES},
        headroom.held, headroom.pool(),
        [place(state, probe) for probe in PROBES],
    )


def _nonzero(amounts: dict[str, int]) -> dict[str, int]:
    return {resource: amount for resource, amount in amounts.items() if amount}


def test_nested_marks_restore_each_level() -> None:
    running = replace(workload("a", gang(2, 3), queue="a"), phase=Phase.ADMITTED,
                      placement={"n1": 1, "n2": 1}, pod_set_placements=({"n1": 1, "n2": 1},))
    state = ClusterState((node("n1"), node("n2", used=2), node("n3", cpu=8_000)), LEVELS,
                         [running])
    statement = statement_over(state, [running])
    keys = ["a", "b", "c"]
    before = fingerprint(statement, keys)
    outer = statement.checkpoint()
    statement.evict(running)
    statement.allocate(workload("b", gang(2, 3), queue="b"), ({"n1": 2},))
    between = fingerprint(statement, keys)
    inner = statement.checkpoint()
    statement.allocate(workload("c", gang(2, 3), queue="a"), ({"n3": 2},))
    statement.rollback(inner)
    assert fingerprint(statement, keys) == between
    statement.rollback(outer)
    assert fingerprint(statement, keys) == before
    assert state.assumed("a") and not state.assumed("b")
    decision = place(state, workload("d", gang(1, 6), required=RACK))
    assert not isinstance(decision, Placement)  # memos were dropped, not left stale


def test_rolling_back_an_outer_mark_before_an_inner_one_is_refused() -> None:
    state = cluster(node("n1"))
    statement = statement_over(state)
    outer = statement.checkpoint()
    statement.assume("hold", (gang(1, 2),), ({"n1": 1},))
    inner = statement.checkpoint()
    statement.rollback(outer)
    with pytest.raises(ValueError, match="inner mark rolled back after an outer one"):
        statement.rollback(inner)
    assert state.free("n1") == {GPU: 8}


def test_evicting_unfunded_work_leaves_the_pool_as_it_was() -> None:
    """Its GPUs become free but leave the headroom's count: they were in the pool already."""
    state = cluster(node("n1"))
    statement = statement_over(state)
    assert statement.headroom is not None
    unfunded = workload("u", gang(1, 4), queue="a")
    statement.allocate(unfunded, ({"n1": 1},))
    pool = statement.headroom.pool()
    statement.evict(unfunded)
    assert statement.headroom.pool() == pool == 8
    statement.allocate(workload("f", gang(1, 4), queue="a", min_runtime=60.0), ({"n1": 1},))
    assert statement.headroom.pool() == 4


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[Node], list[Workload], list[Workload]]:
    """Nodes in racks, workloads admitted where `place` put them, and others still pending."""
    nodes = [Node(f"r{r}-n{n}", {GPU: draw(st.sampled_from([4, 8]))},
                  {BLOCK: "b0", RACK: f"r{r}", HOSTNAME: f"r{r}-n{n}"},
                  unschedulable=draw(st.booleans()) and n == 0 and r == 0,
                  used={GPU: draw(st.integers(0, 2))})
             for r in range(draw(st.integers(1, 3))) for n in range(draw(st.integers(1, 3)))]
    state = ClusterState(nodes, LEVELS)
    admitted: list[Workload] = []
    pending: list[Workload] = []
    for i in range(draw(st.integers(2, 10))):
        sets = [PodSet(f"s{j}", draw(st.integers(1, 3)), {GPU: draw(st.integers(1, 4))})
                for j in range(draw(st.integers(1, 2)))]
        candidate = Workload(f"w{i}", draw(st.sampled_from(["a", "b"])), tuple(sets), 0.0, 0,
                             draw(st.sampled_from([0.0, 600.0])))
        placed = place(state, candidate) if draw(st.booleans()) else None
        if isinstance(placed, Placement):
            running = candidate.admitted(0.0, placed.node_counts)
            state.assume(running.key, running.pod_sets, placed.node_counts)
            admitted.append(running)
        else:
            pending.append(candidate)
    return nodes, admitted, pending


OPERATIONS = st.lists(st.tuples(
    st.sampled_from(["allocate", "evict", "halves", "hold", "mark", "rollback"]),
    st.integers(0, 1_000)), max_size=30)


@PROPERTY
@given(worlds(), OPERATIONS)
def test_any_operations_then_rollback_restore_everything_exactly(
        world: tuple[list[Node], list[Workload], list[Workload]],
        operations: list[tuple[str, int]]) -> None:
    nodes, admitted, pending = world
    state = ClusterState(nodes, LEVELS, admitted)
    statement = statement_over(state, admitted)
    keys = [w.key for w in admitted + pending] + ["hold"]
    running = {w.key: w for w in admitted}
    waiting = {w.key: w for w in pending}
    marks = [(statement.checkpoint(), fingerprint(statement, keys),
              dict(running), dict(waiting))]
    for operation, pick in operations:
        if operation == "allocate" and waiting:
            candidate = waiting[sorted(waiting)[pick % len(waiting)]]
            placed = place(state, candidate)
            if isinstance(placed, Placement):
                statement.allocate(candidate.admitted(1.0, placed.node_counts),
                                   placed.node_counts)
                running[candidate.key] = candidate.admitted(1.0, placed.node_counts)
                del waiting[candidate.key]
        elif operation in ("evict", "halves") and running:
            victim = running.pop(sorted(running)[pick % len(running)])
            if operation == "evict":
                statement.evict(victim)
            else:  # as a preemption search does: the books first, then the node model
                statement.uncount(victim)
                statement.release(victim.key)
            waiting[victim.key] = replace(victim, phase=Phase.PENDING, placement={},
                                          pod_set_placements=())
        elif operation == "hold" and not state.assumed("hold"):
            name = state.names[pick % len(state.names)]
            statement.assume("hold", (PodSet("hold", 1, state.free(name)),), ({name: 1},))
        elif operation == "mark":
            marks.append((statement.checkpoint(), fingerprint(statement, keys),
                          dict(running), dict(waiting)))
        elif operation == "rollback":
            del marks[1 + pick % len(marks):]  # a mark and every later one
            mark, expected, running_then, waiting_then = marks[-1]
            statement.rollback(mark)
            assert fingerprint(statement, keys) == expected
            running, waiting = dict(running_then), dict(waiting_then)
    mark, expected, _, _ = marks[0]
    statement.rollback(mark)
    assert fingerprint(statement, keys) == expected
    assert statement.checkpoint() == 0
