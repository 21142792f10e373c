"""Why short (debug) jobs wait: what holds the GPUs at the moments they do, on the scenario family.

Run: `.venv/bin/python benchmarks/bench_debug_waits.py --seeds 19 15` simulates each seed of the
family (`ai2_family.py`, 7 days by default; `--scale` as in `bench_impact.py`) with the cycle
watched, and prints one row per seed: the short jobs, how many waited over a minute and the p90
wait (first start − submission, as score.py counts it); then, averaged over the cycles in which
some short job had waited over a minute and still did not start, the GPUs held by long work
inside its protected min runtime, by long non-resumable work past it (no short job may take
it), by long resumable work past it (the only long work a short job may requeue), by other
short jobs, by unfunded work, and idle; the part of those cycles with a drain holding nodes;
the short jobs requeued by long work (a drain or a swap), which lose their progress; and which
admissions took the short jobs' last room (a node with `ShortJobs.max_gpus` GPUs idle or yielding):
short or unfunded work, which may, or long work, which may only where keeping the room would idle
more GPUs than it keeps (`Headroom.refusal`).
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import bench_impact
from rich.console import Console
from rich.table import Table

from admitter.api.convert import core_cycle_settings
from admitter.api.scenario_file import parse_scenario
from admitter.core.decisions import CycleResult, PendingReason, Snapshot
from admitter.core.headroom import yielded_gpus
from admitter.core.incremental import IncrementalCore
from admitter.core.model import GPU, Phase, Workload, held_per_node
from admitter.core.policy import ShortJobs
from admitter.sim.engine import Simulation

WAITED = 60.0
"""A short job waiting longer than this misses Ai2's debug p90 goal."""
HOLDERS = ("protected", "past, non-resumable", "past, resumable", "short", "unfunded", "idle")


def _holder(workload: Workload, now: float, short: ShortJobs) -> str:
    if not workload.funded:
        return "unfunded"
    if short.is_short(workload):
        return "short"
    until = workload.protected_until()
    if until is not None and until > now:
        return "protected"
    return "past, resumable" if workload.resumable else "past, non-resumable"


def _schedulable_gpus(snapshot: Snapshot) -> dict[str, int]:
    """GPUs per schedulable node, less those of pods admitter does not manage."""
    return {n.name: n.allocatable.get(GPU, 0) - n.used.get(GPU, 0)
            for n in snapshot.nodes if not n.unschedulable}


def _has_room(snapshot: Snapshot, admitted: list[Workload]) -> bool:
    """Whether some schedulable node has `ShortJobs.max_gpus` GPUs idle or held by yielding
    work."""
    room = _schedulable_gpus(snapshot)
    threshold, short = snapshot.settings.non_preemptible_priority, snapshot.settings.short_jobs
    for workload in admitted:
        yielded = yielded_gpus(workload, snapshot.now, threshold, short) or {}
        for node, gpus in held_per_node(workload, GPU).items():
            if node in room:
                room[node] -= gpus - yielded.get(node, 0)
    return any(gpus >= short.max_gpus for gpus in room.values())


class Watch:
    """Wraps the simulator's core (`IncrementalCore.cycle`) and tallies what the module
    docstring describes."""

    def __init__(self) -> None:
        self.started: set[str] = set()
        self.cycles = 0
        self.drained = 0
        self.held: Counter[str] = Counter()
        self.room_lost: Counter[str] = Counter()

    def __call__(self, core: IncrementalCore, now: float, usage: Mapping[str, float],
                 short_gpus: float) -> CycleResult:
        snapshot = core.snapshot(now, usage, short_gpus)
        result = core.cycle(now, usage, short_gpus)
        by_key = {w.key: w for w in snapshot.workloads}
        is_short = snapshot.settings.short_jobs.is_short
        admitted = [w for w in snapshot.workloads if w.phase is Phase.ADMITTED]
        starting = {a.key for a in result.admissions}
        if any(w.phase is Phase.PENDING and is_short(w) and w.key not in self.started
               and w.key not in starting and now - w.submitted_at > WAITED
               for w in snapshot.workloads):
            self.cycles += 1
            self.drained += any(p.reason is PendingReason.RESERVED for p in result.pending)
            free = _schedulable_gpus(snapshot)
            for workload in admitted:
                for node, gpus in held_per_node(workload, GPU).items():
                    if node in free:  # not on a cordoned node
                        self.held[_holder(workload, now, snapshot.settings.short_jobs)] += gpus
                        free[node] -= gpus
            self.held["idle"] += sum(free.values())
        self.started |= starting
        evicted = {e.key for e in result.evictions}
        after = [w for w in admitted if w.key not in evicted] + [
            by_key[a.key].admitted(now, a.pod_set_nodes) for a in result.admissions]
        if _has_room(snapshot, admitted) and not _has_room(snapshot, after):
            long_start = any(by_key[a.key].funded and not is_short(by_key[a.key])
                             for a in result.admissions)
            self.room_lost["long work" if long_start else "short or unfunded"] += 1
        return result


def run(family_dir: Path, seed: int, days: int, scale: float) -> list[str]:
    family = bench_impact._load(family_dir / "ai2_family.py")
    generated = bench_impact._scaled(family.generate(seed, days), scale)
    scenario = parse_scenario(generated, f"seed{seed}-{days}d.yaml")
    watch = Watch()
    outcome = Simulation(scenario, decide=watch, reasons=True).run()
    is_short = core_cycle_settings(scenario.settings).short_jobs.is_short
    short = [job for job in outcome.jobs if is_short(job.instance.pending)]
    waits = sorted((job.first_start if job.first_start is not None else outcome.end)
                   - job.instance.submitted_at for job in short)
    p90 = waits[min(len(waits) - 1, int(0.9 * len(waits)))] if waits else 0.0
    short_keys = {job.key for job in short}
    requeued = sum(1 for job in short for stint in job.stints
                   if stint.preemptor is not None and stint.preemptor not in short_keys)
    cycles = max(1, watch.cycles)
    return [str(seed), str(days), str(outcome.accounting.gpus), str(len(short)),
            str(sum(w > WAITED for w in waits)), f"{p90:.0f} s",
            *(f"{watch.held[h] / cycles:.1f}" for h in HOLDERS),
            f"{watch.drained / cycles:.0%}", str(requeued),
            ", ".join(f"{k} {v}" for k, v in sorted(watch.room_lost.items())) or "-"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of workloads kept")
    parser.add_argument("--scenarios", type=Path, help="folder of ai2_family.py and score.py")
    args = parser.parse_args()
    family_dir = bench_impact._family_dir(args.scenarios)
    table = Table(title=f"short jobs' waits, GPUs held while one has waited over {WAITED:g} s")
    for column in ("seed", "days", "GPUs", "short jobs", f"> {WAITED:g} s", "p90",
                   *HOLDERS, "drain on", "requeued by long work", "last room taken by"):
        table.add_column(column, justify="right")
    rows = [run(family_dir, seed, args.days, args.scale) for seed in args.seeds]
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    print(f"median p90 over the seeds: {statistics.median(float(r[5][:-2]) for r in rows):.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
