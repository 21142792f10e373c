"""A fleet scenario: `clusters:` beside `cluster:`, its nodes labelled with their cluster, and
bad input refused naming the field and the value."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from admitter.api.convert import scenario_nodes, topology_levels
from admitter.api.errors import InputError
from admitter.api.scenario_file import parse_scenario
from admitter.core.topology import CLUSTER, HOSTNAME
from admitter.sim.checks import check_simulatable

from builders.core import BLOCK

FLEET = f"""
clusters:
  - name: west
    labels: {{topology.kubernetes.io/region: us-west, example.com/cost: owned}}
    topology: [{BLOCK}]
    nodeGroups:
      - {{count: 2, namePrefix: w-, capacity: {{nvidia.com/gpu: 8}}, labels: {{{BLOCK}: b0}}}}
  - name: east
    labels: {{example.com/cost: on-demand}}
    nodeGroups:
      - {{count: 1, namePrefix: e-, capacity: {{nvidia.com/gpu: 8}},
         labels: {{example.com/cost: spot}}}}
queues:
  - {{name: team, resources: {{nvidia.com/gpu: {{quota: 24}}}}}}
workloads:
  - {{name: j, queue: team, pods: 2, podRequests: {{nvidia.com/gpu: 8}}, duration: 1h}}
"""


def fleet(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(FLEET)
    data.update(changes)
    return data


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(InputError) as caught:
        check_simulatable(parse_scenario(data, "fleet.yaml"), "fleet.yaml")
    return caught.value.problems


def test_every_node_carries_its_cluster_name_and_labels_and_a_group_label_wins() -> None:
    scenario = parse_scenario(fleet(), "fleet.yaml")
    labels = {node.name: dict(node.labels) for node in scenario_nodes(scenario)}
    assert labels == {
        "w-0": {CLUSTER: "west", BLOCK: "b0", "topology.kubernetes.io/region": "us-west",
                "example.com/cost": "owned", HOSTNAME: "w-0"},
        "w-1": {CLUSTER: "west", BLOCK: "b0", "topology.kubernetes.io/region": "us-west",
                "example.com/cost": "owned", HOSTNAME: "w-1"},
        "e-0": {CLUSTER: "east", "example.com/cost": "spot", HOSTNAME: "e-0"}}
    assert topology_levels(scenario) == (BLOCK, HOSTNAME)  # a cluster may list no levels


def test_one_cluster_or_a_fleet_never_both_nor_neither() -> None:
    both = fleet(cluster={"nodeGroups": fleet()["clusters"][1]["nodeGroups"]})
    neither = fleet()
    del neither["clusters"]
    for data in (both, neither):
        with pytest.raises(InputError) as caught:
            parse_scenario(data, "fleet.yaml")
        assert caught.value.problems == [(
            "(top level)", "give exactly one of cluster (one cluster) or clusters (a fleet)")]


def test_a_cluster_name_is_a_label_value_and_names_one_cluster() -> None:
    data = fleet()
    data["clusters"][1]["name"] = "West Coast"
    with pytest.raises(InputError, match=r"clusters\[1\]\.name: .*\(got 'West Coast'\)"):
        parse_scenario(data, "fleet.yaml")
    data["clusters"][1]["name"] = "west"
    assert problems(data) == [("clusters[1].name", "cluster 'west' is also clusters[0]")]


def test_a_fleet_has_one_hierarchy_and_names_clusters_only_by_name() -> None:
    data = fleet()
    data["clusters"][1]["topology"] = ["rack"]
    data["clusters"][1]["labels"][CLUSTER] = "far-east"
    data["clusters"][0]["nodeGroups"][0]["labels"][CLUSTER] = "east"
    assert problems(data) == [
        ("clusters[0].nodeGroups[0].labels.admitter.dev/cluster",
         "'east' is not the cluster's name 'west'"),
        ("clusters[1].topology",
         f"['rack'] differs from ['{BLOCK}']: a fleet has one hierarchy of levels (a cluster "
         "may list none)"),
        ("clusters[1].labels.admitter.dev/cluster",
         "'far-east': a cluster's nodes carry its name, set it there"),
    ]


def test_node_names_are_unique_across_the_fleet() -> None:
    data = fleet()
    data["clusters"][1]["nodeGroups"][0]["namePrefix"] = "w-"
    assert problems(data) == [("clusters[1].nodeGroups[0].namePrefix",
                               "node name 'w-0' is also produced by clusters[0].nodeGroups[0]")]


def test_a_gang_larger_than_every_cluster_is_refused_before_it_is_simulated() -> None:
    data = fleet()
    data["workloads"][0]["pods"] = 3  # the fleet has 3 nodes, but no cluster has
    assert problems(data) == [(
        "workloads[0].pods",
        "a gang of 3 pods never fits: one cluster holds at most 2 of them, on untainted nodes")]
