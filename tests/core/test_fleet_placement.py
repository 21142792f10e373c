"""A fleet of clusters in the node model: the cluster is the level above every other, so no gang
spans two clusters, a gang no cluster holds waits naming the one with the most room, and nodes
of one cluster decide exactly as unlabelled nodes do."""

from __future__ import annotations

from dataclasses import replace

from admitter.core.decisions import CycleSettings
from admitter.core.model import GPU, FairShareSettings, Node
from admitter.core.placement import Placement, PlacementFailure, place
from admitter.core.topology import CLUSTER, HOSTNAME

from builders.core import BLOCK, RACK, cluster, gang, job, node, queue, running_on, workload
from builders.world import World, admitted, evicted, pending

HOUR = 3600.0


def west(used: tuple[int, ...] = (0, 0, 0, 0)) -> list[Node]:
    """Four 8-GPU nodes in cluster west, block b1, two racks."""
    return [node(f"w{i}", used=gpus, rack=f"r{i // 2}", cluster="west")
            for i, gpus in enumerate(used)]


def east(used: tuple[int, ...] = (0, 0, 0)) -> list[Node]:
    """Three 8-GPU nodes in cluster east, also in a block named b1 (another cluster's)."""
    return [node(f"e{i}", used=gpus, rack="r0", cluster="east") for i, gpus in enumerate(used)]


def unlabelled(nodes: list[Node]) -> list[Node]:
    return [replace(n, labels={k: v for k, v in n.labels.items() if k != CLUSTER}) for n in nodes]


def clusters_of(placement: Placement, nodes: list[Node]) -> set[str]:
    by_name = {n.name: n for n in nodes}
    return {by_name[name].labels[CLUSTER] for counts in placement.node_counts for name in counts}


def test_a_gang_the_fleet_could_split_waits_naming_the_cluster_with_the_most_room() -> None:
    nodes = west(used=(0, 0, 8, 8)) + east(used=(0, 4, 8))
    assert isinstance(place(cluster(*unlabelled(nodes)), workload("w", gang(3, 8))), Placement)
    failed = place(cluster(*nodes), workload("w", gang(3, 8)))
    assert isinstance(failed, PlacementFailure)
    assert failed.reason == ("no cluster has 24 free nvidia.com/gpu for 3 pods × 8; "
                             "the largest room is 16, in cluster west")


def test_a_gang_goes_whole_to_the_fullest_cluster_that_holds_it_and_its_affinity_names_it():
    nodes = west() + east(used=(4, 0, 0))
    placed = place(cluster(*nodes), workload("w", gang(2, 8)))
    assert isinstance(placed, Placement)
    assert clusters_of(placed, nodes) == {"east"}
    assert placed.affinity == {CLUSTER: "east"}
    assert (placed.domain_level, placed.domain_value) == (CLUSTER, "east")


def test_a_required_block_is_a_block_of_one_cluster_though_two_clusters_name_it_alike():
    nodes = west(used=(0, 0, 8, 8)) + east(used=(0, 4, 8))
    assert all(n.labels[BLOCK] == "b1" for n in nodes)
    failed = place(cluster(*nodes), workload("w", gang(3, 8), required=BLOCK))
    assert isinstance(failed, PlacementFailure)
    assert failed.reason == (
        "no cluster has 24 free nvidia.com/gpu in one block (topology.admitter.dev/block) for "
        "3 pods × 8; the largest room is 16, in cluster west")
    placed = place(cluster(*nodes), workload("w", gang(2, 8), required=RACK))
    assert isinstance(placed, Placement)
    assert placed.affinity == {CLUSTER: "west", BLOCK: "b1", RACK: "r0"}


def test_fragmentation_inside_every_cluster_is_told_of_the_best_cluster() -> None:
    nodes = west(used=(4, 4, 4, 0)) + east(used=(4, 4, 0))
    failed = place(cluster(*nodes), workload("w", gang(2, 8)))
    assert isinstance(failed, PlacementFailure)
    assert failed.reason == ("no cluster fits 2 pods × 8 nvidia.com/gpu: free capacity is "
                             "fragmented, the best fits 1, in cluster east")


def test_nodes_of_one_cluster_decide_as_unlabelled_nodes_do() -> None:
    nodes = west(used=(0, 4, 8, 0))
    labelled, plain = cluster(*nodes), cluster(*unlabelled(nodes))
    assert labelled.tree.levels == plain.tree.levels and CLUSTER not in labelled.tree.levels
    for request in (workload("a", gang(2, 8)), workload("b", gang(3, 8)),
                    workload("c", gang(2, 8), required=RACK),
                    workload("d", gang(1, 4), preferred=RACK),
                    workload("e", gang(4, 4), required=BLOCK, preferred=HOSTNAME)):
        assert place(labelled, request) == place(plain, request)


def test_a_cordoned_cluster_keeps_the_fleet_a_fleet() -> None:
    nodes = west() + [replace(n, unschedulable=True) for n in east()]
    state = cluster(*nodes)
    assert state.tree.levels[0] == CLUSTER
    placed = place(state, workload("w", gang(4, 8)))
    assert isinstance(placed, Placement) and placed.affinity == {CLUSTER: "west"}


def test_a_node_that_names_no_cluster_takes_no_gang_in_a_fleet() -> None:
    nodes = west(used=(8, 8, 8, 8)) + east(used=(8, 8, 8)) + [node("stray")]
    failed = place(cluster(*nodes), workload("w", gang(1, 8)))
    assert isinstance(failed, PlacementFailure)
    assert failed.reason.startswith("no cluster has 8 free nvidia.com/gpu")


def test_a_gang_larger_than_every_cluster_waits_naming_the_largest_funded_or_not() -> None:
    world = World(west() + east(), [queue("a", 56)], topology=(BLOCK, RACK))
    world.submit(job("big", "a", pods=5), job("spare", "a", pods=5, min_runtime=0, at=1))
    result = world.cycle(0)
    assert admitted(result) == [] and pending(result) == {"big": "NeverFits", "spare": "NeverFits"}
    reason = ("no cluster has 40 free nvidia.com/gpu for 5 pods × 8; the largest room is 32, "
              "in cluster west, even with nothing else running on the cluster's nodes")
    assert [p.message for p in result.pending] == [reason, reason]
    world.submit(job("small", "a", pods=3, at=2))
    assert admitted(world.cycle(1)) == ["small"]
    assert set(world.placement("small")) == {"e0", "e1", "e2"}  # the fleet has 32 idle < 40
    assert [p.message for p in world.cycle(2).pending if p.key == "spare"] == [reason]


def test_room_is_made_in_one_cluster_only() -> None:
    """Team b borrowed most of the fleet, its latest work in east; team a's 4-node gang fits
    only west, so only west's work is requeued for it, though east's would go first."""
    world = World(west() + east(), [queue("a", 32, order=0), queue("b", 24, order=1)],
                  topology=(BLOCK, RACK))
    world.submit(*(running_on(f"b{i}", "b", name, at=i)
                   for i, name in enumerate(["w0", "w1", "w2", "e0", "e1", "e2"])))
    world.submit(job("gang", "a", pods=4, at=10))
    result = world.cycle(2 * HOUR)
    assert admitted(result) == ["gang"]
    assert sorted(evicted(result)) == ["b0", "b1", "b2"]
    assert set(world.placement("gang")) == {"w0", "w1", "w2", "w3"}
    assert result.queues["a"].allocated == {GPU: 32}


def test_a_starving_gang_is_drained_for_inside_one_cluster() -> None:
    """One node idle in each cluster: together they would hold the gang, but it may only have
    a cluster's, so the drain holds both nodes of one cluster."""
    settings = CycleSettings(fair_share=FairShareSettings(window=0), starvation_bound=HOUR)
    nodes = [node(n, cluster=c) for n, c in (("w0", "west"), ("w1", "west"),
                                             ("e0", "east"), ("e1", "east"))]
    world = World(nodes, [queue("a", 32)], settings=settings, topology=(BLOCK, RACK))
    world.submit(running_on("west-job", "a", "w0", min_runtime=3 * HOUR),
                 running_on("east-job", "a", "e0", min_runtime=3 * HOUR),
                 job("big", "a", pods=2, at=1))
    result = world.cycle(2 * HOUR)
    assert pending(result)["big"] == "Reserved"
    message = next(p.message for p in result.pending if p.key == "big")
    assert message.endswith("2 node(s) reserved for big: e1, e0")  # the earlier of equals


def test_a_host_naming_no_cluster_takes_no_gang_that_requires_one_host() -> None:
    """A host is its own host-level domain: without the cluster above it, a gang required on
    one host took the one idle host that names no cluster."""
    nodes = west(used=(8, 8, 8, 8)) + east(used=(8, 8, 8)) + unlabelled([node("x", rack="r9")])
    failed = place(cluster(*nodes), workload("w", gang(1, 8), required=HOSTNAME))
    assert isinstance(failed, PlacementFailure), failed
    nodes = west(used=(8, 8, 8, 8)) + east(used=(8, 0, 8)) + unlabelled([node("x", rack="r9")])
    placed = place(cluster(*nodes), workload("w", gang(1, 8), required=HOSTNAME))
    assert isinstance(placed, Placement) and clusters_of(placed, nodes) == {"east"}
