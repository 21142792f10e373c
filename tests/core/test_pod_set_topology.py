"""A pod set's own topology request: each pod set kept in one domain of its level, inside the
workload's domain, with the domain each went to and a reason naming the pod set and the level
when none holds it."""

from __future__ import annotations

from admitter.core.placement import Placement, PlacementFailure, place

from builders.core import BLOCK, RACK, cluster, gang, job, node, queue, racks, workload
from builders.world import World, admitted


def test_workers_that_need_a_rack_go_to_one_that_holds_them_and_the_leader_anywhere() -> None:
    # Packing by allocation alone would put the workers on the fullest nodes, over two racks.
    state = cluster(node("a", used=6, rack="r1"), node("b", used=6, rack="r1"),
                    node("c", rack="r2"), node("d", used=4, rack="r2"))
    decision = place(state, workload("js", gang(1, 1, "leader"),
                                     gang(8, 1, "workers", required=RACK)))
    assert isinstance(decision, Placement)
    assert decision.node_counts == ({"a": 1}, {"c": 4, "d": 4})
    assert decision.affinity == {}
    assert decision.pod_set_affinity == ({}, {BLOCK: "b1", RACK: "r2"})


def test_each_pod_set_gets_a_rack_of_its_own_inside_the_required_block() -> None:
    state = cluster(*racks(2, blocks=2))
    decision = place(state, workload("js", gang(2, 8, "a", required=RACK),
                                     gang(2, 8, "b", required=RACK), required=BLOCK))
    assert isinstance(decision, Placement)
    assert decision.affinity == {BLOCK: "b0"}
    assert decision.pod_set_affinity == ({BLOCK: "b0", RACK: "r0"}, {BLOCK: "b0", RACK: "r1"})
    assert decision.node_counts == ({"b0-r0-n0": 1, "b0-r0-n1": 1},
                                    {"b0-r1-n0": 1, "b0-r1-n1": 1})


def test_a_pod_set_larger_than_any_rack_waits_with_a_reason_naming_it_and_the_level() -> None:
    state = cluster(*racks(2))
    decision = place(state, workload("js", gang(1, 1, "leader"),
                                     gang(3, 8, "workers", required=RACK)))
    assert decision == PlacementFailure(
        "pod set workers: no rack (topology.admitter.dev/rack) has 24 free nvidia.com/gpu for "
        "3 pods × 8; the largest has 16")


def test_a_preferred_rack_falls_back_level_by_level() -> None:
    state = cluster(*racks(2, blocks=2))
    decision = place(state, workload("js", gang(3, 8, "workers", preferred=RACK)))
    assert isinstance(decision, Placement)
    assert sum(decision.node_counts[0].values()) == 3
    assert decision.pod_set_affinity == ({BLOCK: "b0"},)
    too_big = place(state, workload("js", gang(5, 8, "workers", preferred=RACK)))
    assert isinstance(too_big, Placement)
    assert too_big.pod_set_affinity == ({},)


def test_a_level_no_finer_than_the_workloads_adds_nothing() -> None:
    state = cluster(*racks(2))
    decision = place(state, workload("js", gang(2, 8, "workers", required=BLOCK),
                                     required=RACK))
    assert isinstance(decision, Placement)
    assert decision.pod_set_affinity == (decision.affinity,)
    assert decision.affinity[RACK] == "r0"


def test_pod_sets_that_each_fit_a_rack_but_not_together_wait() -> None:
    state = cluster(node("a", rack="r1"), node("b", rack="r1"), node("c", used=8, rack="r2"))
    decision = place(state, workload("js", gang(2, 8, "x", required=RACK),
                                     gang(1, 8, "y", required=RACK)))
    assert decision == PlacementFailure("pod sets x, y do not fit together")


def test_a_pod_sets_topology_tells_its_shape_apart() -> None:
    plain = workload("w", gang(2, 8, "workers"))
    in_rack = workload("w", gang(2, 8, "workers", required=RACK))
    assert plain.shape() != in_rack.shape()


def test_the_cycle_admits_with_each_pod_sets_domain_and_says_where() -> None:
    world = World(racks(2), [queue("a", 32)]).submit(job("one", "a", gpus=4, at=0))
    world.cycle(0)
    world.submit(workload("js", gang(1, 1, "leader"), gang(2, 8, "workers", required=RACK),
                          queue="a", at=1))
    result = world.cycle(1)
    assert admitted(result) == ["js"]
    (admission,) = result.admissions
    assert admission.affinity == {}
    assert admission.pod_set_domains == (("workers", {BLOCK: "b0", RACK: "r1"}),)
    assert "pod set workers in topology.admitter.dev/block=b0, topology.admitter.dev/rack=r1" in (
        admission.message)
