"""Time `admitter simulate` on 30 days of a 1,024-GPU cluster with 50,000 workloads.

Run: `.venv/bin/python benchmarks/bench_simulator.py [days] [--cycle 10s]`; fewer days scale the
workloads down in proportion (50,000 × days / 30) for a quick look; `--cycle` sets the scenario's
admission cycle period (10 s, the controller's default, unless given) to measure what a coarser
cycle trades: fewer cycles against longer waits. The backlog and the usage history build up
over the first week (the fair-share window), so the CPU of the last day of a run of 8 days or
more is the steady rate a 30-day run keeps. Profile with
`.venv/bin/pyinstrument benchmarks/bench_simulator.py 2` after deleting `admitter/core/*.so`
and `admitter/sim/*.so` (compiled code is invisible to a Python profiler; `perf record` sees
its C functions).

The cluster: 128 nodes × 8 GPUs in 16 racks of 8 nodes, 4 racks per block. 24 teams under 3
programs, quotas summing to the cluster. Per team, streams with seeded offsets: debug jobs
(1–2 GPUs, 20 min, 60 % of workloads), one-node experiments (2–4 h), multi-node training
gangs (4–8 nodes, 12–24 h, one block) and unfunded 4-GPU jobs: about the cluster's capacity in
GPU-hours, arriving with a backlog, so work is always pending.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

import common  # noqa: F401  (tests/builders on the path)
from rich.console import Console
from rich.table import Table

from admitter.api.scenario_file import parse_scenario
from admitter.core.incremental import IncrementalCore
from admitter.sim.checks import check_simulatable
from admitter.sim.engine import Simulation
from admitter.sim.result import build_result

from builders.core import BLOCK, RACK

DAY = 86400.0
WORKLOADS_PER_30_DAYS = 50_000
PROGRAMS = 3
TEAMS_PER_PROGRAM = 8
STREAMS: dict[str, float] = {"debug": 0.6, "experiment": 0.33, "training": 0.006,
                             "unfunded": 0.064}
"""Share of all workloads per class."""


def _stream(kind: str, team: str, count: int, days: float, rng: random.Random) -> dict[str, Any]:
    every = days * DAY / count
    stream: dict[str, Any] = {
        "name": f"{team}-{kind}", "queue": team, "class": kind, "count": count,
        "every": every, "submit": rng.uniform(0, min(every, 3600.0)),
    }
    if kind == "debug":
        shape = {"podRequests": {"nvidia.com/gpu": rng.choice([1, 2])}, "duration": "20m",
                 "minRuntime": "15m", "resumable": False, "priority": 10}
    elif kind == "experiment":
        shape = {"podRequests": {"nvidia.com/gpu": 8}, "duration": rng.choice(["2h", "3h", "4h"]),
                 "minRuntime": "1h"}
    elif kind == "training":
        shape = {"pods": rng.choice([4, 8]), "podRequests": {"nvidia.com/gpu": 8},
                 "duration": rng.choice(["12h", "24h"]), "minRuntime": "6h", "priority": 20,
                 "topology": {"required": BLOCK, "preferred": RACK}}
    else:
        shape = {"podRequests": {"nvidia.com/gpu": 4}, "duration": "6h", "priority": -1}
    return {**stream, **shape}


def scenario_data(days: float, cycle: str = "10s") -> dict[str, Any]:
    """The benchmark scenario as a scenario file's content."""
    rng = random.Random(2026)
    teams = [f"p{p}-t{t}" for p in range(PROGRAMS) for t in range(TEAMS_PER_PROGRAM)]
    total = round(WORKLOADS_PER_30_DAYS * days / 30)
    queues: list[dict[str, Any]] = []
    for p in range(PROGRAMS):
        quota = 1024 // PROGRAMS + (1024 % PROGRAMS if p == 0 else 0)
        queues.append({"name": f"p{p}", "resources": {"nvidia.com/gpu": {
            "quota": quota, "overQuotaWeight": quota}}})
    for team in teams:
        quota = 1024 // len(teams) + (1024 % len(teams) if team == teams[0] else 0)
        queues.append({"name": team, "parent": team.split("-")[0], "resources": {
            "nvidia.com/gpu": {"quota": quota, "overQuotaWeight": quota}}})
    workloads = [
        _stream(kind, team, max(1, round(total * share / len(teams))), days, rng)
        for team in teams for kind, share in STREAMS.items()
    ]
    nodes = [
        {"count": 8, "namePrefix": f"b{r // 4}-r{r}-n", "capacity": {"nvidia.com/gpu": 8},
         "labels": {BLOCK: f"b{r // 4}", RACK: f"r{r}"}}
        for r in range(16)
    ]
    return {
        "name": f"bench-{days:g}d",
        "horizon": days * DAY,
        "settings": {"cycle": cycle, "fairShare": {"window": "7d", "kValue": 1}},
        "cluster": {"topology": [BLOCK, RACK], "nodeGroups": nodes},
        "queues": queues,
        "history": {team: rng.uniform(0.5, 1.5) * 1024 / len(teams) * 168 for team in teams},
        "workloads": workloads,
    }


def main(days: float, cycle: str) -> None:
    started = time.perf_counter()
    scenario = parse_scenario(scenario_data(days, cycle), "bench")
    check_simulatable(scenario, "bench")
    loaded = time.perf_counter()
    cpu = time.process_time()
    days_done = [0]
    last_day = [cpu]
    """CPU clock when the last simulated day began."""

    def progress(now: float, finished: int) -> None:
        """A line per simulated day on stderr: a long run shows it is moving."""
        if now >= (days_done[0] + 1) * DAY:
            days_done[0] = int(now // DAY)
            last_day[0] = time.process_time()
            print(f"day {days_done[0]}: {finished:,} finished, "
                  f"{last_day[0] - cpu:.0f} s cpu", file=sys.stderr, flush=True)

    in_core = [0.0]
    """CPU seconds inside the decision core; the rest is the simulator's own loop."""

    def timed(core: IncrementalCore, *arguments: Any) -> Any:
        began = time.process_time()
        try:
            return core.cycle(*arguments)
        finally:
            in_core[0] += time.process_time() - began

    outcome = Simulation(scenario, decide=timed).run(progress)
    simulated, ended = time.perf_counter(), time.process_time()
    cpu = ended - cpu
    result = build_result(outcome, simulated - loaded)
    summary = result["summary"]
    reported = time.perf_counter()
    table = Table(title=f"simulate: {days:g} days, 1,024 GPUs, {cycle} cycle",
                  caption="wall − cpu is what a busy machine adds")
    figures = {
        "workloads": f"{summary['workloads']:,}",
        "cycles run": f"{outcome.cycles:,}",
        "load + check s": f"{loaded - started:.2f}",
        "simulate wall s": f"{simulated - loaded:.2f}",
        "simulate cpu s": f"{cpu:.2f}",
        "ms per cycle (cpu)": f"{cpu / max(outcome.cycles, 1) * 1e3:.2f}",
        "of which core / simulator s": f"{in_core[0]:.2f} / {cpu - in_core[0]:.2f}",
        "cpu s, last day": f"{ended - last_day[0]:.2f}",
        "result s": f"{reported - simulated:.2f}",
        "occupancy": f"{summary['occupancy']:.1%}",
        "owed delivered": f"{summary['owed_delivered_ratio']:.1%}",
        "unfinished": f"{summary['unfinished']:,}",
        "preemptions": f"{summary['preemptions']:,}",
        **{f"{name} wait p50 / p90 s": f"{c['wait_p50_s']:,.0f} / {c['wait_p90_s']:,.0f}"
           for name, c in sorted(result["classes"].items())},
    }
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in figures.items():
        table.add_row(name, value)
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("days", type=float, nargs="?", default=30.0)
    parser.add_argument("--cycle", default="10s", help="admission cycle period, e.g. 30s")
    arguments = parser.parse_args()
    main(arguments.days, arguments.cycle)
