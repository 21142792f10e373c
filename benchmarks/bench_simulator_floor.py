"""How cheap can a simulator cycle get when the core rebuilds its state every cycle?

Run: `.venv/bin/python benchmarks/bench_simulator_floor.py [days] [--from DAY] [--cycles N]`.
Simulates the `bench_simulator` scenario for `days` (5), keeps the snapshots of the first N
(2,000) cycles from day `--from` (3: the steady state, the fair-share window filling), then
replays them through the compiled from-scratch core (`run_cycle`) three ways: as they were;
with only the newest pending workload (what a cycle would cost if every workload already tried
were parked, as Kueue parks inadmissible ones); and with nothing pending (building the cycle's
state alone: node checks, fair share, quota ledger). Each replay runs once to warm up, then
three times timed. The last figure times the number of cycles a 30-day run needs is the floor
of a core that starts every cycle from the snapshot.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from typing import Any

from bench_simulator import scenario_data
from rich.console import Console
from rich.table import Table

from admitter.api.scenario import Scenario
from admitter.api.scenario_file import parse_scenario
from admitter.core.cycle import run_cycle
from admitter.core.decisions import CycleResult, Snapshot
from admitter.core.incremental import IncrementalCore
from admitter.core.model import Phase
from admitter.sim.engine import Simulation

DAY = 86400.0
CYCLES_IN_30_DAYS = 113_720
"""Cycles the 30-day `bench_simulator` run needs at the 10 s cycle."""


def capture(scenario: Scenario, start_day: float, limit: int) -> list[Snapshot]:
    """The snapshots the simulator hands the core from `start_day` on."""
    captured: list[Snapshot] = []

    def keep(core: IncrementalCore, now: float, *moment: Any) -> CycleResult:
        if now >= start_day * DAY and len(captured) < limit:
            captured.append(core.snapshot(now, *moment))
        return core.cycle(now, *moment)

    Simulation(scenario, decide=keep).run()
    return captured


def replay(snapshots: list[Snapshot]) -> list[float]:
    """CPU milliseconds per snapshot, the best of three timed rounds after a warm-up."""
    best = [float("inf")] * len(snapshots)
    for round_ in range(4):
        for index, snapshot in enumerate(snapshots):
            started = time.process_time()
            run_cycle(snapshot)
            if round_:
                best[index] = min(best[index], (time.process_time() - started) * 1e3)
    return best


def without_pending(snapshot: Snapshot, keep_newest: bool) -> Snapshot:
    admitted = [w for w in snapshot.workloads if w.phase is Phase.ADMITTED]
    pending = [w for w in snapshot.workloads if w.phase is Phase.PENDING]
    newest = sorted(pending, key=lambda w: (w.submitted_at, w.key))[-1:] if keep_newest else []
    return replace(snapshot, workloads=admitted + newest)


def main(days: float, start_day: float, limit: int) -> None:
    scenario = parse_scenario(scenario_data(days), "bench")
    snapshots = capture(scenario, start_day, limit)
    pending = statistics.mean(
        sum(1 for w in s.workloads if w.phase is Phase.PENDING) for s in snapshots)
    running = statistics.mean(
        sum(1 for w in s.workloads if w.phase is Phase.ADMITTED) for s in snapshots)
    table = Table(title=f"{len(snapshots):,} cycles from day {start_day:g}: "
                        f"{pending:.0f} pending, {running:.0f} running on average")
    for column in ("replayed", "mean ms", "p10 ms", "p50 ms", "p90 ms",
                   f"× {CYCLES_IN_30_DAYS:,} cycles, s"):
        table.add_column(column, justify="right" if column != "replayed" else "left")
    variants = {
        "as captured": snapshots,
        "newest pending only": [without_pending(s, True) for s in snapshots],
        "nothing pending": [without_pending(s, False) for s in snapshots],
    }
    for name, variant in variants.items():
        times = sorted(replay(variant))
        mean = statistics.mean(times)
        table.add_row(name, f"{mean:.3f}", *(f"{times[int(q * (len(times) - 1))]:.3f}"
                                              for q in (0.1, 0.5, 0.9)),
                      f"{mean * CYCLES_IN_30_DAYS / 1e3:.0f}")
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("days", type=float, nargs="?", default=5.0)
    parser.add_argument("--from", dest="start", type=float, default=3.0)
    parser.add_argument("--cycles", type=int, default=2000)
    arguments = parser.parse_args()
    main(arguments.days, arguments.start, arguments.cycles)
