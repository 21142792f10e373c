"""Which nodes a pod set may use, as kube-scheduler's TaintToleration and NodeAffinity filters
decide, and how a gang confined to some nodes is placed or explained."""

from __future__ import annotations

import pytest

from admitter.core.model import (
    GPU,
    Node,
    NodeSelection,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSet,
    Taint,
    Toleration,
    tolerates_all,
)
from admitter.core.placement import Placement, PlacementFailure, place

from builders.core import RACK, cluster, gang, node, requirement, term, workload

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(("toleration", "taint", "tolerated"), [
    (Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"), GPU_TAINT, True),
    (Toleration("nvidia.com/gpu", "Equal", "present"), GPU_TAINT, True),
    (Toleration("nvidia.com/gpu", "Equal", "absent"), GPU_TAINT, False),
    (Toleration("nvidia.com/gpu", "Equal", "present", "NoExecute"), GPU_TAINT, False),
    (Toleration("nvidia.com/gpu", "Exists"), GPU_TAINT, True),
    (Toleration("other", "Exists"), GPU_TAINT, False),
    (Toleration(operator="Exists"), GPU_TAINT, True),
    (Toleration(operator="Exists", effect="NoExecute"), GPU_TAINT, False),
    (Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule"), GPU_TAINT, True),
])
def test_a_toleration_matches_key_value_and_effect(toleration: Toleration, taint: Taint,
                                                   tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated


def test_only_no_schedule_and_no_execute_taints_keep_pods_away() -> None:
    soft = Taint("spot", "", "PreferNoSchedule")
    evicting = Taint("maintenance", "", "NoExecute")
    assert tolerates_all((), (soft,))
    assert not tolerates_all((), (evicting,))
    assert not tolerates_all((Toleration("maintenance", "Exists"),), (evicting, GPU_TAINT))
    assert tolerates_all((Toleration("maintenance", "Exists"), Toleration("nvidia.com/gpu",
                                                                          "Exists")),
                         (evicting, GPU_TAINT, soft))


@pytest.mark.parametrize(("operator", "values", "label", "matches"), [
    ("In", ("a", "b"), "b", True),
    ("In", ("a", "b"), "c", False),
    ("In", ("a",), None, False),
    ("NotIn", ("a",), "b", True),
    ("NotIn", ("a",), "a", False),
    ("NotIn", ("a",), None, True),
    ("Exists", (), "", True),
    ("Exists", (), None, False),
    ("DoesNotExist", (), None, True),
    ("DoesNotExist", (), "x", False),
    ("Gt", ("4",), "8", True),
    ("Gt", ("8",), "8", False),
    ("Lt", ("8",), "4", True),
    ("Lt", ("4",), "8", False),
    ("Gt", ("4",), "many", False),
    ("Lt", ("4",), None, False),
])
def test_a_requirement_compares_the_node_label(operator: str, values: tuple[str, ...],
                                               label: str | None, matches: bool) -> None:
    assert NodeSelectorRequirement("k", operator, values).matches(label) is matches


def _node(name: str = "n1", **labels: str) -> Node:
    return Node(name, {GPU: 8}, labels)


def test_a_term_ands_its_requirements_and_an_empty_term_matches_nothing() -> None:
    both = term(requirement("zone", "In", "a"), requirement("gpus", "Gt", "4"))
    assert both.matches("n1", {"zone": "a", "gpus": "8"})
    assert not both.matches("n1", {"zone": "a", "gpus": "2"})
    assert not NodeSelectorTerm().matches("n1", {"zone": "a"})


def test_match_fields_select_by_node_name() -> None:
    by_name = term(fields=(requirement("metadata.name", "In", "n2"),))
    assert by_name.matches("n2", {}) and not by_name.matches("n1", {})
    other = term(fields=(requirement("metadata.uid", "Exists"),))
    assert not other.matches("n2", {})


def test_a_selection_needs_every_selector_label_and_one_term() -> None:
    selection = NodeSelection(
        (("pool", "train"),),
        (term(requirement("zone", "In", "a")),
         term(fields=(requirement("metadata.name", "In", "n9"),))))
    assert selection.matches(_node(pool="train", zone="a"))
    assert selection.matches(_node("n9", pool="train", zone="b"))
    assert not selection.matches(_node("n9", pool="serve", zone="a"))
    assert not selection.matches(_node(pool="train", zone="b"))
    assert NodeSelection().matches(_node())


def test_pod_set_admits_only_tolerated_and_selected_nodes() -> None:
    pods = PodSet("main", 1, {GPU: 1}, (Toleration("nvidia.com/gpu", "Exists"),),
                  NodeSelection((("pool", "train"),)))
    assert pods.admits(Node("n", {GPU: 8}, {"pool": "train"}, taints=(GPU_TAINT,)))
    assert not pods.admits(Node("n", {GPU: 8}, {"pool": "serve"}, taints=(GPU_TAINT,)))
    assert not pods.admits(Node("n", {GPU: 8}, {"pool": "train"},
                                taints=(Taint("dedicated", "x", "NoExecute"),)))


def _on_rack(rack: str) -> NodeSelection:
    return NodeSelection(((RACK, rack),))


def _in_racks(*racks: str) -> NodeSelection:
    return NodeSelection(terms=(term(requirement(RACK, "In", *racks)),))


RACKS = (node("a1", rack="r1", used=8), node("a2", rack="r1", used=8),
         node("b1", rack="r2", used=4), node("b2", rack="r2"))


def test_a_node_selector_keeps_the_gang_on_its_rack() -> None:
    decision = place(cluster(*RACKS), workload("w", PodSet("main", 1, {GPU: 8},
                                                           selection=_on_rack("r2"))))
    assert isinstance(decision, Placement) and decision.node_counts == ({"b2": 1},)


def test_a_node_selector_for_a_full_rack_does_not_fit_and_says_so() -> None:
    decision = place(cluster(*RACKS), workload("w", PodSet("main", 1, {GPU: 8},
                                                           selection=_on_rack("r1"))))
    assert decision == PlacementFailure(
        "no node the pods' nodeSelector and affinity match offers 8 nvidia.com/gpu per pod; "
        "the largest node has 0")


def test_a_selector_that_matches_no_node_is_named() -> None:
    decision = place(cluster(*RACKS), workload("w", PodSet("main", 1, {GPU: 1},
                                                           selection=_on_rack("r9"))))
    assert decision == PlacementFailure(
        "no schedulable node matches the pods' nodeSelector and required node affinity")


def test_selected_but_untolerated_nodes_are_named() -> None:
    tainted = (node("t1", rack="r3", taints=(GPU_TAINT,)), *RACKS)
    decision = place(cluster(*tainted), workload("w", PodSet("main", 1, {GPU: 1},
                                                             selection=_on_rack("r3"))))
    assert decision == PlacementFailure(
        "every node the pods' selection matches has a taint the pods do not tolerate")


def test_a_gang_larger_than_its_selected_nodes_counts_only_them() -> None:
    decision = place(cluster(*RACKS), workload("w", PodSet("main", 2, {GPU: 8},
                                                           selection=_in_racks("r1", "r2"))))
    assert decision == PlacementFailure(
        "the nodes the pods may use have 12 free nvidia.com/gpu; 2 pods × 8 need 16")


def test_domains_rank_by_the_free_capacity_of_the_selected_nodes_only() -> None:
    """Counting every node, r1 has less free (8 against 12) and would be packed first; counting
    only the pool's nodes, r3 has (4 against 8)."""
    def pool_node(name: str, rack: str, used: int, pool: str) -> Node:
        built = node(name, rack=rack, used=used)
        return Node(name, built.allocatable, {**built.labels, "pool": pool}, used=built.used)

    nodes = (pool_node("a1", "r1", 0, "train"), pool_node("a2", "r1", 8, "serve"),
             pool_node("c1", "r3", 4, "train"), pool_node("c2", "r3", 0, "serve"))
    pods = PodSet("main", 1, {GPU: 4}, selection=NodeSelection((("pool", "train"),)))
    decision = place(cluster(*nodes), workload("w", pods, required=RACK))
    assert isinstance(decision, Placement)
    assert decision.affinity[RACK] == "r3" and decision.node_counts == ({"c1": 1},)


def test_tolerations_and_selection_together() -> None:
    nodes = (node("a1", rack="r1", taints=(GPU_TAINT,)), node("b1", rack="r2"))
    tolerant = (Toleration("nvidia.com/gpu", "Exists"),)
    decision = place(cluster(*nodes), workload("w", gang(1, 8, tolerations=tolerant)))
    assert isinstance(decision, Placement)
    onto_r1 = PodSet("main", 1, {GPU: 8}, tolerant, _on_rack("r1"))
    decision = place(cluster(*nodes), workload("w", onto_r1))
    assert isinstance(decision, Placement) and decision.node_counts == ({"a1": 1},)
