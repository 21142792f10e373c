"""`admitter simulate SCENARIO`: replay a scenario through the controller's decision core."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from admitter.api.duration import format_duration
from admitter.api.errors import InputError
from admitter.api.scenario_file import load_scenario
from admitter.dashboard import simulated
from admitter.dashboard.render import overview
from admitter.sim.checks import check_simulatable
from admitter.sim.engine import Outcome, Simulation
from admitter.sim.report import markdown, print_report
from admitter.sim.result import build_result, write_result
from admitter.sim.workloads import instance_names

SIM_EXTRA = "pip install 'admitter[sim]'"
"""What installs the plots' libraries, which the controller does without."""
REPORT_WIDTH = 120
"""Columns for the report when piped, where rich would otherwise assume 80 and cut names."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "simulate",
        help="simulate a scenario with the real decision core: owed vs delivered GPU-hours, "
        "waits, preemptions, occupancy",
    )
    parser.add_argument("scenario", help="scenario YAML file")
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="write result.json, report.md and PNG plots here"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write result.json here")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="permutes the order in which simultaneous submissions and the nodes are handed "
        "to the core; the result must not depend on it (default 0)",
    )
    parser.set_defaults(handler=run)


def _simulate(simulation: Simulation, total: int, console: Console) -> Outcome:
    """Run with a progress bar on stderr, shown only on a terminal."""
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True,
                  disable=not console.is_terminal) as progress:
        task = progress.add_task("simulating", total=total)

        def tick(now: float, finished: int) -> None:
            progress.update(task, completed=finished,
                            description=f"simulated {format_duration(round(now))}")

        return simulation.run(tick)


def _require_plots() -> None:
    """Fail before simulating, not after: `--out` draws plots with the `sim` extra."""
    try:
        import matplotlib  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as error:
        raise InputError("admitter simulate --out", [(
            "plots", f"need {error.name}, which the `sim` extra installs: {SIM_EXTRA}"
        )]) from error


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        _require_plots()
    scenario = load_scenario(args.scenario)
    check_simulatable(scenario, args.scenario)
    total = sum(len(instance_names(template)) for template in scenario.workloads)
    started = time.perf_counter()
    outcome = _simulate(Simulation(scenario, args.seed), total, Console(stderr=True))
    result = build_result(outcome, time.perf_counter() - started)
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, REPORT_WIDTH)
    print_report(result, console)
    if args.json is not None:
        write_result(result, args.json)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        write_result(result, args.out / "result.json")
        from admitter.sim.plots import write_plots  # matplotlib takes seconds to import

        accounting = outcome.accounting
        plots = write_plots(result, accounting.timeline, accounting.leaves, args.out)
        (args.out / "report.md").write_text(markdown(result, plots))
        (args.out / "dashboard.html").write_text(overview(simulated.board(outcome, result)))
    return 0
