"""One full admission cycle at scale, and how its time grows with each dimension.

    .venv/bin/python benchmarks/bench_cycle.py [--quick] [--large] [--passes 50] [--plot PNG]

The headline case, the scale of the 200 ms target: 10,000 pending workloads, 2,000 nodes of 8
GPUs in four topology levels (zone/block/rack/host), 1,000 leaf queues under 10 parents, with a
third of the GPUs already held by admitted workloads. Each point is the median of several runs;
the caption says whether the core ran compiled (`make setup`) or as Python source. The headline
runs two ways, taking turns: the cycle alone, and as the controller runs it, on a frozen heap
(`admitter/controller/frozen_heap.py`); then, that way, once the cluster settled and one
workload finished and one arrived (target 20 ms on the kept core), from scratch and on the
core the controller keeps between passes (`IncrementalCore`), told by a snapshot (`decide`,
the controller's way) and by the two events (`put`, `remove`, then `cycle`: the simulator's);
and once settled, a pass in which nothing changed but the clock (the last answer stands,
`standstill`), both ways; `--passes` then repeats whole passes each
way, for the collector's cost outside the cycle and for memory. `--large` adds a cold cycle ten
times larger in pending work and five times in nodes (100,000 pending, 10,000 nodes, 1,000 leaf
queues; target 1 s), with the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import common  # noqa: F401  (tests/builders on the path)
from rich.console import Console
from rich.table import Table

from admitter.controller.frozen_heap import decide_frozen
from admitter.core import cycle as cycle_module
from admitter.core.cycle import run_cycle
from admitter.core.decisions import CycleResult, Snapshot
from admitter.core.incremental import IncrementalCore
from admitter.core.model import GPU, Node, Phase, PodSet, TopologyRequest, Workload
from admitter.core.topology import HOSTNAME as HOST

from builders.core import BLOCK, RACK, ZONE, queue
from builders.world import NO_TIME_FAIRNESS, World

LEVELS = (ZONE, BLOCK, RACK, HOST)
TARGET_MS = 200
"""The bound for the headline cycle, drawn on the plot."""
LARGE = {"pending": 100_000, "nodes": 10_000, "leaves": 1_000}
"""The large row's shape (`--large`)."""
CHANGED_TARGET_MS = 20
"""The bound for the cycle after one change on the kept core (`after_a_change`)."""
SETTLING_CYCLES = 50
"""Cycles allowed to reach a state where a cycle decides nothing (each one searches for a
bounded number of preemptions, so a cold start takes a few)."""
HEAPS = ("live", "frozen")
"""The cycle alone, and as the controller runs it (`decide_frozen`)."""
Decide = Callable[[Snapshot], CycleResult]
SETTLED = 20
"""Passes after which memory should stay flat: the core's bounded caches of the recent queue
trees (one a snapshot) are full by then."""


def build(pending: int, nodes: int, leaves: int, seed: int = 7) -> Snapshot:
    rng = random.Random(seed)
    node_list = []
    for i in range(nodes):
        name = f"n{i:05d}"
        labels = {ZONE: f"z{i // 512}", BLOCK: f"b{i // 64}", RACK: f"r{i // 8}", HOST: name}
        node_list.append(Node(name, {GPU: 8, "cpu": 128_000, "memory": 2 << 40}, labels))
    parents = max(1, leaves // 100)
    queues = [queue(f"p{p}", -1, order=p) for p in range(parents)]
    per_leaf = nodes * 8 // leaves
    queues += [queue(f"q{q}", per_leaf, parent=f"p{q % parents}", weight=1 + q % 3,
                     priority=q % 2, order=parents + q) for q in range(leaves)]
    workloads: list[Workload] = []
    # A third of the cluster is busy with single-node jobs placed round-robin.
    for i in range(nodes // 3):
        node = node_list[(i * 3) % nodes].name
        pod_set = PodSet("main", 1, {GPU: 8, "cpu": 32_000})
        workloads.append(Workload(f"run{i}", f"q{i % leaves}", (pod_set,), 0.0, 0, 3600.0,
                                  phase=Phase.ADMITTED, admitted_at=0.0, placement={node: 1},
                                  pod_set_placements=({node: 1},)))
    for i in range(pending):
        pods, gpus = rng.choice([(1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8), (8, 8)])
        topology = TopologyRequest(required=RACK if pods > 1 and pods <= 8 else None,
                                   preferred=HOST if pods == 1 else None)
        pod_set = PodSet("main", pods, {GPU: gpus, "cpu": 4_000 * gpus})
        workloads.append(Workload(f"w{i}", f"q{rng.randrange(leaves)}", (pod_set,),
                                  float(rng.randrange(3600)), rng.choice([0, 10, 50]),
                                  rng.choice([0.0, 900.0, 7200.0]), topology=topology))
    return Snapshot(7200.0, node_list, LEVELS, queues, workloads, (), NO_TIME_FAIRNESS)


def after_a_change(snapshot: Snapshot) -> tuple[Snapshot, Snapshot]:
    """`snapshot` once cycles carried out their decisions until one made none, and the same
    once one admitted workload finished and one 1-GPU workload arrived: the cycle a controller
    runs nearly every time, with thousands still waiting that did not fit a moment ago. The
    two share every object that did not change, as the controller's snapshots do."""
    world = World(list(snapshot.nodes), list(snapshot.queues),
                  {w.key: w for w in snapshot.workloads}, settings=snapshot.settings,
                  topology=tuple(snapshot.topology))
    for _ in range(SETTLING_CYCLES):
        result = world.cycle(snapshot.now)
        if not result.admissions and not result.evictions:
            break
    else:
        raise SystemExit(f"the cluster did not settle in {SETTLING_CYCLES} cycles")
    settled = world.snapshot(snapshot.now + 2)
    finished = next(w for w in world.workloads.values() if w.phase is Phase.ADMITTED)
    del world.workloads[finished.key]
    world.submit(Workload("arrival", finished.queue, (PodSet("main", 1, {GPU: 1, "cpu": 4_000}),),
                          snapshot.now + 1, 0, 900.0))
    return settled, world.snapshot(snapshot.now + 2)


class _CollectorClock:
    """CPU seconds Python's cyclic garbage collector spends while it is installed. A full
    collection walks every object alive, the snapshot's hundred thousand included, and a cycle
    that makes tens of thousands of objects triggers about one: part of what a cycle costs in a
    process that leaves the collector on (the controller), none in the simulator (which pauses
    it for a run)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started


def measure(snapshot: Snapshot, repeat: int, ways: Sequence[Decide] = (run_cycle,),
            ) -> list[tuple[float, float, float, float, int]]:
    """For each way of running the cycle: median wall, median CPU, least CPU and median
    collector CPU seconds of one cycle, and how many workloads it admitted. The ways take
    turns, so that load on a shared machine falls on each alike. CPU is what a busy machine
    distorts least; on a shared VM the least of several runs is the steadiest figure
    (interference only ever adds time)."""
    walls: list[list[float]] = [[] for _ in ways]
    cpus: list[list[float]] = [[] for _ in ways]
    collecting: list[list[float]] = [[] for _ in ways]
    admitted = [0 for _ in ways]
    clock = _CollectorClock()
    gc.callbacks.append(clock)
    try:
        for _ in range(repeat):
            for i, decide in enumerate(ways):
                clock.seconds = 0.0
                wall, cpu = time.perf_counter(), time.process_time()
                result = decide(snapshot)
                cpus[i].append(time.process_time() - cpu)
                walls[i].append(time.perf_counter() - wall)
                collecting[i].append(clock.seconds)
                admitted[i] = len(result.admissions)
    finally:
        gc.callbacks.remove(clock)
    return [(statistics.median(walls[i]), statistics.median(cpus[i]), min(cpus[i]),
             statistics.median(collecting[i]), admitted[i]) for i in range(len(ways))]


def kept(settled: Snapshot, changed: Snapshot, repeat: int, told: bool = False
         ) -> tuple[float, float, float, float, int]:
    """`measure`'s figures for the controller's core (`IncrementalCore.decide`, on a frozen
    heap) deciding `changed` right after it decided `settled`: syncing to the snapshot (every
    workload compared, those changed told) and the cycle on the kept models. The sync back to
    `settled` between runs is not timed. `told`: the core is told the changes as events
    instead (`_changes`, found untimed) and cycles, with no snapshot compared."""
    core = IncrementalCore((), (), (), settled.settings)
    gone, arrived = _changes(settled, changed)

    def tell(after: Snapshot) -> CycleResult:
        for key in gone:
            core.remove(key)
        for workload in arrived:
            core.put(workload)
        return core.cycle(after.now, after.usage, after.short_gpus)

    walls, cpus, collecting = [], [], []
    admitted = 0
    clock = _CollectorClock()
    gc.callbacks.append(clock)
    try:
        for _ in range(repeat):
            core.decide(settled)
            clock.seconds = 0.0
            wall, cpu = time.perf_counter(), time.process_time()
            result = decide_frozen(tell if told else core.decide, changed)
            cpus.append(time.process_time() - cpu)
            walls.append(time.perf_counter() - wall)
            collecting.append(clock.seconds)
            admitted = len(result.admissions)
    finally:
        gc.callbacks.remove(clock)
    return (statistics.median(walls), statistics.median(cpus), min(cpus),
            statistics.median(collecting), admitted)


def _changes(before: Snapshot, after: Snapshot) -> tuple[list[str], list[Workload]]:
    """The keys gone and the workloads new or changed from `before` to `after`: what a
    simulator tells its core as they happen, without comparing anything."""
    known = {w.key: w for w in before.workloads}
    now = {w.key for w in after.workloads}
    return ([key for key in known if key not in now],
            [w for w in after.workloads if known.get(w.key) is not w])


def as_controller(snapshot: Snapshot) -> CycleResult:
    """The cycle the way the controller runs it: on a frozen heap."""
    return decide_frozen(run_cycle, snapshot)


def passes(count: int, decide: Decide, shape: dict[str, int]) -> list[str]:
    """`count` passes as a controller makes them, each building a fresh snapshot (the
    controller's from its caches) and deciding on it, next to a long-lived one (the caches):
    the median cycle CPU, the median CPU of a whole pass and of the collector in it, the
    resident memory and the objects the collector tracks (frozen ones too, after a full
    collection) after the SETTLED-th pass and after the last, flat when nothing a pass made
    outlives it. (These snapshots hold no reference cycles, so even a heap frozen and never
    thawed would stay flat here; that it thaws is for the process's other garbage, which
    tests/controller/test_frozen_heap.py covers.)"""
    caches = build(**shape)
    cycle_cpus, pass_cpus, collecting = [], [], []
    clock = _CollectorClock()
    gc.callbacks.append(clock)
    try:
        for i in range(count):
            clock.seconds = 0.0
            began = time.process_time()
            snapshot = build(**shape, seed=i)
            cycle = time.process_time()
            decide(snapshot)
            cycle_cpus.append(time.process_time() - cycle)
            del snapshot
            pass_cpus.append(time.process_time() - began)
            collecting.append(clock.seconds)
            if i == min(count, SETTLED) - 1:
                first = _resident_mb()
                gc.collect()
                tracked = len(gc.get_objects()) + gc.get_freeze_count()
    finally:
        gc.callbacks.remove(clock)
    last = _resident_mb()
    gc.collect()
    after = len(gc.get_objects()) + gc.get_freeze_count()
    del caches
    return [f"{statistics.median(cycle_cpus) * 1000:.0f}",
            f"{statistics.median(pass_cpus) * 1000:.0f}",
            f"{statistics.median(collecting) * 1000:.0f}", f"{first:.0f}", f"{last:.0f}",
            f"{tracked:,}", f"{after:,}"]


def _peak_mb() -> float:
    """The process's peak resident memory so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _resident_mb() -> float:
    """The process's resident memory now (Linux), not its peak."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="headline case only")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--passes", type=int, default=0,
                        help="also this many passes on fresh snapshots, each heap, for memory")
    parser.add_argument("--plot", help="write a PNG of the scaling curves here")
    parser.add_argument("--large", action="store_true",
                        help="also a cold cycle at 100k pending, 10k nodes, 1k leaf queues")
    args = parser.parse_args()
    console = Console()
    base = {"pending": 10_000, "nodes": 2_000, "leaves": 1_000}
    table = Table(title="admission cycle time (median of --repeat runs; the headline 9 or more)",
                  caption=f"decision core: {_build()}; heap frozen: as the controller runs it; "
                  "changed: frozen, once settled, after one finish and one arrival, from "
                  "scratch (run_cycle) and on the kept core (IncrementalCore) told by a "
                  "snapshot (kept) or by events (told); unchanged: once settled, a second later "
                  "with nothing changed")
    for column in ("pending", "nodes", "leaf queues", "heap", "admitted", "cycle ms", "cpu ms",
                   "least cpu ms", "of which gc ms"):
        table.add_column(column, justify="right")
    headline = measure(build(**base), max(args.repeat, 9), (run_cycle, as_controller))
    settled, after = after_a_change(build(**base))
    changed = measure(after, max(args.repeat, 9), (as_controller,))
    later = replace(settled, now=settled.now + 1)
    repeat = max(args.repeat, 9)
    kept_changed = kept(settled, after, repeat)
    kept_unchanged, told_unchanged = (kept(settled, later, repeat),
                                      kept(settled, later, repeat, told=True))
    rows = [*zip(HEAPS, headline, strict=True), ("changed", changed[0]),
            ("changed, kept", kept_changed),
            ("changed, told", kept(settled, after, repeat, told=True)),
            ("unchanged, kept", kept_unchanged), ("unchanged, told", told_unchanged)]
    for heap, (seconds, cpu, least, collecting, admitted) in rows:
        table.add_row("10000", "2000", "1000", heap, str(admitted), f"{seconds * 1000:.0f}",
                      f"{cpu * 1000:.0f}", f"{least * 1000:.0f}", f"{collecting * 1000:.0f}")
    if args.large:
        large = measure(build(**LARGE), args.repeat, (run_cycle, as_controller))
        for heap, (seconds, cpu, least, collecting, admitted) in zip(HEAPS, large, strict=True):
            table.add_row(*(str(LARGE[k]) for k in ("pending", "nodes", "leaves")), heap,
                          str(admitted), f"{seconds * 1000:.0f}", f"{cpu * 1000:.0f}",
                          f"{least * 1000:.0f}", f"{collecting * 1000:.0f}")
    curves: dict[str, list[tuple[int, float]]] = {}
    if not args.quick:
        sweeps = {"pending": [1_000, 2_500, 5_000, 10_000], "nodes": [250, 500, 1_000, 2_000],
                  "leaves": [10, 100, 500, 1_000]}
        for dimension, values in sweeps.items():
            for value in values:
                shape = {**base, dimension: value}
                [(seconds, cpu, least, collecting, admitted)] = measure(build(**shape),
                                                                        args.repeat)
                curves.setdefault(dimension, []).append((value, cpu))
                table.add_row(str(shape["pending"]), str(shape["nodes"]), str(shape["leaves"]),
                              HEAPS[0], str(admitted), f"{seconds * 1000:.0f}",
                              f"{cpu * 1000:.0f}", f"{least * 1000:.0f}",
                              f"{collecting * 1000:.0f}")
    console.print(table)
    console.print(f"after one change on the kept core: {kept_changed[1] * 1000:.1f} ms CPU median "
                  f"(target {CHANGED_TARGET_MS} ms); with nothing changed: "
                  f"{kept_unchanged[1] * 1000:.2f} ms (told by events: "
                  f"{told_unchanged[1] * 1000:.3f} ms)")
    console.print(f"peak resident memory: {_peak_mb():.0f} MB")
    (_, live, live_least, _, _), (_, frozen, frozen_least, _, _) = headline
    console.print(f"headline cpu, frozen / live: median {frozen / live:.2f}, "
                  f"least {frozen_least / live_least:.2f}")
    if args.passes:
        memory = Table(title=f"{args.passes} passes on fresh headline snapshots")
        for column in ("heap", "cycle cpu ms", "pass cpu ms", "of which gc ms",
                       f"resident MB after {min(args.passes, SETTLED)}", f"after {args.passes}",
                       f"tracked after {min(args.passes, SETTLED)}",
                       f"after {args.passes}"):
            memory.add_column(column, justify="right")
        for heap, decide in zip(HEAPS, (run_cycle, as_controller), strict=True):
            memory.add_row(heap, *passes(args.passes, decide, base))
        console.print(memory)
    if args.plot and curves:
        plot(curves, args.plot)


def _build() -> str:
    """Whether the core under test is the mypyc build or its Python source."""
    return "compiled (mypyc)" if cycle_module.__file__.endswith(".so") else "pure Python"


def plot(curves: dict[str, list[tuple[int, float]]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for axis, (dimension, points) in zip(axes, curves.items(), strict=True):
        axis.plot([p[0] for p in points], [p[1] * 1000 for p in points], marker="o")
        axis.axhline(TARGET_MS, color="tab:red", linestyle="--", linewidth=1,
                     label=f"target {TARGET_MS} ms")
        axis.set_xlabel(dimension)
        axis.set_ylabel("cycle CPU ms")
        axis.set_ylim(bottom=0, top=TARGET_MS * 1.2)
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right")
    figure.suptitle("admission cycle time; the other two dimensions at 10k / 2k / 1k")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


if __name__ == "__main__":
    main()


