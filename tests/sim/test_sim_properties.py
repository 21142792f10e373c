"""Properties of any simulation: the seed changes nothing, capacity is never exceeded, gangs
run whole and in their required domain, protection is honoured, and the accounting agrees
with the workload records."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from admitter.api.scenario_file import parse_scenario
from admitter.sim.engine import Simulation
from admitter.sim.result import build_result

from builders.scenario import simulate

RACK = "rack"
CYCLE = 10.0
GPUS_PER_NODE = 8


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    racks = draw(st.integers(1, 2))
    per_rack = draw(st.integers(1, 3))
    queues = [
        {"name": name, "resources": {"nvidia.com/gpu": {
            "quota": draw(st.integers(0, 16)),
            "overQuotaWeight": draw(st.sampled_from([1, 2, 3]))}}}
        for name in ("q0", "q1", "q2")[: draw(st.integers(1, 3))]
    ]
    workloads = []
    for index in range(draw(st.integers(1, 7))):
        pods = draw(st.integers(1, per_rack))
        duration = draw(st.integers(1, 48)) * 300
        workload = {
            "name": f"w{index}",
            "queue": draw(st.sampled_from([q["name"] for q in queues])),
            "submit": draw(st.integers(0, 7200)),
            "count": draw(st.integers(1, 3)),
            "every": draw(st.sampled_from([0, 600, 1800])),
            "pods": pods,
            "podRequests": {"nvidia.com/gpu": draw(st.sampled_from([1, 2, 4, 8]))},
            "duration": duration,
            "minRuntime": draw(st.sampled_from([0, 600, 3600, 7200])),
            "resumable": draw(st.booleans()),
            "priority": draw(st.integers(0, 2)),
        }
        if draw(st.booleans()):
            workload["topology"] = {draw(st.sampled_from(["required", "preferred"])): RACK}
        workloads.append(workload)
    events = []
    if draw(st.booleans()):
        at = draw(st.integers(0, 7200))
        events = [{"at": at, "cordon": "r0-n0"}, {"at": at + 5400, "uncordon": "r0-n0"}]
    return {
        "settings": {"cycle": CYCLE, "fairShare": {"window": "1d", "kValue": 1}},
        "cluster": {"topology": [RACK], "nodeGroups": [
            {"count": per_rack, "namePrefix": f"r{r}-n", "labels": {RACK: f"r{r}"},
             "capacity": {"nvidia.com/gpu": GPUS_PER_NODE}} for r in range(racks)]},
        "queues": queues,
        "history": {"q0": draw(st.sampled_from([0, 50]))},
        "events": events,
        "workloads": workloads,
    }


def _text(scenario: dict[str, Any]) -> str:
    return yaml.safe_dump(scenario)


def _stints(workload: dict[str, Any]) -> list[tuple[float, float | None, dict[str, int]]]:
    ends = [stop["at_s"] for stop in workload["stops"]]
    if workload["finished_s"] is not None:
        ends.append(workload["finished_s"])
    return [(start["at_s"], ends[i] if i < len(ends) else None, start["nodes"])
            for i, start in enumerate(workload["starts"])]


CHECK = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@CHECK
@given(scenarios(), st.integers(1, 2**16))
def test_the_seed_changes_nothing(scenario, seed):
    text = _text(scenario)
    assert simulate(text, seed=0) == simulate(text, seed=seed)


@CHECK
@given(scenarios())
def test_every_run_keeps_the_rules(scenario):
    result = simulate(_text(scenario))
    templates = {w["name"]: w for w in scenario["workloads"]}
    cordoned = [(e["at"], e["at"] + 5400) for e in scenario["events"] if "cordon" in e]
    # Every gang fits the empty cluster and the cordon is lifted: everything finishes.
    assert result["summary"]["unfinished"] == 0
    moments: dict[float, dict[str, int]] = {}
    funded_gpu_s: dict[str, float] = {}
    for workload in result["workloads"]:
        name = workload["name"]
        template = templates.get(name) or templates[name.rsplit("-", 1)[0]]
        per_pod = template["podRequests"]["nvidia.com/gpu"]
        stints = _stints(workload)
        for start, end, nodes in stints:
            assert start % CYCLE == 0 and start >= workload["submitted_s"]
            assert sum(nodes.values()) == template["pods"]  # the whole gang, never part of it
            if template.get("topology", {}).get("required"):
                assert len({node.split("-")[0] for node in nodes}) == 1
            for lo, hi in cordoned:
                assert not (lo <= start < hi and "r0-n0" in nodes)
            stop = result["summary"]["simulated_s"] if end is None else end
            for node, pods in nodes.items():
                moments.setdefault(start, {}).setdefault(node, 0)
                moments[start][node] += pods * per_pod
                moments.setdefault(stop, {}).setdefault(node, 0)
                moments[stop][node] -= pods * per_pod
            if template["minRuntime"] > 0:
                queue = workload["queue"]
                funded_gpu_s[queue] = funded_gpu_s.get(queue, 0.0) + (
                    stop - start) * per_pod * template["pods"]
        for (start, _, _), stop in zip(stints, workload["stops"], strict=False):
            assert stop["at_s"] >= start + template["minRuntime"]  # protection honoured
        if workload["finished_s"] is not None:
            ran = [end - start for start, end, _ in stints if end is not None]
            done = sum(ran) if template["resumable"] else ran[-1]
            assert abs(done - template["duration"]) < 1e-6
    held: dict[str, int] = {}
    for at in sorted(moments):
        for node, delta in moments[at].items():
            held[node] = held.get(node, 0) + delta
            assert 0 <= held[node] <= GPUS_PER_NODE
    for queue, seconds in funded_gpu_s.items():
        assert abs(result["queues"][queue]["delivered_gpu_hours"] - seconds / 3600) < 1e-4
    occupancy = result["summary"]["occupancy"]
    assert occupancy is None or 0 <= occupancy <= 1


def _job(name: str, count: int, pods: int, gpus: int, duration: int, min_runtime: int,
         priority: int, submit: int = 0) -> dict[str, Any]:
    return {"name": name, "queue": "q0", "submit": submit, "count": count, "every": 600,
            "pods": pods, "podRequests": {"nvidia.com/gpu": gpus}, "duration": duration,
            "minRuntime": min_runtime, "resumable": False, "priority": priority}


DRAIN_TAKES_SHORT_WORK = {
    "cluster": {"topology": [RACK], "nodeGroups": [
        {"count": 2, "namePrefix": "r0-n", "labels": {RACK: "r0"},
         "capacity": {"nvidia.com/gpu": GPUS_PER_NODE}}]},
    "queues": [{"name": "q0", "resources": {"nvidia.com/gpu": {"quota": 0,
                                                               "overQuotaWeight": 1}}}],
    "events": [], "history": {},
    "workloads": [_job("w0", 2, 1, 4, 1500, 600, 0), _job("w1", 1, 1, 1, 300, 0, 0),
                  _job("w2", 2, 2, 4, 300, 600, 1), _job("w3", 1, 1, 1, 1200, 600, 1, 1)],
}
"""A starving 2-pod gang (w2-1, from t=600) whose drain may take w0-1, 4-GPU work short enough
to be a debug job, once its protection ends at t=1200: that moment must be named, or a run
that jumps between named moments starts the gang only when w3 ends at t=1210, elsewhere."""


@CHECK
@given(scenarios(), st.integers(0, 3600))
@example(DRAIN_TAKES_SHORT_WORK, 0)
def test_skipping_quiet_cycle_boundaries_changes_nothing(scenario, starvation_bound):
    """Without time-based fair share nothing drifts, so jumping between the moments where
    something can change must decide exactly what a cycle at every boundary decides."""
    scenario = {key: value for key, value in scenario.items() if key != "history"}
    scenario["settings"] = {"cycle": CYCLE, "fairShare": {"window": 0},
                            "starvationBound": starvation_bound}
    parsed = parse_scenario(scenario, "inline.yaml")
    jumping = build_result(Simulation(parsed).run(), wall_s=0.0)
    every_boundary = build_result(Simulation(parsed, drift_cycles=1).run(), wall_s=0.0)
    for result in (jumping, every_boundary):
        del result["summary"]["cycles"]
    assert jumping == every_boundary


@CHECK
@given(scenarios(), st.integers(0, 3600))
def test_asking_for_no_reasons_changes_nothing(scenario, starvation_bound):
    """The loop's cycles are asked for no reasons (`CycleSettings.reasons`): the whole result
    is what cycles asked for them give, cycle for cycle."""
    scenario["settings"] = {"cycle": CYCLE, "starvationBound": starvation_bound}
    parsed = parse_scenario(scenario, "inline.yaml")
    assert build_result(Simulation(parsed).run(), wall_s=0.0) == build_result(
        Simulation(parsed, reasons=True).run(), wall_s=0.0)
