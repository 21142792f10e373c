"""The simulator over a fleet: two clusters under one queue tree, two teams. Each gang runs
wholly in one cluster, and fair share and time-slicing span both clusters with no rule of
their own."""

from __future__ import annotations

from pathlib import Path

import yaml

from admitter.api.scenario_file import load_scenario
from admitter.core.decisions import EvictionReason
from admitter.sim.engine import Simulation
from admitter.sim.result import Result, build_result

from builders.scenario import simulate, starts, stops

HOUR = 3600.0
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet.yaml"

TWO_TEAMS = """
settings:
  cycle: 10s
  fairShare: {window: 1d}
clusters:
  - name: west
    nodeGroups: [{count: 2, namePrefix: w-, capacity: {nvidia.com/gpu: 8}}]
  - name: east
    labels: {topology.kubernetes.io/region: us-east}
    nodeGroups: [{count: 2, namePrefix: e-, capacity: {nvidia.com/gpu: 8}}]
queues:
  - {name: a, resources: {nvidia.com/gpu: {quota: 16}}}
  - {name: b, resources: {nvidia.com/gpu: {quota: 16}}}
workloads:
  - {name: solo, queue: a, count: 4, podRequests: {nvidia.com/gpu: 8}, duration: 12h,
     minRuntime: 1h}
  - {name: pair, queue: b, submit: 2h, count: 2, pods: 2, podRequests: {nvidia.com/gpu: 8},
     duration: 8h, minRuntime: 1h}
"""
"""Team a fills the whole fleet for 2 h; then team b's two 2-node gangs arrive, each of
which fits one cluster only whole."""


def spans(result: Result) -> list[tuple[str, float]]:
    """Every start whose nodes lie in more than one cluster (w-* is west, e-* east)."""
    return [(w["name"], s["at_s"]) for w in result["workloads"] for s in w["starts"]
            if len({node.split("-")[0] for node in s["nodes"]}) > 1]


def test_each_gang_runs_in_one_cluster_and_the_teams_take_turns_across_both() -> None:
    result = simulate(TWO_TEAMS)
    assert spans(result) == []
    for name in ("pair-0", "pair-1"):
        assert {frozenset(nodes) for _, nodes in starts(result, name)} <= {
            frozenset({"w-0", "w-1"}), frozenset({"e-0", "e-1"})}
    # Team a used the whole fleet alone: as b arrives, a's work is past its min runtime and
    # b ranks first, so b reclaims a cluster for each gang at once (the second a cycle later:
    # one search per queue and shape per cycle).
    assert [starts(result, name)[0][0] for name in ("pair-0", "pair-1")] == [
        2 * HOUR, 2 * HOUR + 10]
    # Time-slicing: then the teams swap resumable work back and forth in both clusters.
    taken_from_a = [by for i in range(4) for _, reason, by in stops(result, f"solo-{i}")
                    if reason == EvictionReason.RECLAIMED.value]
    taken_from_b = [by for i in range(2) for _, reason, by in stops(result, f"pair-{i}")
                    if reason == EvictionReason.RECLAIMED.value]
    assert {by.split("-")[0] for by in taken_from_a} == {"pair"} and len(taken_from_a) > 4
    assert {by.split("-")[0] for by in taken_from_b} == {"solo"} and len(taken_from_b) > 2
    # Resumable work loses nothing, and no GPU of either cluster idles while work waits:
    # everything (4 × 8 × 12 h + 2 × 16 × 8 h) is done in 640 GPU-hours / 32 GPUs = 20 h.
    queues = result["queues"]
    assert queues["a"]["delivered_gpu_hours"] == 4 * 8 * 12
    assert queues["b"]["delivered_gpu_hours"] == 2 * 16 * 8
    assert max(w["finished_s"] for w in result["workloads"]) == 20 * HOUR


def test_a_fleet_of_one_cluster_decides_as_one_cluster() -> None:
    fleet = yaml.safe_load(TWO_TEAMS)
    fleet["clusters"] = [{"name": "only", "nodeGroups": [
        group for member in fleet["clusters"] for group in member["nodeGroups"]]}]
    single = {**fleet, "cluster": {"nodeGroups": fleet["clusters"][0]["nodeGroups"]}}
    del single["clusters"]
    one, plain = simulate(yaml.safe_dump(fleet)), simulate(yaml.safe_dump(single))
    assert one["workloads"] == plain["workloads"]


def test_the_example_fleet_runs_every_gang_inside_one_cluster() -> None:
    scenario = load_scenario(EXAMPLE)
    result = build_result(Simulation(scenario).run(), wall_s=0.0)
    assert spans(result) == []
    by_name = {w["name"]: w for w in result["workloads"]}
    # 4-node gangs fit only west (east has 3 nodes); block pairs need a block, which only
    # west's nodes name.
    for name, workload in by_name.items():
        if name.startswith(("pretrain-", "block-")):
            assert all(node.startswith("w-") for s in workload["starts"] for node in s["nodes"])
    sweeps = {node[0] for name, w in by_name.items() if name.startswith("sweep-")
              for s in w["starts"] for node in s["nodes"]}
    assert sweeps == {"w", "e"}


def test_a_fleet_decides_the_same_whatever_order_its_nodes_come_in() -> None:
    first = simulate(TWO_TEAMS)
    for seed in (1, 7):
        assert simulate(TWO_TEAMS, seed)["workloads"] == first["workloads"]
