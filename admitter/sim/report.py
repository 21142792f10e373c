"""The readable report of a result: the same tables for the terminal (rich) and `report.md`.

Both are rendered from `result.json`'s content, so what people read and what tools parse can
never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from admitter.api.duration import format_duration
from admitter.sim.result import Result

DASH = "–"


@dataclass(frozen=True, slots=True)
class Section:
    """One table; columns after the first are numbers, aligned right."""

    title: str
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return DASH
    return format_duration(round(seconds) if seconds >= 60 else round(seconds, 1))


def _percent(ratio: float | None) -> str:
    return DASH if ratio is None else f"{ratio:.1%}"


def _hours(value: float) -> str:
    return f"{value:,.1f}"


def sections(result: Result) -> list[Section]:
    """Summary, per queue and per class tables."""
    summary = result["summary"]
    overview = [
        ("simulated", _duration(summary["simulated_s"])),
        ("GPUs", str(summary["gpus"])),
        ("workloads (unfinished)", f"{summary['workloads']} ({summary['unfinished']})"),
        ("occupancy", _percent(summary["occupancy"])),
        ("owed GPU-hours delivered", _percent(summary["owed_delivered_ratio"])),
        ("owed GPU-hours", _hours(summary["owed_gpu_hours"])),
        ("delivered GPU-hours (funded)", _hours(summary["delivered_gpu_hours"])),
        ("wasted GPU-hours (of delivered)",
         f"{_hours(summary['wasted_gpu_hours'])} ({_percent(summary['wasted_fraction'])})"),
        ("unfunded share of delivered time", _percent(summary["unfunded_fraction"])),
        ("preemptions", str(summary["preemptions"])),
        ("cycles run", str(summary["cycles"])),
        ("wall time", f"{summary['wall_s']:.2f}s"),
    ]
    queues = [
        [
            name,
            _hours(q["owed_gpu_hours"]),
            _hours(q["delivered_gpu_hours"]),
            _percent(q["delivered_over_owed"]),
            _hours(q["unfunded_gpu_hours"]),
            _duration(q["wait_p50_s"]),
            _duration(q["wait_p90_s"]),
            str(q["preemptions"]),
            str(q["never_started"]),
        ]
        for name, q in result["queues"].items()
    ]
    classes = [
        [name, str(c["count"]), _duration(c["wait_p50_s"]), _duration(c["wait_p90_s"]),
         str(c["never_started"])]
        for name, c in sorted(result["classes"].items())
    ]
    return [
        Section(f"Simulation of {summary['scenario']}", ("figure", "value"), overview),
        Section(
            "Per queue: owed vs delivered GPU-hours",
            ("queue", "owed", "delivered", "ratio", "unfunded", "p50 wait", "p90 wait",
             "preempted", "unstarted"),
            queues,
        ),
        Section("Per class: waits", ("class", "count", "p50 wait", "p90 wait", "unstarted"),
                classes),
    ]


def print_report(result: Result, console: Console) -> None:
    for section in sections(result):
        table = Table(title=section.title, title_justify="left")
        for index, header in enumerate(section.headers):
            table.add_column(header, justify="left" if index == 0 else "right")
        for row in section.rows:
            table.add_row(*row)
        console.print(table)


def markdown(result: Result, plots: Sequence[str] = ()) -> str:
    """`report.md`: the tables, then the plots by file name."""
    lines: list[str] = []
    for section in sections(result):
        lines += [f"## {section.title}", ""]
        lines.append("| " + " | ".join(section.headers) + " |")
        lines.append("| --- " + "| ---: " * (len(section.headers) - 1) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in section.rows]
        lines.append("")
    for plot in plots:
        lines += [f"![{plot}]({plot})", ""]
    return "\n".join(lines)
