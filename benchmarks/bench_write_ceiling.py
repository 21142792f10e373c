"""How many writes a second this machine's API server takes for admitter's Workloads, from the
cheapest client there is: the floor under the control-plane benchmarks' wall times.

Run: `.venv/bin/python benchmarks/bench_write_ceiling.py [--workloads N] [--concurrency C ...]`

A fresh local control plane (one fake node; the scheduler, controller manager and KWOK idle),
then `hack/writeload` (Go, standard library only, built here into `hack/bin/`) creates N
Workloads, admits each with a status patch shaped like the controller's and finishes each
with one shaped like the benchmarks', C requests in flight. Nobody watches the Workloads, so
the API server does less per write than in any benchmark: the rate is an upper bound.

Per round: the rate of each kind of write, then of all three together (the Kueue shape's own
mix), the cores kube-apiserver and etcd kept busy and their CPU per write. From the best mixed
rate, the wall time the Kueue-shaped benchmark's unavoidable writes alone take here (section
1: 15,000 creations + 15,000 admissions + 15,000 finishes) against its 66 s capacity bound.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path

from common import (
    ROOT,
    api_writes,
    control_plane,
    control_plane_cpu,
    machine,
    node_layout,
)
from rich.console import Console
from rich.table import Table

from builders.kube import namespace

TOOL_SOURCE = ROOT / "hack" / "writeload"
TOOL = ROOT / "hack" / "bin" / "writeload"
KUEUE_SHAPE_WORKLOADS = 15_000
KUEUE_SHAPE_BOUND_S = 66.0
WRITES_PER_KUEUE_SHAPE_WORKLOAD = 3
"""Created by the generator, admitted by the controller, finished by the runner."""


def build_tool() -> Path:
    """`go build` (cached by Go; a few seconds from cold: no dependencies)."""
    if shutil.which("go") is None:
        raise SystemExit("bench_write_ceiling.py builds hack/writeload with Go, the same Go "
                         "hack/build.sh needs; `go` is not on PATH")
    subprocess.run(["go", "build", "-trimpath", "-o", str(TOOL), "."], cwd=TOOL_SOURCE,
                   check=True)
    return TOOL


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=5000, help="per run")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64, 256])
    args = parser.parse_args()
    tool = build_tool()
    console = Console()
    table = Table(title=f"API server write ceiling, Workloads ({machine()})")
    for column in ("in flight", "phase", "writes", "failed", "s", "writes/s",
                   "apiserver+etcd cores", "their cpu ms/write"):
        table.add_column(column, justify="right")
    best = 0.0
    with control_plane(node_layout(1, 8)) as cluster:
        pki = cluster.state_dir / "pki"
        for round_, concurrency in enumerate(args.concurrency):
            ns = f"writeload-{round_}"
            cluster.api().request("POST", "/api/v1/namespaces", namespace(ns))
            writes_before, cpu_before = api_writes(cluster), control_plane_cpu(cluster)[0]
            began = time.monotonic()
            run = subprocess.run(
                [str(tool), f"--server={cluster.server}", f"--ca={cluster.ca_path}",
                 f"--cert={pki / 'admin.crt'}", f"--key={pki / 'admin.key'}",
                 f"--namespace={ns}", f"--n={args.workloads}",
                 f"--concurrency={concurrency}"],
                check=True, capture_output=True, text=True)
            elapsed = time.monotonic() - began
            cpu = control_plane_cpu(cluster)[0] - cpu_before
            for line in run.stdout.splitlines():
                phase = json.loads(line)
                table.add_row(str(concurrency), phase["phase"], f"{phase['writes']:,}",
                              str(phase["failed"]), f"{phase['seconds']:.1f}",
                              f"{phase['writes_per_s']:.0f}", "")
            served = api_writes(cluster) - writes_before
            best = max(best, served / elapsed)  # the shape's own mix: one of each per workload
            table.add_row(str(concurrency), "all three", f"{served:,}", "", f"{elapsed:.1f}",
                          f"{served / elapsed:.0f}", f"{cpu / elapsed:.2f}",
                          f"{cpu / served * 1e3:.1f}")
    console.print(table)
    writes = KUEUE_SHAPE_WORKLOADS * WRITES_PER_KUEUE_SHAPE_WORKLOAD
    floor = writes / best
    console.print(
        f"Kueue shape: {writes:,} writes at the best mixed rate, {best:.0f}/s, take {floor:.0f} s "
        f"= {floor / KUEUE_SHAPE_BOUND_S:.2f}× the {KUEUE_SHAPE_BOUND_S:.0f} s capacity bound, "
        "with no controller, generator or watcher using the same 2 cores.")


if __name__ == "__main__":
    main()
