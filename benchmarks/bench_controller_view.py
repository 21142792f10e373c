"""CPU of the controller's per-pass bookkeeping, offline: building the view and picking the
pending reasons to write, at the sizes the Kueue-shaped benchmark reaches.

Run: `.venv/bin/python benchmarks/bench_controller_view.py [--live 3000] [--finished 12000]
[--pending 10000]`

The view is built from informer caches filled directly (no API server): `--live` unfinished
Workloads and `--finished` ones, a few passes to warm what passes keep, then the least of five
batches of ten. `pending_due` gets `--pending` Workloads that all wait and have never been
explained. The objects come from the controller tests' builders (tests/controller/fake_api.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from common import ROOT, machine
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(ROOT / "tests" / "controller"))

from fake_api import CLOCK, FakeApi, add, reconciler, team, workload

from admitter.api.workload import CONDITION_FINISHED, Reason
from admitter.controller.snapshot import Translations, build_view
from admitter.controller.status import StatusWriter
from admitter.core.decisions import Pending, PendingReason
from admitter.kube import client as kube
from admitter.kube.objects import format_time


def least_ms(work: Callable[[], object], batches: int = 5, per_batch: int = 10) -> float:
    """Least CPU per call over `batches` batches, in ms."""
    best = float("inf")
    for _ in range(batches):
        began = time.process_time()
        for _ in range(per_batch):
            work()
        best = min(best, (time.process_time() - began) / per_batch)
    return best * 1e3


def view_ms(live: int, finished: int) -> float:
    api = FakeApi()
    controller = reconciler(api)
    caches = controller.caches
    team(api, controller, live + finished, node_a=64)
    done = {"type": CONDITION_FINISHED, "status": "True", "reason": Reason.SUCCEEDED,
            "message": "done"}
    for i in range(live):
        add(api, caches.workloads, kube.WORKLOADS, workload("ns", f"live-{i}", 1))
    for i in range(finished):
        add(api, caches.workloads, kube.WORKLOADS,
            {**workload("ns", f"done-{i}", 1), "status": {"conditions": [done]}})
    translations = Translations()
    return least_ms(lambda: build_view(caches, controller.settings, CLOCK, translations,
                                       usage=controller.usage))


def pending_due_ms(pending: int) -> float:
    workloads = {f"ns/w-{i}": {"metadata": {"name": f"w-{i}", "namespace": "ns",
                                            "uid": f"uid-{i}",
                                            "creationTimestamp": format_time(CLOCK - 60 - i)},
                               "spec": {"queueName": "default"}, "status": {}}
                 for i in range(pending)}
    decisions = [Pending(f"ns/w-{i}", "team", PendingReason.NO_FIT, ("no room",), i + 1, None)
                 for i in range(pending)]
    writer = StatusWriter(None)  # type: ignore[arg-type]  # picks, never writes
    return least_ms(lambda: writer.pending_due(workloads, decisions, CLOCK))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--live", type=int, default=3000)
    parser.add_argument("--finished", type=int, default=12000)
    parser.add_argument("--pending", type=int, default=10000)
    args = parser.parse_args()
    table = Table(title=f"controller bookkeeping per pass, CPU ({machine()})")
    table.add_column("step")
    table.add_column("size")
    table.add_column("ms", justify="right")
    table.add_row("build_view", f"{args.live:,} live, {args.finished:,} finished",
                  f"{view_ms(args.live, args.finished):.1f}")
    table.add_row("pending_due", f"{args.pending:,} pending",
                  f"{pending_due_ms(args.pending):.1f}")
    Console().print(table)


if __name__ == "__main__":
    main()
