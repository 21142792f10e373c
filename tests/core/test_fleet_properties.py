"""Properties of placement over a fleet, on random clusters: no placement spans two clusters,
and nodes that all name one cluster decide exactly as unlabelled nodes do."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from test_placement_properties import PROPERTY, nodes, run, workloads

from admitter.core.model import Node, Workload
from admitter.core.nodes import ClusterState
from admitter.core.placement import Placement, place
from admitter.core.topology import CLUSTER

from builders.core import LEVELS

CLUSTERS = st.sampled_from(["west", "east", "north", None])
"""None: a node that names no cluster (in a fleet it takes no gang)."""


@st.composite
def fleets(draw: st.DrawFn) -> list[Node]:
    members = draw(nodes())
    names = draw(st.lists(CLUSTERS, min_size=len(members), max_size=len(members)))
    return [replace(n, labels={**n.labels, CLUSTER: name}) if name else n
            for n, name in zip(members, names, strict=True)]


@PROPERTY
@given(fleets(), workloads())
def test_no_placement_spans_two_clusters(all_nodes: list[Node], batch: list[Workload]) -> None:
    state = ClusterState(all_nodes, LEVELS)
    named = {n.labels[CLUSTER] for n in all_nodes if CLUSTER in n.labels}
    cluster_of = {n.name: n.labels.get(CLUSTER) for n in all_nodes}
    for decision in run(state, all_nodes, batch, []):  # every other placement rule checked
        if decision is None:
            continue
        used = {cluster_of[name] for counts in decision.node_counts for name in counts}
        if len(named) > 1:
            assert len(used) == 1 and None not in used, used
            assert decision.affinity[CLUSTER] == used.pop()
        else:
            assert CLUSTER not in decision.affinity


@PROPERTY
@given(nodes(), workloads(), st.sampled_from(["west", "east"]))
def test_one_cluster_decides_as_no_cluster(all_nodes: list[Node], batch: list[Workload],
                                           name: str) -> None:
    labelled = [replace(n, labels={**n.labels, CLUSTER: name}) for n in all_nodes]
    plain, one = ClusterState(all_nodes, LEVELS), ClusterState(labelled, LEVELS)
    assert plain.tree.levels == one.tree.levels
    for workload in batch:
        expected, got = place(plain, workload), place(one, workload)
        assert got == expected
        if isinstance(got, Placement):
            plain.assume(workload.key, workload.pod_sets, got.node_counts)
            one.assume(workload.key, workload.pod_sets, got.node_counts)
