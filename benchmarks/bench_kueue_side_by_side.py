"""Kueue itself and admitter on the same baseline shape and the same local control plane.

    bash hack/kueue/build.sh && .venv/bin/python benchmarks/bench_kueue_side_by_side.py

Kueue: its scheduler-performance runner and minimalkueue, built from the `sigs.k8s.io/kueue`
module pinned in hack/kueue/go.mod, run its `configs/baseline/generator.yaml` against a fresh
local control plane (kube-apiserver, etcd, controller-manager, scheduler, KWOK) that has
Kueue's CRDs from the same module. minimalkueue runs as Kueue's own runner would start it; the
runner generates, mimics runtimes and records. Its writes are client-go's
`rest_client_requests_total` from minimalkueue's metrics endpoint, its admissions
`kueue_admitted_workloads_total`.

admitter: `bench_kueue_shape.py`'s Workload mode on another fresh control plane of the same
kind. Both rows land in one table.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_kueue_shape import CLASSES, capacity_bound, run_mode
from common import ROOT, control_plane, machine, mean, node_layout, percentile
from rich.console import Console
from rich.table import Table

HACK = ROOT / "hack" / "kueue"
Row = dict[str, str]


def kueue_build() -> tuple[Path, Path]:
    """(binaries dir, module source dir) after `hack/kueue/build.sh` (a no-op when built)."""
    done = subprocess.run(["bash", str(HACK / "build.sh")], capture_output=True, text=True,
                          check=True)
    source = Path(done.stdout.strip().splitlines()[-1])
    version = source.name.split("@")[-1]
    return ROOT / "hack" / "bin" / f"kueue-{version}", source


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = {"writes": 0.0, "admitted": 0.0}
    for line in text.splitlines():
        if line.startswith("rest_client_requests_total{") and not re.search(
                r'method="GET"', line):
            found["writes"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("kueue_admitted_workloads_total{"):
            found["admitted"] += float(line.rsplit(" ", 1)[1])
    return found


def run_kueue(timeout: float) -> Row:
    binaries, source = kueue_build()
    layout = node_layout(10, cpu=60)
    crds = source / "config" / "components" / "crd" / "bases"
    with control_plane(layout, (crds,)) as cluster, tempfile.TemporaryDirectory() as work:
        out = Path(work)
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig_path)}
        port = _free_port()
        log = (out / "minimalkueue.log").open("wb")
        kueue = subprocess.Popen(
            [str(binaries / "minimalkueue"), "--kubeconfig", str(cluster.kubeconfig_path),
             "--metricsPort", str(port)], stdout=log, stderr=subprocess.STDOUT)
        began = time.monotonic()
        try:
            time.sleep(3.0)
            if kueue.poll() is not None:
                raise RuntimeError(f"minimalkueue exited: {(out / 'minimalkueue.log').read_text()}")
            print("kueue: runner with configs/baseline/generator.yaml", flush=True)
            runner = subprocess.run(
                [str(binaries / "runner"), "-o", str(out), "-crds", str(crds),
                 "-generatorConfig",
                 str(source / "test/performance/scheduler/configs/baseline/generator.yaml"),
                 "-timeout", f"{int(timeout)}s", "--zap-log-level=error"],
                env=env, capture_output=True, text=True, timeout=timeout + 120)
            wall = _summary_written(out) - began
            if runner.returncode != 0:
                raise RuntimeError(f"runner failed ({runner.returncode}): {runner.stderr[-2000:]}")
            counts = _scrape(port)
        finally:
            kueue.terminate()
            kueue.wait(30)
            log.close()
        return _kueue_row(out / "wlStates.csv", wall, counts)


def _summary_written(out: Path) -> float:
    """When the runner wrote summary.yaml (its recorder saw everything finished), monotonic."""
    return time.monotonic() - (time.time() - (out / "summary.yaml").stat().st_mtime)


def _kueue_row(states: Path, wall: float, counts: dict[str, float]) -> Row:
    waits: dict[str, list[float]] = {c.name: [] for c in CLASSES}
    finished = 0
    with states.open() as handle:
        for row in csv.DictReader(handle):
            waits[row["class name"]].append(int(row["ms to admitted"]) / 1000)
            finished += int(row["ms to finish"]) > 0
    return _row("Kueue v0.17.0 (minimalkueue)", finished, wall, waits,
                counts["writes"] / max(counts["admitted"], 1.0))


def _row(system: str, finished: int, wall: float, waits: dict[str, list[float]],
         writes_per_admission: float) -> Row:
    bound, _ = capacity_bound(5)
    row = {"system": system, "finished": f"{finished:,}", "wall s": f"{wall:.1f}",
           "ratio to bound": f"{wall / bound:.2f}x"}
    for name, values in waits.items():
        row[f"{name} mean/p90 s"] = f"{mean(values):.1f} / {percentile(values, 90):.1f}"
    row["writes/admission"] = f"{writes_per_admission:.2f}"
    return row


def run_admitter(timeout: float) -> Row:
    run = asyncio.run(run_mode("workloads", 5, timeout, None))
    stats = run.controller
    waits = {c.name: run.waits(c.name) for c in CLASSES}
    return _row("admitter (Workload mode)", run.finished(), run.wall(), waits,
                stats.writes / max(stats.admissions, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=480.0, help="per system, seconds")
    parser.add_argument("--only", choices=("kueue", "admitter"))
    args = parser.parse_args()
    if shutil.which("go") is None:
        raise SystemExit("Go is needed to build Kueue (hack/kueue/build.sh)")
    rows = []
    if args.only != "admitter":
        rows.append(run_kueue(args.timeout))
    if args.only != "kueue":
        rows.append(run_admitter(args.timeout))
    bound, cpus = capacity_bound(5)
    table = Table(title=f"Kueue baseline shape: 15,000 workloads, capacity bound {bound:.0f} s "
                        f"on {cpus} CPUs ({datetime.date.today()}, {machine()})")
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*row.values())
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
