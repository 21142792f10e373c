"""Time `compute_fair_share` on 1,000 queues (10 roots × 10 parents × 10 leaves) × 3 resources.

Run: `.venv/bin/python benchmarks/bench_fairshare.py [runs]`. Every leaf has demand on every
resource, with quotas, weights, priorities and usage varied so every step of the division runs.
"""

from __future__ import annotations

import statistics
import sys
import time

import common  # noqa: F401  (tests/builders on the path)
from rich.console import Console
from rich.table import Table

from admitter.core.fairshare import compute_fair_share
from admitter.core.model import GPU, Queue, ResourceQuota
from admitter.core.queue_tree import QueueTree

from builders.core import CPU, GIB, MEMORY

FANOUT = 10


def _knobs(i: int, gpus: int) -> dict[str, ResourceQuota]:
    """Quotas well below each level's share, so every level divides a surplus too."""
    weight = 1.0 + i % 4
    return {
        GPU: ResourceQuota(quota=gpus, over_quota_weight=weight),
        CPU: ResourceQuota(quota=gpus * 8_000, over_quota_weight=weight),
        MEMORY: ResourceQuota(
            quota=gpus * 64 * GIB, limit=gpus * 400 * GIB, over_quota_weight=weight
        ),
    }


def build() -> tuple[QueueTree, dict[str, int], dict[str, dict[str, int]], dict[str, float]]:
    """The tree, capacity, per-leaf demand and normalised usage of the benchmark."""
    queues: list[Queue] = []
    demand: dict[str, dict[str, int]] = {}
    usage: dict[str, float] = {}
    for r in range(FANOUT):
        root = f"org-{r}"
        queues.append(Queue(root, priority=r % 3, resources=_knobs(r, 40), order=len(queues)))
        usage[root] = 0.01 * r
        for m in range(FANOUT):
            mid = f"{root}-team-{m}"
            queues.append(
                Queue(mid, parent=root, priority=m % 2, resources=_knobs(m, 3), order=len(queues))
            )
            usage[mid] = 0.1 * (m % 3) / 3
            for leaf_index in range(FANOUT):
                leaf = f"{mid}-proj-{leaf_index}"
                queues.append(
                    Queue(
                        leaf,
                        parent=mid,
                        resources=_knobs(leaf_index, leaf_index % 2),
                        order=len(queues),
                    )
                )
                usage[leaf] = 0.1
                gpus = 1 + (r + m + leaf_index) % 7
                demand[leaf] = {GPU: gpus, CPU: gpus * 12_000 + 333, MEMORY: gpus * 97 * GIB + 7}
    capacity = {GPU: 1_024, CPU: 1_024 * 10_000, MEMORY: 1_024 * 120 * GIB}
    return QueueTree(queues), capacity, demand, usage


def main(runs: int) -> None:
    tree, capacity, demand, usage = build()
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        compute_fair_share(tree, capacity, demand, usage, k_value=1.0)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    table = Table(title="compute_fair_share (CPU time shows what a busy machine adds to wall)")
    columns = ("queues", "leaves", "resources", "runs", "median ms", "min ms", "max ms", "cpu ms")
    for column in columns:
        table.add_column(column, justify="right")
    table.add_row(
        str(len(tree)),
        str(len(tree.leaves())),
        str(len(capacity)),
        str(runs),
        *(f"{value * 1e3:.2f}" for value in (statistics.median(wall), min(wall), max(wall))),
        f"{statistics.median(cpu) * 1e3:.2f}",
    )
    Console().print(table)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
