"""The event loop's own rules: when the core runs, when the run ends, what a horizon cuts."""

from pathlib import Path

import pytest
import yaml
from decision_digest import EXAMPLES, decisions

from admitter.api.scenario_file import load_scenario, parse_scenario
from admitter.sim.engine import Simulation
from admitter.sim.result import percentile

from builders.scenario import simulate, starts, workload

ONE_NODE = """
cluster:
  nodeGroups: [{count: 1, namePrefix: n-, capacity: {nvidia.com/gpu: 8}}]
queues:
  - {name: team, resources: {nvidia.com/gpu: {quota: 8}}}
"""

WAITING = ONE_NODE + """
workloads:
  - {name: a, queue: team, podRequests: {nvidia.com/gpu: 8}, duration: 10h, minRuntime: 8h}
  - {name: b, queue: team, podRequests: {nvidia.com/gpu: 8}, duration: 1h, minRuntime: 1h}
"""


def _cycles(text: str, drift_cycles: int) -> int:
    scenario = parse_scenario(yaml.safe_load(text), "inline.yaml")
    return Simulation(scenario, drift_cycles=drift_cycles).run().cycles


def test_the_core_runs_only_at_changes_and_known_moments():
    # Cycle 0 admits a by placement alone, which the core reports settled: no re-check; cycle
    # 180 is b reaching the 30 min starvation bound (nodes reserved); cycle 2880 is a's
    # protection ending, which could move the domain drained for b (b may still not requeue
    # an equal priority); cycle 3600 is a finishing and admitting b. Then nothing is pending,
    # so b's finish needs no cycle.
    assert _cycles(WAITING, drift_cycles=10**9) == 4


def test_while_work_waits_the_core_also_reruns_every_drift_period_for_usage_drift():
    # Also every 30 boundaries after the last run: 30 … 150, 210 … 2850, 2910 … 3570.
    assert _cycles(WAITING, drift_cycles=30) == 4 + 5 + 89 + 23


def test_idle_time_is_skipped_not_stepped_through():
    month = ONE_NODE + """
workloads:
  - {name: long, queue: team, podRequests: {nvidia.com/gpu: 4}, duration: 30d}
  - {name: late, queue: team, submit: 29d, podRequests: {nvidia.com/gpu: 4}, duration: 1h}
"""
    result = simulate(month)
    # Admit long at 0, admit late at 29 d: nothing else can change the core's answer.
    assert result["summary"]["cycles"] == 2
    assert result["summary"]["simulated_s"] == 30 * 86400.0


def test_a_run_that_can_never_finish_stops_and_reports_unfinished():
    stuck = ONE_NODE + """
events:
  - {at: 0, cordon: n-0}
workloads:
  - {name: a, queue: team, submit: 1h, podRequests: {nvidia.com/gpu: 8}, duration: 1h}
"""
    result = simulate(stuck)
    assert result["summary"]["unfinished"] == 1
    assert result["summary"]["simulated_s"] == 3600.0
    assert workload(result, "a")["wait_s"] is None
    assert result["queues"]["team"]["never_started"] == 1


def test_horizon_cuts_running_work_and_later_submissions():
    cut = ONE_NODE + """
horizon: 90m
workloads:
  - {name: a, queue: team, podRequests: {nvidia.com/gpu: 8}, duration: 2h, minRuntime: 1h}
  - {name: b, queue: team, submit: 2h, podRequests: {nvidia.com/gpu: 8}, duration: 1h}
"""
    result = simulate(cut)
    summary = result["summary"]
    assert (summary["simulated_s"], summary["unfinished"], summary["unsubmitted"]) == (
        5400.0, 1, 1)
    assert [w["name"] for w in result["workloads"]] == ["a"]
    assert workload(result, "a")["finished_s"] is None
    assert summary["delivered_gpu_hours"] == 8 * 1.5
    assert summary["occupancy"] == 1.0


def test_changes_are_acted_on_at_the_next_cycle_boundary():
    grid = ONE_NODE + """
workloads:
  - {name: a, queue: team, submit: 15s, podRequests: {nvidia.com/gpu: 4}, duration: 95s}
  - {name: b, queue: team, submit: 20s, podRequests: {nvidia.com/gpu: 8}, duration: 1m}
"""
    result = simulate(grid)
    assert starts(result, "a") == [(20.0, {"n-0": 1})]
    # a finishes at 115 s; b gets the node at the 120 s boundary.
    assert starts(result, "b") == [(120.0, {"n-0": 1})]
    assert workload(result, "b")["wait_s"] == 100.0


def test_nearest_rank_percentile():
    assert percentile([], 90) is None
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile(range(1, 11), 90) == 9
    assert percentile(range(1, 11), 91) == 10


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.name)
def test_the_examples_decide_alike_with_reasons_asked_for_or_not(path: Path) -> None:
    """The loop asks its cycles for no reasons (`CycleSettings.reasons`): every run, eviction
    and cycle of the examples is what cycles that give reasons decide
    (`decision_digest.py`)."""
    scenario = load_scenario(path)
    assert decisions(Simulation(scenario).run()) == decisions(
        Simulation(scenario, reasons=True).run())
