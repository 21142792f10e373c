"""Kueue itself and admitter on the same shape and the same local control plane.

    .venv/bin/python benchmarks/bench_kueue_side_by_side.py [--shape baseline|large-scale]
        [--cohorts 1] [--scale 1] [--timeout 300]

(it runs `hack/kueue/build.sh` first, a no-op once built).

Kueue: its scheduler-performance runner and minimalkueue, built from the `sigs.k8s.io/kueue`
module pinned in hack/kueue/go.mod, run its `configs/baseline/generator.yaml` against a fresh
local control plane (kube-apiserver, etcd, controller-manager, scheduler, KWOK) that has
Kueue's CRDs from the same module; the large-scale shape, which that module does not ship, is
written in the same schema from `bench_kueue_shape.LARGE_SCALE` (and the baseline written the
same way must equal Kueue's file, or the run stops). minimalkueue runs as Kueue's own runner
would start it; the runner generates, mimics runtimes and records. Its writes are client-go's
`rest_client_requests_total` from minimalkueue's metrics endpoint, its admissions
`kueue_admitted_workloads_total`.

admitter: `bench_kueue_shape.py`'s Workload mode on another fresh control plane of the same
kind. Both rows land in one table.

Scale: the default is one cohort (6 queues, 3,000 workloads: the per-queue shape, and so the
66 s capacity bound, unchanged), a few minutes in all; `--cohorts 5 --timeout 600` runs the
full baseline (15,000 workloads), which both systems finish within 10 minutes on the 2-core
machine (BENCHMARKS.md, "Kueue itself on the same shape"). `--shape large-scale --cohorts 10`
is Kueue's large-scale shape (1,000 queues, 50,000 workloads); `--scale 0.2` keeps its queues
with a fifth of each queue's workloads. A system still running at
`--timeout` is stopped (Kueue's runner records on SIGTERM) and reported with what had finished.
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

import yaml
from bench_kueue_shape import BASELINE, SHAPES, Shape, capacity_bound, run_mode
from common import (
    ROOT,
    control_plane,
    control_plane_cpu,
    machine,
    node_layout,
    process_cpu,
    waits_cell,
)
from controller_process import describe
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


def generator_config(source: Path, shape: Shape, cohorts: int, out: Path) -> Path:
    """Kueue's runner config for `shape` with `cohorts` cohorts; the baseline written from
    its Shape is first checked against Kueue's own file, so both shapes are read alike."""
    baseline = source / "test/performance/scheduler/configs/baseline/generator.yaml"
    if BASELINE.kueue_generator(BASELINE.cohorts) != yaml.safe_load(baseline.read_text()):
        raise SystemExit(f"bench_kueue_shape.BASELINE no longer matches {baseline}")
    path = out / "generator.yaml"
    path.write_text(yaml.safe_dump(shape.kueue_generator(cohorts)))
    return path


def run_kueue(shape: Shape, cohorts: int, timeout: float) -> Row:
    binaries, source = kueue_build()
    crds = source / "config" / "components" / "crd" / "bases"
    _, cpus = capacity_bound(shape, cohorts)
    with control_plane(node_layout(max(1, cpus // 60), cpu=60), (crds,)) as cluster, \
            tempfile.TemporaryDirectory() as work:
        out = Path(work)
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig_path)}
        port = _free_port()
        log = (out / "minimalkueue.log").open("wb")
        kueue = subprocess.Popen(
            [str(binaries / "minimalkueue"), "--kubeconfig", str(cluster.kubeconfig_path),
             "--metricsPort", str(port)], stdout=log, stderr=subprocess.STDOUT)
        runner_log = (out / "runner.log").open("wb")
        try:
            time.sleep(3.0)
            if kueue.poll() is not None:
                raise RuntimeError(f"minimalkueue exited: {(out / 'minimalkueue.log').read_text()}")
            print(f"kueue: runner, {shape.name} config with {cohorts} cohort(s)", flush=True)
            began = time.monotonic()
            before = control_plane_cpu(cluster)[0]
            runner = subprocess.Popen(
                [str(binaries / "runner"), "-o", str(out), "-crds", str(crds),
                 "-generatorConfig", str(generator_config(source, shape, cohorts, out)),
                 "-timeout", f"{int(timeout) + 600}s", "--zap-log-level=error"],
                env=env, stdout=runner_log, stderr=subprocess.STDOUT)
            try:
                runner.wait(timeout)
                timed_out = False
            except subprocess.TimeoutExpired:  # SIGTERM: the runner records what it has
                runner.terminate()
                runner.wait(120)
                timed_out = True
            # The runner may exit 1 after it recorded everything: at a large scale its
            # manager does not stop within its own 30 s grace period. A summary is a result.
            if runner.returncode != 0 and not (out / "summary.yaml").exists():
                tail = (out / "runner.log").read_text()[-2000:]
                raise RuntimeError(f"runner failed ({runner.returncode}): {tail}")
            wall = timeout if timed_out else _summary_written(out) - began
            counts = _scrape(port)
            counts["controller cpu"] = process_cpu(kueue.pid)
            counts["apiserver cpu"] = control_plane_cpu(cluster)[0] - before
        finally:
            kueue.terminate()
            try:
                kueue.wait(30)
            except subprocess.TimeoutExpired:  # still busy with a 15,000-workload backlog
                kueue.kill()
                kueue.wait()
            log.close()
            runner_log.close()
        return _kueue_row(out / "wlStates.csv", shape, cohorts, wall, timed_out, counts)


def _summary_written(out: Path) -> float:
    """When the runner wrote summary.yaml (its recorder saw everything finished), monotonic."""
    return time.monotonic() - (time.time() - (out / "summary.yaml").stat().st_mtime)


def _kueue_row(states: Path, shape: Shape, cohorts: int, wall: float, timed_out: bool,
               counts: dict[str, float]) -> Row:
    waits: dict[str, list[float]] = {c.name: [] for c in shape.classes}
    finished = 0
    with states.open() as handle:
        for row in csv.DictReader(handle):
            if int(row["ms to admitted"]) > 0:
                waits[row["class name"]].append(int(row["ms to admitted"]) / 1000)
            finished += int(row["ms to finish"]) > 0
    return _row("Kueue v0.17.0 (minimalkueue)", shape, cohorts, finished, wall, timed_out,
                waits, counts["writes"] / max(counts["admitted"], 1.0),
                (counts["controller cpu"], counts["apiserver cpu"]))


def _row(system: str, shape: Shape, cohorts: int, finished: int, wall: float, timed_out: bool,
         waits: dict[str, list[float]], writes_per_admission: float,
         cpu: tuple[float, float]) -> Row:
    """One system's line; `cpu`: CPU seconds of its controller, and of the API server with
    etcd, over the run."""
    bound, _ = capacity_bound(shape, cohorts)
    total = shape.workloads(cohorts)
    row = {"system": system, "finished": f"{finished:,} of {total:,}",
           "wall s": f"> {wall:.0f} (stopped)" if timed_out else f"{wall:.1f}",
           "ratio to bound": f"> {wall / bound:.1f}x" if timed_out else f"{wall / bound:.2f}x"}
    for name, values in waits.items():
        row[f"{name} mean/p90 s (admitted)"] = waits_cell(values)
    row["writes/admission"] = f"{writes_per_admission:.2f}"
    row["controller cpu s"] = f"{cpu[0]:.0f}"
    row["apiserver+etcd cpu s"] = f"{cpu[1]:.0f}"
    return row


def run_admitter(shape: Shape, cohorts: int, timeout: float) -> Row:
    run = asyncio.run(run_mode("workloads", shape, cohorts, timeout, None))
    stats = run.controller
    Console().print(f"admitter: {stats.passes:,} passes, {stats.cycle_seconds:.1f} s in the "
                    f"decision core; {describe(stats)}")
    waits = {c.name: run.waits(c.name) for c in shape.classes}
    wall = run.timeout if run.timed_out else run.wall()
    return _row("admitter (Workload mode)", shape, cohorts, run.finished(), wall,
                run.timed_out, waits, stats.writes / max(stats.admissions, 1),
                (stats.cpu_seconds, run.control_plane_cpu[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=tuple(SHAPES), default=BASELINE.name)
    parser.add_argument("--cohorts", type=int, default=1,
                        help="of the shape's (baseline: 5 of 6 queues x 500 workloads; "
                        "large-scale: 10 of 100 queues x 50)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="this fraction of each queue's workloads of each class")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="per system, seconds; a system still running is stopped and "
                        "reported with what finished")
    parser.add_argument("--only", choices=("kueue", "admitter"))
    args = parser.parse_args()
    if shutil.which("go") is None:
        raise SystemExit("Go is needed to build Kueue (hack/kueue/build.sh)")
    shape = SHAPES[args.shape].scaled(args.scale)
    rows = []
    if args.only != "admitter":
        rows.append(run_kueue(shape, args.cohorts, args.timeout))
    if args.only != "kueue":
        rows.append(run_admitter(shape, args.cohorts, args.timeout))
    bound, cpus = capacity_bound(shape, args.cohorts)
    total = shape.workloads(args.cohorts)
    table = Table(title=f"Kueue {shape.name} shape, {args.cohorts} cohort(s): {total:,} workloads, "
                        f"capacity bound {bound:.0f} s on {cpus} CPUs "
                        f"({datetime.date.today()}, {machine()})")
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*row.values())
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
