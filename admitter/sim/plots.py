"""PNG plots of a run: allocation over time, owed vs delivered, and waits per class."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from admitter.sim.accounting import Mark
from admitter.sim.result import HOUR, Result

COLORS = [plt.get_cmap("tab20")(i) for i in range(20)]
"""Twenty distinct colours: the default cycle repeats after ten queues."""
BINS = 600
"""Time bins of the allocation plot: each shows the time-average allocation over its span."""


def write_plots(result: Result, timeline: Sequence[Mark], leaves: Sequence[str],
                out: Path) -> list[str]:
    """Write the PNGs into `out`; returns their file names."""
    plots = {
        "allocation.png": lambda: _allocation(result, timeline, leaves),
        "owed_delivered.png": lambda: _owed_delivered(result),
        "waits.png": lambda: _waits(result),
    }
    for name, draw in plots.items():
        figure = draw()
        figure.savefig(out / name, dpi=110, bbox_inches="tight")
        plt.close(figure)
    return list(plots)


def binned(timeline: Sequence[Mark], end: float, bins: int) -> tuple[np.ndarray, np.ndarray,
                                                                     np.ndarray]:
    """Bin edges, time-averaged GPUs held per leaf (bins × leaves), and capacity per bin.

    The integral of a step function is linear between its steps, so interpolating the
    cumulative integral at the bin edges gives exact averages.
    """
    at = np.array([mark.at for mark in timeline] + [end])
    held = np.array([mark.held for mark in timeline], dtype=float)
    capacity = np.array([mark.capacity for mark in timeline], dtype=float)
    spans = np.diff(at)[:, None]
    edges = np.linspace(0.0, end, bins + 1)
    width = np.diff(edges)[:, None]

    def average(series: np.ndarray) -> np.ndarray:
        cumulative = np.vstack([np.zeros((1, series.shape[1])), np.cumsum(series * spans, 0)])
        at_edges = np.column_stack(
            [np.interp(edges, at, cumulative[:, i]) for i in range(series.shape[1])])
        return np.asarray(np.diff(at_edges, axis=0) / width)

    return edges, average(held), average(capacity[:, None])[:, 0]


def _allocation(result: Result, timeline: Sequence[Mark], leaves: Sequence[str]) -> plt.Figure:
    end = float(result["summary"]["simulated_s"])
    figure, axes = plt.subplots(figsize=(11, 5))
    if end > 0 and timeline:
        edges, held, capacity = binned(timeline, end, BINS)
        scale, unit = (86400.0, "days") if end > 3 * 86400 else (HOUR, "hours")
        middle = (edges[:-1] + edges[1:]) / 2 / scale
        colors = [COLORS[i % len(COLORS)] for i in range(len(leaves))]
        axes.stackplot(middle, held.T, labels=list(leaves), colors=colors, step="mid")
        axes.step(middle, capacity, where="mid", color="black", linewidth=1.2,
                  label="schedulable GPUs")
        axes.set_xlabel(f"simulated time ({unit})")
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    axes.set_ylabel("GPUs held")
    axes.set_title("GPU allocation per queue (funded and unfunded) against capacity")
    return figure


def _owed_delivered(result: Result) -> plt.Figure:
    names = list(result["queues"])
    queues = [result["queues"][name] for name in names]
    x = np.arange(len(names))
    figure, axes = plt.subplots(figsize=(max(6.0, 0.6 * len(names) + 2), 5))
    owed = [q["owed_gpu_hours"] for q in queues]
    delivered = [q["delivered_gpu_hours"] for q in queues]
    axes.bar(x - 0.2, owed, 0.4, label="owed (weight's part of the run's GPU-hours)",
             color="#999999")
    axes.bar(x + 0.2, delivered, 0.4, label="delivered (funded)", color="#1f77b4")
    axes.bar(x + 0.2, [q["unfunded_gpu_hours"] for q in queues], 0.4, bottom=delivered,
             label="unfunded", color="#aec7e8", hatch="//")
    axes.set_xticks(x, names, rotation=45, ha="right")
    axes.set_ylabel("GPU-hours")
    axes.set_title("Owed vs delivered GPU-hours per queue")
    axes.legend()
    return figure


def _waits(result: Result) -> plt.Figure:
    waits: dict[str, list[float]] = {}
    for workload in result["workloads"]:
        if workload["wait_s"] is not None:
            waits.setdefault(workload["class"], []).append(workload["wait_s"])
    figure, axes = plt.subplots(figsize=(8, 5))
    for name in sorted(waits):
        values = np.sort(np.array(waits[name]))
        fraction = np.arange(1, len(values) + 1) / len(values)
        axes.step(values, fraction, where="post", label=f"{name} (n={len(values)})")
    axes.set_xscale("symlog", linthresh=10.0)
    axes.set_xlabel("wait: first start − submission (s, log above 10 s)")
    axes.set_ylabel("fraction of started workloads")
    axes.axhline(0.9, color="grey", linestyle=":", linewidth=1)
    axes.set_title("Wait-time distribution per class")
    if waits:
        axes.legend()
    return figure
