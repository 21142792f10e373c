"""The ceilings `bench_impact.py` prints beside each run: what no rule could beat, computed by
hand on scenarios small enough to check on paper."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from admitter.api.scenario_file import parse_scenario

_SPEC = importlib.util.spec_from_file_location(
    "bench_impact", Path(__file__).resolve().parents[2] / "benchmarks" / "bench_impact.py")
assert _SPEC is not None and _SPEC.loader is not None
bench_impact = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench_impact)

HOUR = 3600


def scenario(*workloads: dict[str, Any], nodes: int = 1,
             events: tuple[dict[str, Any], ...] = ()) -> Any:
    """`nodes` nodes of 8 GPUs, one queue, a 10-hour horizon."""
    return parse_scenario({
        "horizon": "10h",
        "cluster": {"nodeGroups": [{"count": nodes, "namePrefix": "n",
                                    "capacity": {"nvidia.com/gpu": 8}}]},
        "queues": [{"name": "team", "resources": {"nvidia.com/gpu": {"quota": 8}}}],
        "events": list(events),
        "workloads": [{"queue": "team", **w} for w in workloads],
    }, "test")


def job(name: str, submit: float, hours: float, pods: int = 1, funded: bool = True) -> dict:
    return {"name": name, "submit": f"{submit * HOUR:g}s", "duration": f"{hours * HOUR:g}s",
            "pods": pods, "podRequests": {"nvidia.com/gpu": 8},
            "minRuntime": "1h" if funded else "0s"}


def test_work_submitted_halfway_bounds_occupancy_at_half() -> None:
    # 8 GPUs from 5h to 10h at most: 40 of 80 GPU-hours; it is all the funded work, so all
    # of owed (40) could be delivered.
    assert bench_impact.ceilings(scenario(job("late", 5, 10))) == (0.5, 1.0)


def test_unfunded_work_fills_occupancy_but_not_owed() -> None:
    ceilings = bench_impact.ceilings(scenario(job("late", 5, 10), job("free", 0, 10, funded=False)))
    assert ceilings == (1.0, 1.0)


def test_funded_demand_above_capacity_but_late_bounds_owed() -> None:
    # Owed: min(80 GPU-hours, 8 + 80 funded) = 80. By 5h at most 8 GPU-hours ran, and 40 can
    # run after: 48 of 80.
    occupancy, owed = bench_impact.ceilings(
        scenario(job("early", 0, 1), job("big", 5, 5, pods=2), nodes=1))
    assert (occupancy, owed) == pytest.approx((0.6, 0.6))


def test_cordoned_hours_are_not_counted_as_capacity() -> None:
    # Two nodes, one cordoned from 5h: 120 schedulable GPU-hours, all of which a 16-GPU job
    # submitted at 0 can use.
    cordon = ({"at": "5h", "cordon": "n1"},)
    assert bench_impact.ceilings(scenario(job("gang", 0, 10, pods=2), nodes=2,
                                          events=cordon)) == pytest.approx((1.0, 1.0))
    # The same cordon lifted at 7h: 144 schedulable, 16 x 10 = 160 could run: still full.
    lifted = (*cordon, {"at": "7h", "uncordon": "n1"})
    assert bench_impact.ceilings(scenario(job("gang", 0, 10, pods=2), nodes=2,
                                          events=lifted)) == pytest.approx((1.0, 1.0))
    # A job submitted at 6h asks for 16 x 4 = 64 GPU-hours (all of owed), but n1 is cordoned
    # until 7h: at most 8 + 16 x 3 = 56 of the 144 can be used.
    assert bench_impact.ceilings(scenario(job("gang", 6, 10, pods=2), nodes=2, events=lifted)
                                 ) == pytest.approx((56 / 144, 56 / 64))
