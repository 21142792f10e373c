"""Time `place` + `ClusterState.assume` for 10,000 workloads on 2,000 nodes × 8 GPUs.

Run: `.venv/bin/python benchmarks/bench_placement.py [workloads]`. The cluster has 4 levels
(zone / block / rack / host: 2 zones × 5 blocks × 10 racks × 20 hosts). The mix: single pods of
1-8 GPUs with no topology, 2-8 node gangs of full nodes that require a rack, require a block,
or prefer a rack inside a required block, and some multi-pod-set gangs (launcher + workers).
Demand exceeds capacity, so the later workloads exercise the failure path too.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

import common  # noqa: F401  (tests/builders on the path)
from rich.console import Console
from rich.table import Table

from admitter.core.model import GPU, Node, PodSet, TopologyRequest, Workload
from admitter.core.nodes import ClusterState
from admitter.core.placement import Placement, place
from admitter.core.topology import HOSTNAME

from builders.core import BLOCK, CPU, GIB, MEMORY, RACK, ZONE

LEVELS = (ZONE, BLOCK, RACK, HOSTNAME)


def nodes() -> list[Node]:
    result = []
    for i in range(2_000):
        zone, block, rack = f"z{i // 1000}", f"b{i // 200}", f"r{i // 20}"
        name = f"node-{i:04d}"
        result.append(Node(name, {GPU: 8, CPU: 128_000, MEMORY: 1024 * GIB},
                           {ZONE: zone, BLOCK: block, RACK: rack, HOSTNAME: name}))
    return result


def _pods(name: str, count: int, gpus: int) -> PodSet:
    return PodSet(name, count, {GPU: gpus, CPU: 8_000 * gpus + 500, MEMORY: 64 * GIB * gpus})


def workloads(n: int) -> list[tuple[str, Workload]]:
    """(kind, workload) pairs from a fixed seed."""
    rng = random.Random(5)
    result = []
    for i in range(n):
        roll = rng.random()
        pod_sets: tuple[PodSet, ...]
        topology: dict[str, str]
        if roll < 0.80:
            kind, pod_sets, topology = "single pod", (_pods("main", 1, rng.randint(1, 8)),), {}
        elif roll < 0.88:
            kind, topology = "gang, required rack", {"required": RACK}
            pod_sets = (_pods("main", rng.randint(2, 8), 8),)
        elif roll < 0.93:
            kind, topology = "gang, required block", {"required": BLOCK}
            pod_sets = (_pods("main", rng.randint(2, 8), 8),)
        elif roll < 0.97:
            kind, topology = "gang, preferred rack ⊂ block", {"required": BLOCK, "preferred": RACK}
            pod_sets = (_pods("main", rng.randint(2, 8), 8),)
        else:
            kind, topology = "2 pod sets, preferred rack", {"preferred": RACK}
            pod_sets = (_pods("launcher", 1, 1), _pods("workers", rng.randint(2, 6), 8))
        result.append((kind, Workload(f"w{i}", "q", pod_sets, float(i),
                                      topology=TopologyRequest(**topology))))
    return result


def main(n: int) -> None:
    """Times are CPU seconds (`time.process_time`), so other load on the machine is not
    counted against the placement code."""
    start = time.process_time()
    state = ClusterState(nodes(), LEVELS)
    build = time.process_time() - start
    timings: dict[tuple[str, bool], list[float]] = {}
    begin = time.process_time()
    for kind, workload in workloads(n):
        start = time.process_time()
        decision = place(state, workload)
        if isinstance(decision, Placement):
            state.assume(workload.key, workload.pod_sets, decision.node_counts)
        timings.setdefault((kind, isinstance(decision, Placement)), []).append(
            time.process_time() - start)
    total = time.process_time() - begin
    table = Table(title=f"place (+ assume when placed): {n:,} workloads, 2,000 nodes × 8 GPUs, "
                        "zone/block/rack/host, CPU time")
    table.add_column("kind", no_wrap=True)
    for column in ("placed", "count", "mean µs", "p50 µs", "p99 µs", "sum ms"):
        table.add_column(column, justify="right", no_wrap=True)
    for (kind, placed), times in sorted(timings.items()):
        times.sort()
        table.add_row(kind, "yes" if placed else "no", str(len(times)),
                      f"{statistics.mean(times) * 1e6:.1f}",
                      f"{statistics.median(times) * 1e6:.1f}",
                      f"{times[int(len(times) * 0.99)] * 1e6:.1f}", f"{sum(times) * 1e3:.1f}")
    placed_count = sum(len(t) for (_, placed), t in timings.items() if placed)
    table.add_row("all", str(placed_count), str(n), f"{total / n * 1e6:.1f}", "", "",
                  f"{total * 1e3:.1f}", style="bold")
    console = Console(width=110)
    console.print(table)
    console.print(f"ClusterState build (2,000 nodes, domain tree): {build * 1e3:.1f} ms; "
                  f"GPUs left free: {sum(state.free(name)[GPU] for name in state.names)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
