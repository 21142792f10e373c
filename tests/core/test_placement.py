"""`place`: gang fit, topology levels, bin-packing, and the reasons it gives when nothing fits."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from admitter.core.model import GPU, Node, Phase, PodSet, Workload
from admitter.core.placement import Placement, PlacementFailure, place
from admitter.core.topology import HOSTNAME

from builders.core import BLOCK, CPU, LEVELS, RACK, cluster, gang, node, workload


@dataclass
class Case:
    name: str
    nodes: tuple[Node, ...]
    workload: Workload
    node_counts: tuple[dict[str, int], ...] | None = None
    """Expected per pod set counts; None when the placement must fail."""
    affinity: dict[str, str] | None = None
    reason: str = ""


R1, R2 = {BLOCK: "b1", RACK: "r1"}, {BLOCK: "b1", RACK: "r2"}

CASES = [
    Case("gang fits only across two nodes of one rack",
         (node("a", used=4, rack="r1"), node("b", used=4, rack="r1"),
          node("c", used=4, rack="r2"), node("d", used=6, rack="r3")),
         workload("w", gang(2, 4), required=RACK),
         ({"a": 1, "b": 1},), R1),
    Case("required rack with no fitting rack names the level and the largest free amount",
         (node("a", rack="r1"), node("b", rack="r2")),
         workload("w", gang(2, 8), required=RACK),
         reason="no rack (topology.admitter.dev/rack) has 16 free nvidia.com/gpu for 2 pods × 8;"
                " the largest has 8"),
    Case("fragmented rack: enough free GPUs in total but no two nodes that take a pod each",
         (node("a", used=4, rack="r1"), node("b", used=4, rack="r1"), node("c", rack="r1"),
          node("d", rack="r2")),
         workload("w", gang(2, 8), required=RACK),
         reason="no rack (topology.admitter.dev/rack) fits 2 pods × 8 nvidia.com/gpu: free "
                "capacity is fragmented, the best fits 1"),
    Case("no node offers the per-pod request",
         (node("a"), node("b", used=1)),
         workload("w", gang(1, 9)),
         reason="no node offers 9 nvidia.com/gpu per pod; the largest node has 8"),
    Case("the cluster is short of the gang's total",
         (node("a"), node("b", used=1)),
         workload("w", gang(2, 8)),
         reason="the cluster has 15 free nvidia.com/gpu; 2 pods × 8 need 16"),
    Case("preferred rack falls back to the required block",
         (node("a", rack="r1"), node("b", rack="r2"), node("c", used=8, rack="r2")),
         workload("w", gang(2, 8), required=BLOCK, preferred=RACK),
         ({"a": 1, "b": 1},), {BLOCK: "b1"}),
    Case("preferred rack is used when one fits",
         (node("a", rack="r1"), node("a2", rack="r1"), node("b", used=4, rack="r2"),
          node("c", used=4, rack="r2")),
         workload("w", gang(2, 4), required=BLOCK, preferred=RACK),
         ({"b": 1, "c": 1},), R2),
    Case("preferred rack without a requirement falls back to the whole cluster",
         (node("a", block="b1", rack="r1"), node("b", block="b2", rack="r2")),
         workload("w", gang(2, 8), preferred=RACK),
         ({"a": 1, "b": 1},), {}),
    Case("bin-packing picks the fullest rack that still fits",
         (node("a", rack="r1"), node("b", rack="r1"), node("c", used=7, rack="r2"),
          node("d", used=4, rack="r3"), node("e", used=2, rack="r3")),
         workload("w", gang(1, 4), required=RACK),
         ({"d": 1},), {BLOCK: "b1", RACK: "r3"}),
    Case("most-allocated node first inside the domain, as many pods as fit on each",
         (node("a", rack="r1"), node("b", used=5, rack="r1"), node("c", used=2, rack="r1")),
         workload("w", gang(5, 1), required=RACK),
         ({"b": 3, "c": 2},), R1),
    Case("no topology request: cluster-wide, no affinity, most-allocated node first",
         (node("a", block="b1"), node("b", used=6, block="b2")),
         workload("w", gang(1, 2)),
         ({"b": 1},), {}),
    Case("pod sets are packed one after another in the same domain",
         (node("a", rack="r1"), node("b", used=4, rack="r1"), node("c", used=2, rack="r2")),
         workload("w", gang(1, 4, "launcher"), gang(1, 8, "worker"), required=RACK),
         ({"b": 1}, {"a": 1}), R1),
    Case("heterogeneous pod sets that fit alone but not together",
         (node("a", rack="r1"), node("b", used=2, rack="r2")),
         workload("w", gang(1, 4, "launcher"), gang(1, 8, "worker"), required=RACK),
         reason="no rack (topology.admitter.dev/rack) fits pod sets launcher, worker together"),
    Case("required host keeps every pod on one node",
         (node("a", used=4), node("b", used=2)),
         workload("w", gang(3, 2), required=HOSTNAME),
         ({"b": 3},), {BLOCK: "b1", HOSTNAME: "b"}),
    Case("the tightest resource bounds pods per node",
         (node("a", cpu=3_000), node("b", cpu=16_000, used=4)),
         workload("w", gang(4, 1, cpu=2_000)),
         ({"b": 4},), {}),
    Case("a node without the rack label serves unconstrained workloads only",
         (node("a", rack=None), node("b", used=6, rack="r1")),
         workload("w", gang(1, 8), required=RACK),
         reason="no rack (topology.admitter.dev/rack) has 8 free nvidia.com/gpu for 1 pod × 8;"
                " the largest has 2"),
    Case("unknown topology level",
         (node("a"),), workload("w", gang(1, 1), required="example.com/pod"),
         reason="topology level example.com/pod is not one of the cluster's levels "
                "(topology.admitter.dev/block, topology.admitter.dev/rack, "
                "kubernetes.io/hostname)"),
    Case("a resource no node has",
         (node("a"),), workload("w", PodSet("main", 1, {GPU: 1, "example.com/fpga": 1})),
         reason="no node offers 1 example.com/fpga per pod; no node has example.com/fpga"),
    Case("no schedulable node", (node("a", unschedulable=True),), workload("w", gang(1, 1)),
         reason="no schedulable node"),
    Case("pods that request nothing fit anywhere schedulable",
         (node("a"),), workload("w", PodSet("main", 3, {})), ({"a": 3},), {}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_place(case: Case) -> None:
    state = cluster(*case.nodes)
    before = {name: state.free(name) for name in state.names}
    decision = place(state, case.workload)
    assert {name: state.free(name) for name in state.names} == before
    if case.node_counts is None:
        assert decision == PlacementFailure(case.reason)
        return
    assert isinstance(decision, Placement)
    assert decision.node_counts == case.node_counts
    assert decision.affinity == case.affinity


def test_placement_names_its_domain_and_merges_counts() -> None:
    state = cluster(node("a", rack="r1"), node("b", used=4, rack="r1"))
    pending = workload("w", gang(1, 4, "x"), gang(2, 2, "y"), required=RACK)
    decision = place(state, pending)
    assert isinstance(decision, Placement)
    assert (decision.domain_level, decision.domain_value) == (RACK, "r1")
    assert decision.node_counts == ({"b": 1}, {"a": 2})
    admitted = pending.admitted(5.0, decision.node_counts)
    assert admitted.placement == {"a": 2, "b": 1}
    assert (admitted.phase, admitted.admitted_at) == (Phase.ADMITTED, 5.0)
    assert admitted.pod_set_placements == decision.node_counts
    state.assume("w", (gang(1, 4, "x"), gang(2, 2, "y")), decision.node_counts)
    assert state.free("a") == {GPU: 4} and state.free("b") == {GPU: 0}


def test_reason_names_the_pod_set_when_there_are_several() -> None:
    state = cluster(node("a"))
    decision = place(state, workload("w", gang(1, 1, "x"), gang(1, 9, "y")))
    assert decision == PlacementFailure(
        "pod set y: no node offers 9 nvidia.com/gpu per pod; the largest node has 8")


@pytest.mark.parametrize(("cpu", "reason"), [
    (4_000, "the cluster has 8000 free cpu; 3 pods × 3000 need 9000"),
    (5_000, "free capacity is fragmented: the cluster fits 2 of 3 pods × (1 nvidia.com/gpu, "
            "3000 cpu)"),
])
def test_cpu_reasons_when_gpus_fit_but_cpu_does_not(cpu: int, reason: str) -> None:
    state = cluster(node("a", cpu=cpu), node("b", cpu=cpu))
    assert place(state, workload("w", gang(3, 1, cpu=3_000))) == PlacementFailure(reason)


def test_levels_default_to_hosts_only() -> None:
    state = cluster(node("a"), node("b", used=4), levels=())
    assert state.tree.levels == (HOSTNAME,)
    decision = place(state, workload("w", gang(2, 2), required=HOSTNAME))
    assert isinstance(decision, Placement)
    assert decision.node_counts == ({"b": 2},)


def test_repeated_queries_after_assume_see_current_capacity() -> None:
    """Memos are dropped on the changed path only; the answers stay exact."""
    nodes = [node(f"n{i}", rack=f"r{i // 2}", block=f"b{i // 4}") for i in range(8)]
    state = cluster(*nodes, levels=LEVELS)
    placed = []
    for i in range(9):
        w = workload(f"w{i}", gang(2, 8), required=RACK)
        decision = place(state, w)
        if isinstance(decision, Placement):
            state.assume(w.key, w.pod_sets, decision.node_counts)
            placed.append(decision.domain_value)
    assert placed == ["r0", "r1", "r2", "r3"]
    assert place(state, workload("x", PodSet("main", 1, {CPU: 1}))) == PlacementFailure(
        "no node offers 1 cpu per pod; no node has cpu")
