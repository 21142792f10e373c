"""How much of each simulator cycle repeats the one before: how many cycles decide nothing, and
what they cost (BENCHMARKS.md, "What a simulator cycle costs at least").

Run: `.venv/bin/python benchmarks/bench_simulator_repeats.py [days]` (default 5; the first two
days, while the backlog builds up, are left out of the figures).

The benchmark scenario of `bench_simulator.py`, with the engine's core
(`IncrementalCore.cycle`) wrapped: each cycle's pending reasons and admissions are compared
with the previous cycle's.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

import bench_simulator
from rich.console import Console
from rich.table import Table

from admitter.api.scenario_file import parse_scenario
from admitter.core.decisions import CycleResult
from admitter.core.incremental import IncrementalCore
from admitter.sim.engine import Simulation

DAY = 86400.0
WARM_UP_DAYS = 2


def main(days: float) -> None:
    counts: Counter[str] = Counter()
    seconds: dict[str, float] = {"acting": 0.0, "idle": 0.0}
    previous: dict[str, str] = {}

    def observed(core: IncrementalCore, now: float, *moment: Any) -> CycleResult:
        nonlocal previous
        began = time.perf_counter()
        result = core.cycle(now, *moment)
        spent = time.perf_counter() - began
        if now >= WARM_UP_DAYS * DAY:
            acted = "acting" if result.admissions or result.evictions else "idle"
            counts["cycles"] += 1
            counts[acted] += 1
            seconds[acted] += spent
            counts["pending"] += len(result.pending)
            changed = sum(1 for p in result.pending
                          if p.key in previous and previous[p.key] != p.reason)
            counts["cycles where a pending reason changed"] += changed > 0
            for admission in result.admissions:
                counts["admitted, pending before" if admission.key in previous
                       else "admitted, new since the last cycle"] += 1
        previous = {p.key: p.reason for p in result.pending}
        return result

    scenario = parse_scenario(bench_simulator.scenario_data(days), "bench")
    Simulation(scenario, decide=observed, reasons=True).run()
    cycles = max(counts["cycles"], 1)
    table = Table(title=f"simulator cycles after day {WARM_UP_DAYS} of {days:g}")
    table.add_column("figure")
    table.add_column("total", justify="right")
    table.add_column("per cycle", justify="right")
    for name in ("cycles", "acting", "idle", "pending", "cycles where a pending reason changed",
                 "admitted, new since the last cycle", "admitted, pending before"):
        table.add_row(name, f"{counts[name]:,}", f"{counts[name] / cycles:.3f}")
    for kind in ("acting", "idle"):
        table.add_row(f"ms per {kind} cycle", "",
                      f"{seconds[kind] / max(counts[kind], 1) * 1e3:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 5.0)
