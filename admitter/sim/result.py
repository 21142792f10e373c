"""`result.json`: the figures of one run, deterministic to the byte except `wall_s`.

Every number is rounded to 6 decimals, keys are sorted and workloads listed in file order, so
the same file gives the same text whatever the seed. Waits are first start − submission;
percentiles are nearest-rank (the smallest wait with at least p % of the started workloads at
or below it) over workloads that started; those that never started are counted separately as
`never_started`. Preemptions count every eviction it came back from: preempted, reclaimed,
drained and timed out; a stop at its maximum run time ends a workload
(`stopped_at_max_runtime`) and is no preemption.

Owed is Ai2's (`owed`): the run's schedulable GPU-time water-filled by weight down the tree,
each team capped by the funded work it submitted that could run. Delivered counts every run of
funded work, including those later wasted (the run of non-resumable work that was evicted, and
lost its progress); `wasted_fraction` is the wasted part of the funded GPU-time delivered. The
owed-delivered ratio caps each team at what it is owed: a team served beyond its part does not
make up for one served short."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from admitter.core.decisions import EvictionReason
from admitter.sim.engine import Outcome
from admitter.sim.jobs import Job, Stint
from admitter.sim.owed import owed_gpu_seconds, runnable_gpu_seconds

HOUR = 3600.0
STOPPED_FOR_GOOD = EvictionReason.MAX_RUNTIME_EXCEEDED.value
Result = dict[str, Any]


def percentile(values: Iterable[float], p: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _ratio(part: float, whole: float) -> float | None:
    return _r(part / whole) if whole > 0 else None


def _waits(jobs: Sequence[Job]) -> dict[str, Any]:
    waits = [job.first_start - job.instance.submitted_at for job in jobs
             if job.first_start is not None]
    return {
        "wait_p50_s": _r(percentile(waits, 50)),
        "wait_p90_s": _r(percentile(waits, 90)),
        "never_started": len(jobs) - len(waits),
    }


def _requeued(job: Job) -> list[Stint]:
    """The stints that ended in an eviction the job came back from (a stop at its maximum run
    time ends it: no preemption)."""
    return [s for s in job.stints if s.reason is not None and s.reason != STOPPED_FOR_GOOD]


def _evictions(job: Job) -> int:
    return len(_requeued(job))


def _workload(job: Job) -> dict[str, Any]:
    instance = job.instance
    start = job.first_start
    stops = _requeued(job)
    return {
        "name": instance.key,
        "queue": instance.queue,
        "class": instance.workload_class,
        "gpus": instance.gpus,
        "funded": instance.pending.funded,
        "submitted_s": _r(instance.submitted_at),
        "wait_s": None if start is None else _r(start - instance.submitted_at),
        "finished_s": _r(job.finished_at),
        "preemptions": len(stops),
        "starts": [{"at_s": _r(s.start), "nodes": dict(sorted(s.nodes.items()))}
                   for s in job.stints],
        "stops": [{"at_s": _r(s.end), "reason": s.reason, "by": s.preemptor} for s in stops],
        "stopped_at_max_runtime": bool(job.stints) and job.stints[-1].reason == STOPPED_FOR_GOOD,
    }


def build_result(outcome: Outcome, wall_s: float) -> Result:
    """The figures of `outcome`; `wall_s` is the only field that varies between runs."""
    acc = outcome.accounting
    owed_s = owed_gpu_seconds(acc.tree, acc.capacity_time, runnable_gpu_seconds(
        (job.instance for job in outcome.jobs), outcome.end))
    by_queue: dict[str, list[Job]] = {leaf: [] for leaf in acc.leaves}
    by_class: dict[str, list[Job]] = {}
    for job in outcome.jobs:
        by_queue[job.instance.queue].append(job)
        by_class.setdefault(job.instance.workload_class, []).append(job)
    queues = {
        leaf: {
            "owed_gpu_hours": _r(owed_s[leaf] / HOUR),
            "delivered_gpu_hours": _r(acc.delivered[leaf] / HOUR),
            "unfunded_gpu_hours": _r(acc.unfunded[leaf] / HOUR),
            "delivered_over_owed": _ratio(acc.delivered[leaf], owed_s[leaf]),
            "workloads": len(jobs),
            "preemptions": sum(_evictions(job) for job in jobs),
            **_waits(jobs),
        }
        for leaf, jobs in by_queue.items()
    }
    classes = {name: {"count": len(jobs), **_waits(jobs)} for name, jobs in by_class.items()}
    owed, delivered = sum(owed_s.values()), sum(acc.delivered.values())
    owed_met = sum(min(acc.delivered[leaf], owed_s[leaf]) for leaf in acc.leaves)
    unfunded = sum(acc.unfunded.values())
    workloads = [_workload(job) for job in sorted(outcome.jobs, key=lambda j: j.instance.order)]
    summary = {
        "scenario": outcome.scenario.name,
        "simulated_s": _r(outcome.end),
        "wall_s": _r(wall_s),
        "gpus": acc.gpus,
        "cycles": outcome.cycles,
        "occupancy": _ratio(acc.occupied, acc.capacity_time),
        "owed_gpu_hours": _r(owed / HOUR),
        "delivered_gpu_hours": _r(delivered / HOUR),
        "unfunded_gpu_hours": _r(unfunded / HOUR),
        "owed_delivered_ratio": _ratio(owed_met, owed),
        "unfunded_fraction": _ratio(unfunded, delivered + unfunded),
        "preemptions": sum(w["preemptions"] for w in workloads),
        "wasted_gpu_hours": _r(outcome.wasted_gpu_s / HOUR),
        "wasted_fraction": _ratio(outcome.wasted_gpu_s, delivered),
        "workloads": len(workloads),
        "unfinished": sum(1 for w in workloads if w["finished_s"] is None),
        "unsubmitted": outcome.unsubmitted,
    }
    return {"summary": summary, "queues": queues, "classes": classes, "workloads": workloads}


def write_result(result: Result, path: Path) -> None:
    path.write_text(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
