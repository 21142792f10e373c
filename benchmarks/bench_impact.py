"""The scheduling contract on workloads nobody tuned for: Ai2-shaped scenarios, scored
independently.

Run: `.venv/bin/python benchmarks/bench_impact.py` simulates seeds 1–20 of the scenario family
(`ai2_family.py --seed N`, 7 days) and seeds 1–5 over 30 days, and scores every run with the
family's own `score.py` (not the simulator's accounting): one row per run, then the median and
the worst run of each figure. `--seeds 1 2 --days 7` runs a subset (`--days` may repeat:
`--days 7 --days 30`); `--scale` shrinks every scenario's workloads to a fraction (a quick look,
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

import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from admitter.api.scenario_file import parse_scenario  # noqa: E402
from admitter.sim.engine import Simulation  # noqa: E402
from admitter.sim.result import build_result  # noqa: E402

DEFAULT_RUNS = [(seed, 7) for seed in range(1, 21)] + [(seed, 30) for seed in range(1, 6)]
SCORE = re.compile(
    r"owed delivered (?P<owed>[\d.]+), teams (?P<worst>[\d.]+)-(?P<best>[\d.]+) .*?"
    r"occupancy (?P<occupancy>[\d.]+), debug p90 (?P<debug>[\d.]+) s, "
    r"wasted (?P<wasted>[\d.]+)% of funded, partial (?P<partial>\d+), "
    r"protected preemptions (?P<protected>\d+)")
FIGURES = ("owed", "worst", "occupancy", "debug", "wasted", "partial", "protected")
HIGHER_IS_BETTER = {"owed", "worst", "occupancy"}


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


def run_one(family: ModuleType, score: Path, seed: int, days: int, scale: float,
            folder: Path) -> dict[str, Any]:
    """Generate, simulate (in process, the compiled core), score with score.py."""
    scenario = _scaled(family.generate(seed, days), scale)
    path = folder / f"seed{seed}-{days}d.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    started = time.perf_counter()
    outcome = Simulation(parse_scenario(scenario, str(path))).run()
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
    row.update(seed=seed, days=days, gpus=gpus, wall=wall, met=(
        row["owed"] >= 0.98 and row["worst"] >= (0.95 if goal == "month" else 0.90)
        and row["occupancy"] >= 0.97 and row["debug"] <= 60 and row["wasted"] <= 2
        and row["partial"] == 0 and row["protected"] == 0))
    return row


def _cells(row: dict[str, Any]) -> list[str]:
    return [f"{row['owed']:.1%}", f"{row['worst']:.2f}", f"{row['occupancy']:.1%}",
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
    args = parser.parse_args()
    family_dir = _family_dir(args.scenarios)
    family = _load(family_dir / "ai2_family.py")
    runs = DEFAULT_RUNS
    if args.seeds or args.days:
        runs = [(seed, days) for days in (args.days or [7])
                for seed in (args.seeds or range(1, 21 if days < 30 else 6))]
    table = Table(title="ai2-family scenarios, scored by score.py")
    for column in ("seed", "days", "GPUs", "owed delivered", "worst team", "occupancy",
                   "debug p90", "wasted", "partial gangs", "protected preemptions",
                   "goal met", "wall"):
        table.add_column(column, justify="right")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-impact-") as folder:
        for seed, days in runs:
            row = run_one(family, family_dir / "score.py", seed, days, args.scale, Path(folder))
            rows.append(row)
            table.add_row(str(seed), str(days), str(row["gpus"]), *_cells(row),
                          "yes" if row["met"] else "no", f"{row['wall']:.1f} s")
    median, worst = summary(rows)
    table.add_section()
    table.add_row("median", "", "", *_cells(median), "", "")
    table.add_row("worst", "", "", *_cells(worst), "", "")
    Console(width=160).print(table)
    met = sum(1 for row in rows if row["met"])
    print(f"summary: {met}/{len(rows)} runs meet every goal; median owed delivered "
          f"{median['owed']:.1%} (worst {worst['owed']:.1%}), worst team "
          f"{median['worst']:.2f} (worst {worst['worst']:.2f}), occupancy "
          f"{median['occupancy']:.1%} (worst {worst['occupancy']:.1%}), debug p90 "
          f"{median['debug']:.0f} s (worst {worst['debug']:.0f} s), wasted "
          f"{median['wasted']:.1f} % (worst {worst['wasted']:.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
