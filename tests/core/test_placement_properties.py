"""Properties of `place` + `ClusterState` on random clusters, checked against a brute force.

The brute force recomputes everything from the nodes and the placements assumed so far, so a
stale memo, a lost update or a wrong rollback shows up as a disagreement.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from admitter.core.model import (
    ANYWHERE,
    NO_TOPOLOGY,
    Node,
    NodeSelection,
    PodSet,
    Taint,
    Toleration,
    TopologyRequest,
    Workload,
)
from admitter.core.nodes import ClusterState
from admitter.core.placement import UNEXPLAINED, Placement, PlacementFailure, place
from admitter.core.queue_tree import QueueTree
from admitter.core.quota import Allocations
from admitter.core.statement import Statement
from admitter.core.topology import HOSTNAME

from builders.core import BLOCK, CPU, GPU, LEVELS, RACK, requirement, term

TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
TAINTS = st.sampled_from([(), (), (), (TAINT,), (Taint("dedicated", "infer", "NoExecute"),),
                          (Taint("spot", "", "PreferNoSchedule"),),
                          (TAINT, Taint("dedicated", "infer", "NoExecute"))])
TOLERATE = (Toleration("nvidia.com/gpu", "Exists"),)
TOLERATIONS = st.sampled_from([
    (), TOLERATE, (Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"),),
    (Toleration("nvidia.com/gpu", "Equal", "absent"),), (Toleration(operator="Exists"),),
    (Toleration("dedicated", "Equal", "infer", "NoExecute"), *TOLERATE),
    (Toleration("dedicated", "Exists", effect="NoSchedule"),)])
GPU_TYPE = "example.com/gpu-type"
LEVEL = st.sampled_from([None, BLOCK, RACK, HOSTNAME])


SELECTIONS = {
    ANYWHERE: lambda n: True,
    NodeSelection(((GPU_TYPE, "h100"),)): lambda n: n.labels.get(GPU_TYPE) == "h100",
    NodeSelection(terms=(term(requirement(RACK, "In", "r1")),)):
        lambda n: n.labels.get(RACK) == "r1",
    NodeSelection(((GPU_TYPE, "a100"),), (term(requirement(BLOCK, "DoesNotExist")),
                                          term(requirement(RACK, "NotIn", "r1")))):
        lambda n: n.labels.get(GPU_TYPE) == "a100" and (
            BLOCK not in n.labels or n.labels.get(RACK) != "r1"),
    NodeSelection(terms=(term(requirement(GPU_TYPE, "Exists"),
                              requirement("example.com/gpus", "Gt", "3")),)):
        lambda n: GPU_TYPE in n.labels and int(n.labels["example.com/gpus"]) > 3,
    NodeSelection(terms=(term(fields=(requirement("metadata.name", "In", "n0", "n3"),)),
                         term(requirement("example.com/gpus", "Lt", "2")))):
        lambda n: n.name in ("n0", "n3") or int(n.labels["example.com/gpus"]) < 2,
}
"""Selections with an independent statement of the nodes each one admits."""

PROPERTY = settings(deadline=None, max_examples=150)


@st.composite
def nodes(draw: st.DrawFn) -> list[Node]:
    result = []
    for i in range(draw(st.integers(1, 9))):
        gpus = draw(st.integers(0, 8))
        allocatable = {GPU: gpus}
        if draw(st.booleans()):
            allocatable[CPU] = draw(st.integers(0, 8)) * 1_000
        labels = {HOSTNAME: f"host-{i}", "example.com/gpus": str(gpus)}
        gpu_type = draw(st.sampled_from(["a100", "h100", None]))
        if gpu_type:
            labels[GPU_TYPE] = gpu_type
        block = draw(st.sampled_from(["b1", "b2", None]))
        if block:
            labels[BLOCK] = block
        rack = draw(st.sampled_from(["r1", "r2", None]))
        if rack:
            labels[RACK] = rack
        result.append(Node(
            f"n{i}", allocatable, labels, unschedulable=draw(st.integers(0, 9)) == 0,
            taints=draw(TAINTS),
            used={GPU: draw(st.integers(0, gpus))} if gpus else {}))
    return result


@st.composite
def workloads(draw: st.DrawFn, max_pod_sets: int = 2,
              own_topology: bool = True) -> list[Workload]:
    """Workloads of up to `max_pod_sets` pod sets, each with a topology of its own at times
    (`own_topology`)."""
    result = []
    for i in range(draw(st.integers(1, 6))):
        pod_sets = []
        for j in range(draw(st.integers(1, max_pod_sets))):
            requests = {GPU: draw(st.integers(0, 8))}
            if draw(st.booleans()):
                requests[CPU] = draw(st.integers(1, 4)) * 1_000
            own = (TopologyRequest(draw(LEVEL), draw(LEVEL))
                   if own_topology and draw(st.booleans()) else NO_TOPOLOGY)
            pod_sets.append(PodSet(f"p{j}", draw(st.integers(1, 4)), requests,
                                   draw(TOLERATIONS), draw(st.sampled_from(list(SELECTIONS))),
                                   own))
        topology = TopologyRequest(draw(LEVEL), draw(LEVEL))
        result.append(Workload(f"w{i}", "q", tuple(pod_sets), float(i), topology=topology))
    return result


def tolerated(node: Node, pod_set: PodSet) -> bool:
    """The pods may go there: every NoSchedule/NoExecute taint tolerated, the selection met."""
    for taint in node.taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any((t.key == taint.key or (not t.key and t.operator == "Exists"))
                   and (t.operator == "Exists" or t.value == taint.value)
                   and t.effect in ("", taint.effect) for t in pod_set.tolerations):
            return False
    return SELECTIONS[pod_set.selection](node)


def free(node: Node, assumed: Sequence[tuple[Workload, Placement]]) -> dict[str, int]:
    """allocatable − used − every assumed pod on the node, not clamped."""
    left = {r: node.allocatable.get(r, 0) - node.used.get(r, 0)
            for r in (*node.allocatable, *node.used)}
    for workload, placement in assumed:
        for pod_set, counts in zip(workload.pod_sets, placement.node_counts, strict=True):
            for r, q in pod_set.requests.items():
                left[r] = left.get(r, 0) - q * counts.get(node.name, 0)
    return left


def capacity(node: Node, pod_set: PodSet, left: Mapping[str, int]) -> int:
    if node.unschedulable or not tolerated(node, pod_set):
        return 0
    wanted = [(r, q) for r, q in pod_set.requests.items() if q > 0]
    return min((max(0, left.get(r, 0)) // q for r, q in wanted), default=10**9)


def domains(all_nodes: Sequence[Node], level: str | None,
            within: str | None) -> dict[tuple[str, ...], list[Node]]:
    """Nodes grouped by the label path down to `level` (the whole cluster for None); hosts
    only count when they carry every label down to the `within` level."""
    if level is None:
        return {(): list(all_nodes)}
    if level == HOSTNAME:
        need = LEVELS[:LEVELS.index(within) + 1] if within not in (None, HOSTNAME) else ()
        return {(n.name,): [n] for n in all_nodes if all(k in n.labels for k in need)}
    path = LEVELS[:LEVELS.index(level) + 1]
    groups: dict[tuple[str, ...], list[Node]] = {}
    for n in all_nodes:
        if all(key in n.labels for key in path):
            groups.setdefault(tuple(n.labels[k] for k in path), []).append(n)
    return groups


def tried_levels(request: TopologyRequest) -> list[str | None]:
    order: list[str | None] = [None, *LEVELS]
    required = order.index(request.required)
    preferred = required if request.preferred is None else order.index(request.preferred)
    return [order[i] for i in range(max(required, preferred), required - 1, -1)]


def bin_pack_key(members: Sequence[Node], pod_set: PodSet,
                 left: Mapping[str, Mapping[str, int]]) -> tuple[int, ...]:
    """Free amounts of the requested resources, GPU first, over the nodes the pods may use."""
    usable = [n for n in members if not n.unschedulable and tolerated(n, pod_set)]
    wanted = sorted((r for r, q in pod_set.requests.items() if q > 0), key=lambda r: (r != GPU, r))
    return tuple(sum(max(0, left[n.name].get(r, 0)) for n in usable) for r in wanted)


def packed(members: Sequence[Node], pod_set: PodSet,
           left: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Most-allocated node first (least free of the requested resources, then by name)."""
    wanted = sorted((r for r, q in pod_set.requests.items() if q > 0), key=lambda r: (r != GPU, r))
    caps = {n.name: capacity(n, pod_set, left[n.name]) for n in members}
    order = sorted((n for n in members if caps[n.name] > 0), key=lambda n: (
        [max(0, left[n.name].get(r, 0)) for r in wanted], n.name))
    counts, remaining = {}, pod_set.count
    for n in order:
        if remaining:
            counts[n.name] = take = min(remaining, caps[n.name])
            remaining -= take
    return counts


def expected(all_nodes: Sequence[Node], workload: Workload,
             left: Mapping[str, Mapping[str, int]]) -> tuple[str | None, tuple[int, ...]] | None:
    """For one pod set: the first level tried that has a fitting domain and the least
    bin-pack key among its fitting domains, or None when nothing fits."""
    pod_set = workload.pod_sets[0]
    for level in tried_levels(workload.topology):
        keys = [bin_pack_key(members, pod_set, left)
                for members in domains(all_nodes, level, workload.topology.required).values()
                if sum(capacity(n, pod_set, left[n.name]) for n in members) >= pod_set.count]
        if keys:
            return level, min(keys)
    return None


def run(state: ClusterState, all_nodes: Sequence[Node], batch: Sequence[Workload],
        assumed: list[tuple[Workload, Placement]],
        statement: Statement | None = None) -> list[Placement | None]:
    """Place and assume each workload (through `statement` if given), checking every placement
    as it goes."""
    by_name = {n.name: n for n in all_nodes}
    decisions: list[Placement | None] = []
    for workload in batch:
        decision = place(state, workload)
        if not isinstance(decision, Placement):
            decisions.append(None)
            assert decision.reason
            continue
        decisions.append(decision)
        for pod_set, counts, own in zip(workload.pod_sets, decision.node_counts,
                                        decision.pod_set_affinity, strict=True):
            assert sum(counts.values()) == pod_set.count, "partial gang"
            assert own.items() >= decision.affinity.items(), "a pod set outside the workload"
            if pod_set.topology.required is not None:
                assert pod_set.topology.required in own
            for name, count in counts.items():
                n = by_name[name]
                assert count > 0 and not n.unschedulable and tolerated(n, pod_set)
                labels = {**n.labels, HOSTNAME: n.labels.get(HOSTNAME, n.name)}
                assert all(labels.get(k) == v for k, v in own.items())
        if workload.topology.required is not None:
            assert workload.topology.required in decision.affinity
        (state if statement is None else statement).assume(
            workload.key, workload.pod_sets, decision.node_counts)
        assumed.append((workload, decision))
        for n in all_nodes:
            if n.unschedulable:
                continue
            left = free(n, assumed)
            initial = free(n, [])
            assert all(left[r] >= min(0, initial.get(r, 0)) for r in left), n.name
    return decisions


@PROPERTY
@given(nodes(), workloads())
def test_no_overcommit_no_partial_gang_required_topology_kept(
        all_nodes: list[Node], batch: list[Workload]) -> None:
    run(ClusterState(all_nodes, LEVELS), all_nodes, batch, [])


@PROPERTY
@given(nodes(), workloads(max_pod_sets=1, own_topology=False))
def test_single_pod_set_matches_brute_force(all_nodes: list[Node],
                                            batch: list[Workload]) -> None:
    """Fails exactly when no domain fits; otherwise the least-free fitting domain of the first
    level that has one, packed most-allocated node first."""
    state = ClusterState(all_nodes, LEVELS)
    assumed: list[tuple[Workload, Placement]] = []
    for workload in batch:
        left = {n.name: free(n, assumed) for n in all_nodes}
        want = expected(all_nodes, workload, left)
        (got,) = run(state, all_nodes, [workload], assumed)
        if want is None:
            assert got is None
            continue
        assert got is not None
        members = [n for n in all_nodes if all(
            {**n.labels, HOSTNAME: n.labels.get(HOSTNAME, n.name)}.get(k) == v
            for k, v in got.affinity.items())]
        assert got.domain_level == want[0]
        assert bin_pack_key(members, workload.pod_sets[0], left) == want[1]
        assert got.node_counts[0] == packed(members, workload.pod_sets[0], left)


@PROPERTY
@given(nodes(), workloads())
def test_without_explain_the_same_placement_and_a_failure_named_by_nothing(
        all_nodes: list[Node], batch: list[Workload]) -> None:
    """A victim search asks only whether a plan fits: it gets the same placement, and where
    the workload fits nowhere, a failure without the reason's walk over the domains."""
    state = ClusterState(all_nodes, LEVELS)
    for workload in batch:
        explained, unexplained = place(state, workload), place(state, workload, explain=False)
        if isinstance(explained, Placement):
            assert unexplained == explained
            state.assume(workload.key, workload.pod_sets, explained.node_counts)
        else:
            assert isinstance(explained, PlacementFailure) and explained.reason
            assert unexplained == explained or unexplained is UNEXPLAINED


@PROPERTY
@given(nodes(), workloads(), workloads(), st.data())
def test_rollback_restores_the_exact_free_map(all_nodes: list[Node], first: list[Workload],
                                              second: list[Workload], data: st.DataObject) -> None:
    state = ClusterState(all_nodes, LEVELS)
    assumed: list[tuple[Workload, Placement]] = []
    run(state, all_nodes, first, assumed)
    statement = Statement(state, Allocations(QueueTree(())))
    before = {name: state.free(name) for name in state.names}
    decisions_before = [place(state, w) for w in second]
    mark = statement.checkpoint()
    for workload, _ in assumed:
        if data.draw(st.booleans()):
            statement.release(workload.key)
    run(state, all_nodes, [w for w in second if not state.assumed(w.key)], [], statement)
    statement.rollback(mark)
    assert {name: state.free(name) for name in state.names} == before
    assert [place(state, w) for w in second] == decisions_before
    assert all(state.assumed(w.key) for w, _ in assumed)


@PROPERTY
@given(nodes(), workloads(), st.randoms(use_true_random=False))
def test_same_input_in_any_node_order_gives_the_same_placements(
        all_nodes: list[Node], batch: list[Workload], rng: random.Random) -> None:
    shuffled = list(all_nodes)
    rng.shuffle(shuffled)
    first = run(ClusterState(all_nodes, LEVELS), all_nodes, batch, [])
    again = run(ClusterState(shuffled, LEVELS), shuffled, batch, [])
    assert first == again
