"""Run a simulator scenario written inline and look at its result."""

from __future__ import annotations

from typing import Any

import yaml

from admitter.api.scenario_file import parse_scenario
from admitter.sim.checks import check_simulatable
from admitter.sim.engine import Simulation
from admitter.sim.result import Result, build_result


def simulate(text: str, seed: int = 0) -> Result:
    scenario = parse_scenario(yaml.safe_load(text), "inline.yaml")
    check_simulatable(scenario, "inline.yaml")
    return build_result(Simulation(scenario, seed).run(), wall_s=0.0)


def workload(result: Result, name: str) -> dict[str, Any]:
    return next(w for w in result["workloads"] if w["name"] == name)


def starts(result: Result, name: str) -> list[tuple[float, dict[str, int]]]:
    return [(s["at_s"], s["nodes"]) for s in workload(result, name)["starts"]]


def stops(result: Result, name: str) -> list[tuple[float, str, str | None]]:
    return [(s["at_s"], s["reason"], s["by"]) for s in workload(result, name)["stops"]]
