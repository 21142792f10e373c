"""The scheduling contract on workloads nobody tuned for: Ai2-shaped scenarios, scored
independently.

Run: `.venv/bin/python benchmarks/bench_impact.py` simulates seeds 1–20 of the scenario family
(`ai2_family.py --seed N`, 7 days) and seeds 1–5 over 30 days, and scores every run with the
family's own `score.py` (not the simulator's accounting): one row per run, then the median and
the worst run of each figure. `--seeds 1 2 --days 7` runs a subset (`--days` may repeat:
`--days 7 --days 30`); `--whole-nodes` runs the family's whole-node variant (no debug jobs, every
pod a whole 8-GPU node); `--scale` shrinks every scenario's workloads to a fraction (a quick look,
figures not comparable). The family lives outside the repository (`--scenarios DIR`, by default
`../shared/scenarios` next to the checkout or one level up).

Ai2's production figures to compare with: 98 % of owed GPU-hours delivered, every team ≥ 90 %
over a week (≥ 95 % over 30 days), occupancy ≥ 97 %, debug p90 wait ≤ 60 s, wasted ≤ 2 % of
funded GPU-hours, no partial gang, no preemption inside a protected min runtime.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from admitter.api.convert import scenario_nodes  # noqa: E402
from admitter.api.scenario import Scenario  # noqa: E402
from admitter.api.scenario_file import parse_scenario  # noqa: E402
from admitter.core.model import GPU  # noqa: E402
from admitter.sim.engine import Simulation  # noqa: E402
from admitter.sim.result import build_result  # noqa: E402

DEFAULT_RUNS = [(seed, 7) for seed in range(1, 21)] + [(seed, 30) for seed in range(1, 6)]
SCORE = re.compile(
    r"owed delivered (?P<owed>[\d.]+), teams (?P<worst>[\d.]+)-(?P<best>[\d.]+) .*?"
    r"occupancy (?P<occupancy>[\d.]+), debug p90 (?P<debug>[\d.]+) s, "
    r"wasted (?P<wasted>[\d.]+)% of funded, partial (?P<partial>\d+), "
    r"protected preemptions (?P<protected>\d+)")
FIGURES = ("owed", "owed_ceiling", "worst", "occupancy", "occupancy_ceiling", "debug", "wasted",
           "partial", "protected")
OWED_GOAL, OCCUPANCY_GOAL = 0.98, 0.97
CEILING_STEP = 1800.0
"""Seconds between the moments at which `ceilings` splits the run."""
HIGHER_IS_BETTER = {"owed", "owed_ceiling", "worst", "occupancy", "occupancy_ceiling"}


def _family_dir(given: Path | None) -> Path:
    for candidate in ([given] if given else [ROOT.parent / "shared" / "scenarios",
                                             ROOT.parent.parent / "shared" / "scenarios"]):
        if (candidate / "ai2_family.py").exists() and (candidate / "score.py").exists():
            return candidate
    raise SystemExit("ai2_family.py and score.py not found: pass --scenarios DIR")


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scaled(scenario: dict[str, Any], scale: float) -> dict[str, Any]:
    """Every `1/scale`-th workload only (a quick look: the demand no longer matches the
    cluster, so the figures mean little)."""
    if scale >= 1:
        return scenario
    step = max(1, round(1 / scale))
    return {**scenario, "workloads": scenario["workloads"][::step]}


def ceilings(scenario: Scenario) -> tuple[float, float]:
    """Occupancy and owed delivered that no rule could beat on `scenario`, as score.py counts
    them: a workload cannot run before it is submitted, so by any moment t at most
    sum(gpus x min(runnable time, t - submit)) GPU-seconds can have been used, and after t at
    most the schedulable capacity. The least such sum over t (every `CEILING_STEP`, ignoring
    gangs, topology and min runtimes, so the true optimum may be lower) bounds the run's use;
    counting funded work only bounds the funded GPU-hours, and so owed delivered (owed sums to
    the schedulable GPU-hours, or to the funded work if that is less)."""
    end = scenario.horizon or 0.0
    gpus = {node.name: node.allocatable.get(GPU, 0) for node in scenario_nodes(scenario)}
    moments = np.arange(0.0, end + CEILING_STEP / 2, CEILING_STEP)
    schedulable = sum(gpus.values()) * (end - moments)  # GPU-seconds from each moment on
    cordoned: dict[str, float] = {}
    closed: list[tuple[str, float, float]] = []
    for event in sorted(scenario.events, key=lambda e: e.at):
        if event.cordon is not None:
            cordoned.setdefault(event.cordon, min(event.at, end))
        elif event.uncordon in cordoned:
            closed.append((event.uncordon, cordoned.pop(event.uncordon), min(event.at, end)))
    for node, start, stop in closed + [(n, at, end) for n, at in cordoned.items()]:
        schedulable -= gpus[node] * np.clip(stop - np.maximum(moments, start), 0, None)
    demand = np.array([(w.pods * int(w.pod_requests.get(GPU, 0)), w.submit,
                        max(0.0, min(w.duration, end - w.submit)), w.min_runtime > 0)
                       for w in scenario.workloads], dtype=float).reshape(-1, 4)
    per_gpu, submit, runnable, funded = demand.T
    used_by = np.array([np.minimum(runnable, np.clip(t - submit, 0, None)) * per_gpu
                        for t in moments]).reshape(len(moments), -1)
    occupancy = float((used_by.sum(axis=1) + schedulable).min() / schedulable[0])
    funded_bound = float((used_by[:, funded > 0].sum(axis=1) + schedulable).min())
    owed = min(float(schedulable[0]), float((per_gpu * runnable)[funded > 0].sum()))
    return min(1.0, occupancy), min(1.0, funded_bound / owed) if owed > 0 else 1.0


def run_one(family: ModuleType, score: Path, seed: int, days: int, scale: float,
            folder: Path, whole_nodes: bool = False) -> dict[str, Any]:
    """Generate, simulate (in process, the compiled core), score with score.py."""
    scenario = _scaled(family.generate(seed, days, whole_nodes=whole_nodes), scale)
    path = folder / f"seed{seed}-{days}d.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    parsed = parse_scenario(scenario, str(path))
    started = time.perf_counter()
    outcome = Simulation(parsed).run()
    wall = time.perf_counter() - started
    result_path = folder / f"seed{seed}-{days}d.json"
    result_path.write_text(json.dumps(build_result(outcome, wall)))
    goal = "month" if days >= 30 else "week"
    line = subprocess.run([sys.executable, str(score), str(path), str(result_path), "--goal",
                           goal], capture_output=True, text=True, check=False).stdout
    match = SCORE.search(line)
    if match is None:
        raise SystemExit(f"score.py printed no figures for seed {seed}: {line!r}")
    row: dict[str, Any] = {name: float(value) for name, value in match.groupdict().items()}
    gpus = sum(g["count"] * g["capacity"]["nvidia.com/gpu"]
               for g in scenario["cluster"]["nodeGroups"])
    occupancy_ceiling, owed_ceiling = ceilings(parsed)
    row.update(seed=seed, days=days, gpus=gpus, wall=wall, occupancy_ceiling=occupancy_ceiling,
               owed_ceiling=owed_ceiling)
    row["misses"] = misses(row, goal)
    return row


def misses(row: dict[str, Any], goal: str) -> list[str]:
    """The goals `row` misses; "(ceiling)" where no rule could meet it on this scenario."""
    missed = []
    for figure, reached, ceiling in (("owed", row["owed"] >= OWED_GOAL, row["owed_ceiling"]),
                                     ("occupancy", row["occupancy"] >= OCCUPANCY_GOAL,
                                      row["occupancy_ceiling"])):
        if not reached:
            goal_value = OWED_GOAL if figure == "owed" else OCCUPANCY_GOAL
            missed.append(f"{figure} (ceiling)" if ceiling < goal_value else figure)
    if row["worst"] < (0.95 if goal == "month" else 0.90):
        missed.append("team")
    for figure, bound in (("debug", 60), ("wasted", 2), ("partial", 0), ("protected", 0)):
        if row[figure] > bound:
            missed.append(figure)
    return missed


def _cells(row: dict[str, Any]) -> list[str]:
    return [f"{row['owed']:.1%}", f"{row['owed_ceiling']:.1%}", f"{row['worst']:.2f}",
            f"{row['occupancy']:.1%}", f"{row['occupancy_ceiling']:.1%}",
            f"{row['debug']:.0f} s", f"{row['wasted']:.1f} %", f"{row['partial']:.0f}",
            f"{row['protected']:.0f}"]


def summary(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per figure, the median over the runs and the worst run's value."""
    median = {name: statistics.median(r[name] for r in rows) for name in FIGURES}
    worst = {name: (min if name in HIGHER_IS_BETTER else max)(r[name] for r in rows)
             for name in FIGURES}
    return median, worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", help="seeds (default 1–20 / 1–5)")
    parser.add_argument("--days", type=int, action="append", help="7 and/or 30 (default both)")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of workloads kept")
    parser.add_argument("--scenarios", type=Path, help="folder of ai2_family.py and score.py")
    parser.add_argument("--whole-nodes", action="store_true",
                        help="the family's whole-node variant: no debug jobs, 8-GPU pods")
    args = parser.parse_args()
    family_dir = _family_dir(args.scenarios)
    family = _load(family_dir / "ai2_family.py")
    runs = DEFAULT_RUNS
    if args.seeds or args.days:
        runs = [(seed, days) for days in (args.days or [7])
                for seed in (args.seeds or range(1, 21 if days < 30 else 6))]
    table = Table(title="ai2-family scenarios, scored by score.py")
    for column in ("seed", "days", "GPUs", "owed delivered", "owed ceiling", "worst team",
                   "occupancy", "occupancy ceiling", "debug p90", "wasted", "partial gangs",
                   "protected preemptions", "goals missed", "wall"):
        table.add_column(column, justify="right", no_wrap=column == "goals missed")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-impact-") as folder:
        for seed, days in runs:
            row = run_one(family, family_dir / "score.py", seed, days, args.scale, Path(folder),
                          args.whole_nodes)
            rows.append(row)
            table.add_row(str(seed), str(days), str(row["gpus"]), *_cells(row),
                          ", ".join(row["misses"]) or "none", f"{row['wall']:.1f} s")
    median, worst = summary(rows)
    table.add_section()
    table.add_row("median", "", "", *_cells(median), "", "")
    table.add_row("worst", "", "", *_cells(worst), "", "")
    Console(width=220).print(table)
    met = sum(1 for row in rows if not row["misses"])
    unreachable = sum(1 for row in rows if any("(ceiling)" in m for m in row["misses"]))
    print(f"summary: {met}/{len(rows)} runs meet every goal, {unreachable} cannot (a ceiling "
          f"below the goal); median owed delivered {median['owed']:.1%} of a "
          f"{median['owed_ceiling']:.1%} ceiling (worst {worst['owed']:.1%}), worst team "
          f"{median['worst']:.2f} (worst {worst['worst']:.2f}), occupancy "
          f"{median['occupancy']:.1%} of a {median['occupancy_ceiling']:.1%} ceiling (worst "
          f"{worst['occupancy']:.1%}), debug p90 "
          f"{median['debug']:.0f} s (worst {worst['debug']:.0f} s), wasted "
          f"{median['wasted']:.1f} % (worst {worst['wasted']:.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
