"""Kueue's scheduler-performance shapes on admitter and the local control plane.

    .venv/bin/python benchmarks/bench_kueue_shape.py [--shape baseline|large-scale]
        [--mode workloads|jobs|both] [--cohorts N] [--job-cohorts 1] [--profile DIR]

Kueue's suite (`test/performance/scheduler/configs/baseline`): 5 cohorts of 6 ClusterQueues
(nominal 20 CPU, borrowing limit 100, reclaim within the cohort, preemption of lower
priority inside a queue), 500 Workloads per queue: 350 small (1 CPU, 200 ms, one every
100 ms), 100 medium (5 CPU, 500 ms, every 500 ms), 50 large (20 CPU, 1 s, every 1.2 s).
Its large-scale shape (`LARGE_SCALE`): 10 cohorts of 100 queues, 50 Workloads per queue.
admitter's version: a parent ClusterQueue per cohort (quota = limit = the children's quotas)
with its children (quota 20, limit 120), one namespace and LocalQueue per child, nodes with
as many CPUs as the quotas in all.

Modes:
- workloads: Workload objects created directly; the benchmark marks one Finished once its
  runtime has passed since it saw it admitted (as Kueue's runner does); the controller then
  releases its quota.
- jobs: suspended batch/v1 Jobs (as the webhook leaves them), one pod each; KWOK completes
  the pod after its runtime, the job controller completes the Job, the controller finishes
  the Workload. Smaller by default (`--job-cohorts 1`: 3,000 Jobs, 120 CPUs; the per-queue
  shape and so the capacity bound are unchanged).

Each mode gets a fresh control plane. Reported: wall time from the first creation to the last
finish, its ratio to the capacity bound (CPU-seconds of work / CPUs), mean and p90 time from
creation to (last) admission per class, and the controller's API writes per admission.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from common import (
    control_plane,
    control_plane_cpu,
    create_leaf_queue,
    follow,
    machine,
    node_layout,
    wait_until,
    waits_cell,
)
from controller_process import ControllerProcess, ControllerStats, describe
from rich.console import Console
from rich.table import Table

from admitter.api.base import API_VERSION as ADMITTER_API
from admitter.api.workload import CONDITION_FINISHED, Reason
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, is_true
from admitter.testing.in_process import background

from builders.kube import JobWrapper, cluster_queue


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    count: int
    """Per queue."""
    interval: float
    runtime: float
    cpu: int
    kueue_priority: int
    priority: int
    """admitter's: Kueue's priorities 100 and 200 become 60 and 70, since admitter never
    preempts priority >= 100 and keeps it inside deserved quota, while Kueue's medium and
    large may borrow and be preempted."""


@dataclass(frozen=True)
class Shape:
    """One of Kueue's scheduler-performance shapes: cohorts of ClusterQueues (nominal quota,
    borrowing limit) and per queue the same streams of workload classes."""

    name: str
    cohorts: int
    """Kueue's own count; `--cohorts` runs fewer (the per-queue shape, and so the capacity
    bound, unchanged)."""
    queues_per_cohort: int
    classes: tuple[WorkloadClass, ...]
    quota: int = 20
    borrowing: int = 100

    @property
    def limit(self) -> int:
        return self.quota + self.borrowing

    def scaled(self, fraction: float) -> Shape:
        """The same queues with `fraction` of each class's workloads (at least one)."""
        if fraction == 1:
            return self
        classes = tuple(replace(c, count=max(1, round(c.count * fraction)))
                        for c in self.classes)
        return replace(self, name=f"{self.name} x{fraction:g}", classes=classes)

    def workloads(self, cohorts: int) -> int:
        return cohorts * self.queues_per_cohort * sum(c.count for c in self.classes)

    def kueue_generator(self, cohorts: int) -> Obj:
        """Kueue's runner config (`configs/baseline/generator.yaml`'s schema) for this shape."""
        return {"cohorts": [{"className": "cohort", "count": cohorts, "queuesSets": [{
            "className": "cq", "count": self.queues_per_cohort,
            "nominalQuota": self.quota, "borrowingLimit": self.borrowing,
            "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
            "workloadsSets": [{"count": c.count, "creationIntervalMs": round(c.interval * 1000),
                               "workloads": [{"className": c.name,
                                              "runtimeMs": round(c.runtime * 1000),
                                              "priority": c.kueue_priority,
                                              "request": c.cpu}]}
                              for c in self.classes]}]}]}


BASELINE = Shape("baseline", 5, 6, (
    WorkloadClass("small", 350, 0.1, 0.2, 1, 50, 50),
    WorkloadClass("medium", 100, 0.5, 0.5, 5, 100, 60),
    WorkloadClass("large", 50, 1.2, 1.0, 20, 200, 70),
))
"""Kueue's `configs/baseline` (v0.17.0): `bench_kueue_side_by_side.py` checks that
`kueue_generator` writes its file back."""
LARGE_SCALE = Shape("large-scale", 10, 100, (
    WorkloadClass("small", 35, 0.1, 0.15, 1, 50, 50),
    WorkloadClass("medium", 11, 0.5, 0.4, 5, 100, 60),
    WorkloadClass("large", 4, 1.2, 0.7, 20, 200, 70),
))
"""Kueue's large-scale shape, which the module pinned in hack/kueue does not ship: 10 cohorts
of 100 queues, 50 workloads a queue (35 small, 11 medium, 4 large, at the baseline's
priorities and creation intervals), running 150, 400 and 700 ms (its range, 150-700 ms)."""
SHAPES = {shape.name: shape for shape in (BASELINE, LARGE_SCALE)}
MIN_RUNTIME = "0.1s"
"""Funded (so entitled to the queue's fair share) but protected only briefly: Kueue has no
protection, so reclaim and priority preemption stay possible."""
CLASS_LABEL = "bench.admitter.dev/class"
SETTINGS: dict[str, Any] = {"cycle": "1s", "fairShare": {"window": 0}, "starvationBound": "30s"}
"""A 30 s starvation bound for runs of 0.2-1 s (the default, 30 min, suits GPU jobs of hours):
a large Job whose 20 CPUs never free up at once on one node, because 1-CPU Jobs keep taking
each CPU that frees, gets a node reserved after 30 s (Kueue reserves its quota instead)."""


def capacity_bound(shape: Shape, cohorts: int) -> tuple[float, int]:
    """(seconds, CPUs): the work's CPU-seconds over the CPUs of the cohorts' quotas."""
    cpus = cohorts * shape.queues_per_cohort * shape.quota
    work = cohorts * shape.queues_per_cohort * sum(c.count * c.cpu * c.runtime
                                                   for c in shape.classes)
    return work / cpus, cpus


@dataclass
class Record:
    cls: WorkloadClass
    created: float
    admitted: float | None = None
    finished: float | None = None
    admissions: int = 0
    holding: bool = False


@dataclass
class Run:
    """What one mode measured."""

    mode: str
    shape: Shape
    cohorts: int
    records: dict[str, Record] = field(default_factory=dict)
    started: float = 0.0
    controller: ControllerStats = field(default_factory=ControllerStats)
    own_writes: int = 0
    timed_out: bool = False
    timeout: float = 0.0
    control_plane_cpu: tuple[float, float] = (float("nan"), float("nan"))
    """CPU seconds during the run: kube-apiserver + etcd, and the other components."""

    def finished(self) -> int:
        return sum(1 for r in self.records.values() if r.finished is not None)

    def wall(self) -> float:
        ends = [r.finished for r in self.records.values() if r.finished is not None]
        return max(ends) - self.started if ends else float("nan")

    def waits(self, cls: str) -> list[float]:
        return [r.admitted - r.created for r in self.records.values()
                if r.cls.name == cls and r.admitted is not None]


def _is_finished(obj: Obj) -> bool:
    """A Workload that finished, or a Job that completed."""
    return is_true(obj, CONDITION_FINISHED) or is_true(obj, "Complete")


def _stamp(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class ShapeRun:
    """One mode on one control plane: queues, generator, watchers, finisher."""

    def __init__(self, client: Kube, mode: str, shape: Shape, cohorts: int) -> None:
        self.client = client
        self.shape = shape
        self.run = Run(mode, shape, cohorts)
        self.namespaces = [f"cq-{c}-{q}" for c in range(cohorts)
                           for q in range(shape.queues_per_cohort)]
        self.total = shape.workloads(cohorts)
        self.finishers: set[asyncio.Task[None]] = set()

    async def create_queues(self) -> None:
        shape = self.shape
        for c in range(self.run.cohorts):
            parent = shape.quota * shape.queues_per_cohort
            await self.client.create(kube.CLUSTER_QUEUES,
                                     cluster_queue(f"cohort-{c}", parent, limit=parent,
                                                   resource="cpu"))
        for ns in self.namespaces:
            cohort = "cohort-" + ns.split("-")[1]
            await create_leaf_queue(self.client, ns, "cpu", shape.quota, shape.limit, cohort)
        if self.run.mode == "jobs":
            for cls in shape.classes:
                await self.client.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
                    "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": f"bench-{cls.name}"}, "value": cls.priority,
                    "preemptionPolicy": "Never"})

    def workload(self, ns: str, name: str, cls: WorkloadClass) -> Obj:
        return {
            "apiVersion": ADMITTER_API, "kind": "Workload",
            "metadata": {"name": name, "namespace": ns, "labels": {CLASS_LABEL: cls.name}},
            "spec": {"queueName": "default", "priority": cls.priority,
                     "minRuntime": MIN_RUNTIME,
                     "podSets": [{"name": "main", "count": 1,
                                  "requests": {"cpu": str(cls.cpu)}}]},
        }

    def job(self, ns: str, name: str, cls: WorkloadClass) -> Obj:
        return (JobWrapper(name, ns).gpus(0).request("cpu", str(cls.cpu))
                .image("registry.invalid/bench").label(CLASS_LABEL, cls.name)
                .min_runtime(MIN_RUNTIME).runtime(f"{int(cls.runtime * 1000)}ms")
                .priority_class(f"bench-{cls.name}").obj())

    async def stream(self, ns: str, cls: WorkloadClass) -> None:
        """One of Kueue's generator loops: wait the interval, create, repeat."""
        for i in range(cls.count):
            await asyncio.sleep(cls.interval)
            name = f"{cls.name}-{i}"
            self.run.records[f"{ns}/{name}"] = Record(cls, time.time())
            if self.run.mode == "jobs":
                await self.client.create(kube.JOBS, self.job(ns, name, cls))
            else:
                await self.client.create(kube.WORKLOADS, self.workload(ns, name, cls))
            self.run.own_writes += 1

    async def generate(self) -> None:
        await asyncio.gather(*(self.stream(ns, cls) for ns in self.namespaces
                               for cls in self.shape.classes))

    def on_workload(self, _type: str, wl: Obj) -> None:
        meta = wl["metadata"]
        name = meta["name"] if self.run.mode == "workloads" else \
            (meta.get("labels") or {}).get("admitter.dev/job-name", "")
        record = self.run.records.get(f"{meta['namespace']}/{name}")
        if record is None:
            return
        admitted = bool((wl.get("status") or {}).get("admission")) and not _is_finished(wl)
        if admitted and not record.holding:
            record.admitted, record.admissions = time.time(), record.admissions + 1
            if self.run.mode == "workloads":
                task = asyncio.ensure_future(self.finish(wl, record.admissions))
                self.finishers.add(task)
                task.add_done_callback(self.finishers.discard)
        record.holding = admitted
        if self.run.mode == "workloads" and _is_finished(wl) and record.finished is None:
            record.finished = time.time()

    def on_job(self, _type: str, job: Obj) -> None:
        meta = job["metadata"]
        record = self.run.records.get(f"{meta['namespace']}/{meta['name']}")
        if record is not None and record.finished is None and _is_finished(job):
            record.finished = time.time()

    async def finish(self, wl: Obj, admission: int) -> None:
        """Mark the Workload Finished once its runtime has passed since it was admitted,
        unless it was evicted (and perhaps admitted again) meanwhile."""
        meta = wl["metadata"]
        record = self.run.records[f"{meta['namespace']}/{meta['name']}"]
        await asyncio.sleep(record.cls.runtime)
        if record.admissions != admission or not record.holding:
            return
        conditions = [c for c in (wl.get("status") or {}).get("conditions", [])
                      if c.get("type") != CONDITION_FINISHED]
        conditions.append({"type": CONDITION_FINISHED, "status": "True", "reason": Reason.SUCCEEDED,
                           "message": "runtime elapsed (benchmark)",
                           "lastTransitionTime": _stamp(time.time())})
        await self.client.patch(kube.WORKLOADS, meta["name"],
                                {"status": {"conditions": conditions}}, meta["namespace"],
                                subresource="status")
        self.run.own_writes += 1

    async def execute(self, timeout: float) -> Run:
        query = {"labelSelector": CLASS_LABEL}
        watchers = [follow(self.client, kube.WORKLOADS, self.on_workload,
                           None if self.run.mode == "jobs" else query)]
        if self.run.mode == "jobs":
            watchers.append(follow(self.client, kube.JOBS, self.on_job, query))
        async with background(*watchers) as tasks:
            self.run.started = time.time()
            generator = asyncio.ensure_future(self.generate())
            try:
                await wait_until(lambda: self.run.finished() >= self.total, timeout,
                                 f"{self.total} finished", [*tasks, generator])
            except TimeoutError:
                self.run.timed_out, self.run.timeout = True, timeout
            finally:
                for task in (generator, *self.finishers):
                    task.cancel()
                await asyncio.gather(generator, *self.finishers, return_exceptions=True)
        return self.run


async def run_mode(mode: str, shape: Shape, cohorts: int, timeout: float,
                   profile: Path | None, quiet_pending: bool = False) -> Run:
    queues = cohorts * shape.queues_per_cohort
    _, cpus = capacity_bound(shape, cohorts)
    nodes = max(1, cpus // 60)
    layout = node_layout(nodes, cpu=cpus // nodes, pods=1000)
    with control_plane(layout) as cluster, tempfile.TemporaryDirectory() as work:
        client = await Kube.from_kubeconfig(str(cluster.kubeconfig_path))
        shaped = ShapeRun(client, mode, shape, cohorts)
        await shaped.create_queues()
        controller = ControllerProcess(
            cluster.kubeconfig_path, Path(work), SETTINGS,
            None if profile is None else profile / f"controller-{mode}.txt",
            quiet_pending=quiet_pending)
        await asyncio.sleep(3.0)  # informers synced before the first creation
        print(f"{mode}: {queues} queues, {shaped.total} {mode}, {nodes} nodes x "
              f"{cpus // nodes} cpu", flush=True)
        before = control_plane_cpu(cluster)
        try:
            run = await shaped.execute(timeout)
        finally:
            run_stats = controller.stop()
            await client.close()
        after = control_plane_cpu(cluster)
        run.controller = run_stats
        run.control_plane_cpu = (after[0] - before[0], after[1] - before[1])
        return run


def report(runs: list[Run], console: Console) -> None:
    table = Table(title=f"Kueue {runs[0].shape.name} shape on admitter "
                  f"({datetime.date.today()}, {machine()})")
    for column in ("mode", "objects", "finished", "wall s", "capacity bound s", "ratio",
                   "small mean/p90 s (admitted)", "medium mean/p90 s (admitted)",
                   "large mean/p90 s (admitted)",
                   "ctl writes/admission", "evictions", "ctl passes", "ctl cycle s",
                   "ctl cpu s", "apiserver+etcd cpu s", "other components cpu s"):
        table.add_column(column, justify="right")
    for run in runs:
        bound, _ = capacity_bound(run.shape, run.cohorts)
        waits = {c.name: run.waits(c.name) for c in run.shape.classes}
        stats = run.controller
        table.add_row(
            run.mode, f"{len(run.records):,}",
            f"{run.finished():,}",
            f"> {run.timeout:.0f} (timed out)" if run.timed_out else f"{run.wall():.1f}",
            f"{bound:.0f}",
            f"> {run.timeout / bound:.1f}x" if run.timed_out else f"{run.wall() / bound:.2f}x",
            *(waits_cell(w) for w in waits.values()),
            f"{stats.writes / max(stats.admissions, 1):.2f}", f"{stats.evictions:,}",
            f"{stats.passes:,}", f"{stats.cycle_seconds:.1f}", f"{stats.cpu_seconds:.0f}",
            f"{run.control_plane_cpu[0]:.0f}", f"{run.control_plane_cpu[1]:.0f}")
    console.print(table)
    for run in runs:
        console.print(f"{run.mode} controller {describe(run.controller)}")
    if runs[0].shape is BASELINE:
        console.print("Kueue's calibrated result (rangespec, 5 trial runs): wall 351 s; mean "
                      "time to admission small 215 s, medium 77 s, large 6.7 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("workloads", "jobs", "both"), default="both")
    parser.add_argument("--shape", choices=tuple(SHAPES), default=BASELINE.name)
    parser.add_argument("--cohorts", type=int, help="workloads mode (default: the shape's)")
    parser.add_argument("--job-cohorts", type=int, default=1, help="jobs mode")
    parser.add_argument("--timeout", type=float, default=300.0, help="per mode, seconds")
    parser.add_argument("--quiet-pending", action="store_true",
                        help="experiment: the controller process skips pending-reason status "
                        "writes and events (shows what they cost; not the shipped behaviour)")
    parser.add_argument("--profile", type=Path,
                        help="directory for a pyinstrument profile of the controller process")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    modes = ("workloads", "jobs") if args.mode == "both" else (args.mode,)
    runs = []
    shape = SHAPES[args.shape]
    for mode in modes:
        cohorts = (args.cohorts or shape.cohorts) if mode == "workloads" else args.job_cohorts
        run = asyncio.run(run_mode(mode, shape, cohorts, args.timeout, args.profile,
                                   args.quiet_pending))
        if args.quiet_pending:
            run.mode += " (quiet pending)"
        runs.append(run)
    report(runs, Console(width=200))


if __name__ == "__main__":
    main()
