"""The node model: free capacity, cordons and taints, assumed and released workloads."""

from __future__ import annotations

from dataclasses import replace

import pytest

from admitter.core.model import GPU, Node, Phase, Taint, Toleration
from admitter.core.nodes import ClusterState
from admitter.core.placement import Placement, PlacementFailure, place
from admitter.core.topology import HOSTNAME

from builders.core import BLOCK, CPU, LEVELS, RACK, cluster, gang, node, workload

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


def free_map(state: ClusterState) -> dict[str, dict[str, int]]:
    return {name: state.free(name) for name in state.names}


def test_used_by_other_pods_is_subtracted() -> None:
    state = cluster(node("n1", used=3))
    assert state.free("n1") == {GPU: 5}
    assert state.schedulable_capacity() == {GPU: 5}


def test_admitted_workloads_use_capacity_without_shrinking_what_queues_share() -> None:
    running = replace(workload("run", gang(2, 3)), phase=Phase.ADMITTED,
                      placement={"n1": 1, "n2": 1}, pod_set_placements=({"n1": 1, "n2": 1},))
    state = ClusterState((node("n1", used=2), node("n2"), node("n3", unschedulable=True)),
                         LEVELS, [running])
    assert free_map(state) == {"n1": {GPU: 3}, "n2": {GPU: 5}, "n3": {GPU: 0}}
    assert state.schedulable_capacity() == {GPU: 14}
    state.release("run")
    assert free_map(state) == {"n1": {GPU: 6}, "n2": {GPU: 8}, "n3": {GPU: 0}}


def test_resource_absent_from_a_node_is_zero() -> None:
    state = cluster(node("gpu", cpu=4_000), Node("cpu-only", {CPU: 64_000}, {BLOCK: "b1"}))
    assert state.free("cpu-only") == {GPU: 0, CPU: 64_000}
    decision = place(state, workload("w", gang(2, 1, cpu=2_000)))
    assert isinstance(decision, Placement)
    assert decision.node_counts == ({"gpu": 2},)


def test_cordoned_node_offers_nothing() -> None:
    state = cluster(node("n1", unschedulable=True), node("n2", used=6))
    assert state.free("n1") == {GPU: 0}
    assert state.schedulable_capacity() == {GPU: 2}
    assert place(state, workload("w", gang(1, 4))) == PlacementFailure(
        "no node offers 4 nvidia.com/gpu per pod; the largest node has 2")


@pytest.mark.parametrize(("tolerations", "placed"), [
    ((), False),
    ((Toleration("nvidia.com/gpu", "Exists"),), True),
    ((Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"),), True),
    ((Toleration("nvidia.com/gpu", "Equal", "absent"),), False),
    ((Toleration(operator="Exists"),), True),
])
def test_untolerated_noschedule_taint_offers_nothing(
        tolerations: tuple[Toleration, ...], placed: bool) -> None:
    state = cluster(node("n1", taints=(GPU_TAINT,)))
    decision = place(state, workload("w", gang(1, 8, tolerations=tolerations)))
    assert isinstance(decision, Placement) is placed
    if isinstance(decision, PlacementFailure):
        assert "taint the pods do not tolerate" in decision.reason


def test_only_noschedule_and_noexecute_block() -> None:
    soft = Taint("maintenance", "", "PreferNoSchedule")
    hard = Taint("maintenance", "", "NoExecute")
    state = cluster(node("soft", taints=(soft,)), node("hard", used=4, taints=(hard,)))
    decision = place(state, workload("w", gang(1, 4)))
    assert isinstance(decision, Placement)
    assert decision.node_counts == ({"soft": 1},)


def test_tainted_nodes_are_skipped_by_pods_that_do_not_tolerate_them() -> None:
    state = cluster(node("a", used=4, taints=(GPU_TAINT,)), node("b"))
    decision = place(state, workload("w", gang(1, 4)))
    assert isinstance(decision, Placement)
    assert decision.node_counts == ({"b": 1},)
    tolerant = gang(1, 4, tolerations=(Toleration("nvidia.com/gpu", "Exists"),))
    decision = place(state, workload("w", tolerant))
    assert isinstance(decision, Placement)
    assert decision.node_counts == ({"a": 1},)


def test_two_workloads_assumed_in_sequence_never_double_count() -> None:
    state = cluster(node("n1"), node("n2", used=4))
    counts = []
    for key in ("a", "b", "c"):
        w = workload(key, gang(1, 4))
        decision = place(state, w)
        assert isinstance(decision, Placement)
        state.assume(key, w.pod_sets, decision.node_counts)
        counts.append(decision.node_counts[0])
    assert counts == [{"n2": 1}, {"n1": 1}, {"n1": 1}]
    assert free_map(state) == {"n1": {GPU: 0}, "n2": {GPU: 0}}
    assert not isinstance(place(state, workload("d", gang(1, 1))), Placement)


def test_admitted_workloads_are_assumed_at_construction() -> None:
    single = replace(workload("a", gang(2, 2)), phase=Phase.ADMITTED, placement={"n1": 2})
    double = replace(workload("b", gang(1, 1, "x"), gang(1, 3, "y")), phase=Phase.ADMITTED,
                     placement={"n1": 1, "n2": 1}, pod_set_placements=({"n2": 1}, {"n1": 1}))
    gone = replace(workload("c", gang(1, 8)), phase=Phase.ADMITTED, placement={"deleted": 1})
    state = ClusterState([node("n1"), node("n2")], (BLOCK, RACK), [single, double, gone])
    assert free_map(state) == {"n1": {GPU: 1}, "n2": {GPU: 7}}
    assert state.assumed("a") and state.assumed("b") and state.assumed("c")
    state.release("a")
    assert state.free("n1") == {GPU: 5}


def test_multi_pod_set_admitted_workload_needs_per_pod_set_placement() -> None:
    bad = replace(workload("b", gang(1, 1, "x"), gang(1, 3, "y")), placement={"n1": 2})
    with pytest.raises(ValueError, match="per pod set"):
        ClusterState([node("n1")], (), [bad])


def test_assume_twice_and_release_unknown_are_errors() -> None:
    state = cluster(node("n1"))
    w = workload("a", gang(1, 1))
    state.assume("a", w.pod_sets, ({"n1": 1},))
    with pytest.raises(ValueError, match="already assumed"):
        state.assume("a", w.pod_sets, ({"n1": 1},))
    with pytest.raises(KeyError):
        state.release("nope")


def test_restoring_what_release_returned_undoes_it_exactly() -> None:
    state = cluster(node("n1", used=6), node("n2"))
    state.assume("a", (gang(2, 4),), ({"n1": 1, "n2": 1},))
    before = free_map(state)
    holding = state.release("a")
    state.restore("a", holding)
    assert free_map(state) == before == {"n1": {GPU: 0}, "n2": {GPU: 4}}
    state.release("a")
    assert free_map(state) == {"n1": {GPU: 2}, "n2": {GPU: 8}}


def test_overcommitted_node_offers_zero_not_negative() -> None:
    state = cluster(node("n1", used=6))
    state.assume("a", (gang(1, 4),), ({"n1": 1},))
    assert state.free("n1") == {GPU: 0}
    state.release("a")
    assert state.free("n1") == {GPU: 2}


def test_domain_tree_scopes_values_by_path_and_hangs_unlabelled_nodes_higher() -> None:
    state = cluster(node("a", block="b1", rack="r1"), node("b", block="b2", rack="r1"),
                    node("c", block="b1"), node("d", block=None, rack="r9"))
    racks = state.tree.domains(RACK)
    assert [(d.affinity, d.nodes) for d in racks] == [
        ({BLOCK: "b1", RACK: "r1"}, ("a",)), ({BLOCK: "b2", RACK: "r1"}, ("b",))]
    assert [d.nodes for d in state.tree.domains(BLOCK)] == [("a", "c"), ("b",)]
    assert state.tree.root.nodes == ("a", "c", "b", "d")
    assert state.tree.leaves[state.node_index("d")].affinity == {HOSTNAME: "d"}


def test_hostname_can_only_be_the_finest_level() -> None:
    with pytest.raises(ValueError, match="finest"):
        ClusterState([node("n1")], (HOSTNAME, RACK))
    assert ClusterState([node("n1")], (RACK, HOSTNAME)).tree.levels == (RACK, HOSTNAME)


def test_pods_with_room_nowhere_are_owed_what_stands_free_elsewhere() -> None:
    """kube-scheduler put a 4-GPU pod on n1, where the model had given the room to an 8-GPU
    pod; that pod has room on no node (n2 and n3 have 4 free each) and is held at its hint,
    4 over n1's 8. Of the 8 idle, 4 are owed to it: one more 4-GPU job may start, not two, or
    more GPUs would be under admission than the cluster has."""
    early = replace(workload("a", gang(1, 4)), phase=Phase.ADMITTED, placement={"n1": 1})
    stuck = replace(workload("big", gang(1, 8)), phase=Phase.ADMITTED, placement={"n1": 1})
    state = ClusterState([node("n1"), node("n2", used=4), node("n3", gpus=4)], (),
                         [early, stuck])
    assert state.owed(GPU) == 4 and state.free_total(GPU) == 8
    first = workload("first", gang(1, 4))
    placed = place(state, first)
    assert isinstance(placed, Placement)
    state.assume("first", first.pod_sets, placed.node_counts)
    refused = place(state, workload("second", gang(1, 4)))
    assert isinstance(refused, PlacementFailure) and "owed to admitted pods" in refused.reason
    state.release("a")  # the pod that took the room leaves: the 8-GPU pod fits where it was
    assert state.owed(GPU) == 0
    assert isinstance(place(state, workload("second", gang(1, 4))), Placement)
