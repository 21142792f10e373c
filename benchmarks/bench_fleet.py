"""A fleet against one cluster: the same small Jobs through admitter over 1 manager and 2
workers, and over one cluster with as many nodes; with `--with-multikueue`, through Kueue's
MultiKueue over the same three control-plane shapes too.

    nice .venv/bin/python benchmarks/bench_fleet.py [--jobs 1000] [--nodes 8] [--runtime 5s]
        [--ways single,fleet] [--with-multikueue]

Each way gets fresh control planes and creates the same Jobs (one pod of `nvidia.com/gpu: 1`,
KWOK runs it for `--runtime`) with 32 creations in flight, into one ClusterQueue whose quota is
every GPU.

- single: admitter on one control plane with `--nodes` nodes of 8 GPUs; Jobs start in place.
- fleet: admitter on a manager with no GPU nodes of its own and two workers (`west`, `east`)
  with half the nodes each, registered by Secret and WorkerCluster (`docs/fleet.md`); each
  admitted Job is created as one copy in the worker the core chose.
- kueue: Kueue v0.17's manager on the single way's control plane.
- multikueue: Kueue's MultiKueue on the fleet way's three control planes, Kueue's manager on
  each; the manager's ClusterQueue holds every GPU behind the `multikueue` AdmissionCheck, each
  worker's ClusterQueue its own GPUs (`kueue_fleet.py` says how Kueue is run and configured).
  `--with-multikueue` adds this way (it builds Kueue's manager first, ~200 s once).

admitter's controller runs as its own process (`controller_process.py`), Kueue's as its
binary. The clock runs from the first creation to the moment every Workload on the manager is
Finished. Admissions per second counts to the last admission (admitter: its Workload's
`QuotaReserved`, the decision that places it; Kueue: `Admitted`, which MultiKueue sets once a
worker admitted its copy); writes per admission sums every API server's writes (the manager's
and the workers', from all their clients: the Job controllers, the schedulers, KWOK, admitter
or Kueue) over the run, divided by the Jobs.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import kueue_fleet
from common import (
    ROOT,
    api_writes,
    bounded,
    control_plane,
    create_leaf_queue,
    follow,
    machine,
    node_layout,
    process_cpu,
    wait_until,
)
from controller_process import ControllerProcess, ControllerStats, describe
from rich.console import Console
from rich.table import Table

from admitter.api.workercluster import CONDITION_REACHABLE
from admitter.api.workload import CONDITION_ADMITTED, CONDITION_FINISHED, CONDITION_QUOTA_RESERVED
from admitter.kube import client as kube
from admitter.kube.client import Kind, Kube
from admitter.kube.objects import Obj, condition
from admitter.testing import GPU_RESOURCE, LocalCluster
from admitter.testing.in_process import background

from builders.kube import JobWrapper, namespace

NAMESPACE = "fleet"
ADMITTER_NAMESPACE = "admitter-system"
WORKERS = ("west", "east")
ADMITTER_WAYS = ("single", "fleet")
KUEUE_WAYS = ("kueue", "multikueue")
WAYS = ADMITTER_WAYS + KUEUE_WAYS
FLEET_WAYS = ("fleet", "multikueue")
"""The ways on a manager and two workers; the others run on one control plane."""
SETTINGS = {"cycle": "1s", "fairShare": {"window": 0}}


@dataclass
class Run:
    way: str
    jobs: int
    created_in: float = float("nan")
    last_admission: float = float("nan")
    """Seconds from the first creation to the last admission seen."""
    all_finished: float = float("nan")
    admitted: int = 0
    finished: int = 0
    writes: dict[str, int] = field(default_factory=dict)
    """API writes during the run, per control plane."""
    timed_out: bool = False
    controller: ControllerStats | None = None
    """admitter's own counts; None for Kueue, whose writes only the API servers count."""
    controller_cpu: float = float("nan")
    """CPU seconds of the admission controller's processes (Kueue: all three)."""

    @property
    def all_admitted(self) -> float:
        return self.last_admission if self.admitted == self.jobs else math.nan

    def admissions_per_second(self) -> float:
        """To the last admission: of every Job, or of those admitted before the timeout."""
        return self.admitted / self.last_admission if self.last_admission > 0 else math.nan

    def writes_per_admission(self) -> float:
        return sum(self.writes.values()) / max(self.admitted, 1)


def small_job(index: int, runtime: str) -> Obj:
    return (JobWrapper(f"small-{index:05d}", NAMESPACE).gpus(1).runtime(runtime).obj())


def control_planes(stack: contextlib.ExitStack, fleet: bool, nodes: int,
                   manager_crds: tuple[Path, ...], worker_crds: tuple[Path, ...]
                   ) -> dict[str, LocalCluster]:
    """Fresh control planes: `manager` alone with every GPU node, or a `manager` with one CPU
    node and the workers with half the GPU nodes each."""
    if not fleet:
        return {"manager": stack.enter_context(control_plane(
            node_layout(nodes, cpu=64, gpus=8, pods=110), manager_crds))}
    manager = stack.enter_context(control_plane(node_layout(1, cpu=64), manager_crds))
    workers = {name: stack.enter_context(control_plane(
        replace(node_layout(size, cpu=64, gpus=8, pods=110), name_prefix=f"{name}-node"),
        worker_crds))
        for name, size in zip(WORKERS, worker_nodes(nodes), strict=True)}
    return {"manager": manager, **workers}


def worker_nodes(nodes: int) -> tuple[int, int]:
    return nodes - nodes // 2, nodes // 2


async def register_workers(manager: Kube, workers: dict[str, LocalCluster]) -> None:
    """Each worker's kubeconfig in a Secret, its WorkerCluster, and the Jobs' namespace in
    it; returns once the manager reports every worker Reachable."""
    await manager.request("POST", "/api/v1/namespaces", namespace(ADMITTER_NAMESPACE))
    for name, cluster in workers.items():
        secret = f"{name}-kubeconfig"
        await manager.create(kube.SECRETS, {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": ADMITTER_NAMESPACE},
            "data": {"kubeconfig": base64.b64encode(cluster.kubeconfig_path.read_bytes())
                     .decode()}})
        await manager.create(kube.WORKER_CLUSTERS, {
            "apiVersion": "admitter.dev/v1alpha1", "kind": "WorkerCluster",
            "metadata": {"name": name}, "spec": {"kubeconfig": {"name": secret}}})
        worker = await Kube.from_kubeconfig(str(cluster.kubeconfig_path))
        await worker.request("POST", "/api/v1/namespaces", namespace(NAMESPACE))
        await worker.close()


async def workers_reachable(manager: Kube) -> None:
    for _ in range(600):
        listed = (await manager.list(kube.WORKER_CLUSTERS))["items"]
        if listed and all((condition(wc, CONDITION_REACHABLE) or {}).get("status") == "True"
                          for wc in listed):
            return
        await asyncio.sleep(0.5)
    raise TimeoutError("the workers were not reported Reachable within 300 s")


async def measure(result: Run, client: Kube, clusters: dict[str, LocalCluster],
                  workloads: Kind, admission: str, make_job: Callable[[int], Obj],
                  timeout: float) -> None:
    """Create the Jobs on the manager and follow its Workloads until every one is Finished,
    an admission being the condition `admission` turning True: the clock, the counts and
    every control plane's API writes go into `result`."""
    admitted: set[str] = set()
    finished: set[str] = set()
    started = time.monotonic()

    def on_workload(_type: str, wl: Obj) -> None:
        name = wl["metadata"]["name"]
        if (condition(wl, admission) or {}).get("status") == "True" and name not in admitted:
            admitted.add(name)
            result.last_admission = time.monotonic() - started
        if (condition(wl, CONDITION_FINISHED) or {}).get("status") == "True":
            finished.add(name)

    async with background(follow(client, workloads, on_workload)) as tasks:
        before = {name: api_writes(c) for name, c in clusters.items()}
        started = time.monotonic()
        await bounded([client.create(kube.JOBS, make_job(i)) for i in range(result.jobs)])
        result.created_in = time.monotonic() - started
        try:
            await wait_until(lambda: len(finished) >= result.jobs, timeout,
                             "every Workload Finished", tasks)
            result.all_finished = time.monotonic() - started
        except TimeoutError:
            result.timed_out = True
        result.admitted, result.finished = len(admitted), len(finished)
        result.writes = {name: api_writes(c) - before[name] for name, c in clusters.items()}


def announce(way: str, jobs: int, runtime: str, nodes: int) -> None:
    print(f"{way}: {jobs} Jobs of 1 GPU for {runtime} on {nodes} nodes x 8 GPUs", flush=True)


async def run_admitter(way: str, nodes: int, jobs: int, runtime: str, timeout: float) -> Run:
    result = Run(way, jobs)
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as work:
        # the fleet's manager: one CPU node, left out of the model once WorkerClusters exist
        clusters = control_planes(stack, way == "fleet", nodes, (ROOT / "crds",), ())
        manager, workers = clusters.pop("manager"), clusters
        client = await Kube.from_kubeconfig(str(manager.kubeconfig_path))
        await create_leaf_queue(client, NAMESPACE, GPU_RESOURCE, nodes * 8)
        if workers:
            await register_workers(client, workers)
        controller = ControllerProcess(manager.kubeconfig_path, Path(work), SETTINGS)
        if workers:
            await workers_reachable(client)
        await asyncio.sleep(3.0)  # informers listed before the first Job
        announce(way, jobs, runtime, nodes)
        await measure(result, client, {"manager": manager, **workers}, kube.WORKLOADS,
                      CONDITION_QUOTA_RESERVED, lambda i: small_job(i, runtime), timeout)
        result.controller = controller.stop()
        result.controller_cpu = result.controller.cpu_seconds
        await client.close()
    return result


async def run_kueue(way: str, nodes: int, jobs: int, runtime: str, timeout: float) -> Run:
    """Kueue's manager on every control plane; over a fleet, MultiKueue on the manager."""
    result = Run(way, jobs)
    build = kueue_fleet.build()
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as work:
        crds = (kueue_fleet.write_crds(build.source, Path(work) / "crds"),)
        clusters = control_planes(stack, way == "multikueue", nodes, crds, crds)
        kueues = [stack.enter_context(kueue_fleet.KueueProcess.start(
            build, cluster, Path(work) / name)) for name, cluster in clusters.items()]
        workers = {name: c for name, c in clusters.items() if name != "manager"}
        for name, size in zip(WORKERS, worker_nodes(nodes), strict=True):
            if name in workers:
                kueue_fleet.apply(workers[name], kueue_fleet.queues(NAMESPACE, size * 8))
        manager = clusters["manager"]
        if workers:
            kueue_fleet.apply(manager, kueue_fleet.multikueue(workers))
        kueue_fleet.apply(manager, kueue_fleet.queues(
            NAMESPACE, nodes * 8, kueue_fleet.CHECK if workers else None))
        client = await Kube.from_kubeconfig(str(manager.kubeconfig_path))
        for cluster in workers.values():
            worker = await Kube.from_kubeconfig(str(cluster.kubeconfig_path))
            await kueue_fleet.all_active(worker, (kueue_fleet.CLUSTER_QUEUES,))
            await worker.close()
        fleet_kinds = (kueue_fleet.MULTIKUEUE_CLUSTERS, kueue_fleet.ADMISSION_CHECKS)
        await kueue_fleet.all_active(
            client, (kueue_fleet.CLUSTER_QUEUES, *(fleet_kinds if workers else ())))
        await asyncio.sleep(3.0)
        announce(way, jobs, runtime, nodes)
        await measure(result, client, clusters, kueue_fleet.WORKLOADS, CONDITION_ADMITTED,
                      lambda i: kueue_fleet.job(small_job(i, runtime), bool(workers)), timeout)
        for process in kueues:
            process.raise_if_exited()
        result.controller_cpu = sum(process_cpu(process.pid) for process in kueues)
        await client.close()
    return result


def report(runs: list[Run], nodes: int, runtime: str, console: Console) -> None:
    table = Table(title=f"fleet: {runs[0].jobs:,} Jobs of 1 GPU for {runtime} on {nodes} nodes "
                        f"x 8 GPUs ({datetime.date.today()}, {machine()})")
    for column in ("way", "created s", "all admitted s", "admissions/s", "all finished s",
                   "finished", "API writes per admission (by control plane)",
                   "ctl writes/admission", "ctl passes", "ctl cpu s"):
        table.add_column(column, justify="right")
    for run in runs:
        per = max(run.admitted, 1)
        by_plane = ", ".join(f"{name} {count / per:.2f}" for name, count in run.writes.items())
        stats = run.controller
        admitted = (f"{run.all_admitted:.1f}" if run.admitted == run.jobs
                    else f"{run.admitted:,} by {run.last_admission:.1f}")
        table.add_row(
            run.way, f"{run.created_in:.1f}", admitted,
            f"{run.admissions_per_second():.1f}",
            "— (timed out)" if run.timed_out else f"{run.all_finished:.1f}",
            f"{run.finished:,}",
            f"{run.writes_per_admission():.2f} ({by_plane})",
            "—" if stats is None else f"{stats.writes / max(stats.admissions, 1):.2f}",
            "—" if stats is None else f"{stats.passes}", f"{run.controller_cpu:.0f}")
    console.print(table)
    for run in runs:
        if run.controller is not None:
            console.print(f"{run.way} controller {describe(run.controller)}")
    by_way = {run.way: run for run in runs}
    for ours, theirs in (("fleet", "multikueue"), ("single", "kueue")):
        if ours in by_way and theirs in by_way:
            console.print(ratio(by_way[ours], by_way[theirs]))


def ratio(ours: Run, theirs: Run) -> str:
    return (f"{ours.way} / {theirs.way}: "
            f"{ours.admissions_per_second() / theirs.admissions_per_second():.2f}x the "
            f"admissions per second, "
            f"{ours.writes_per_admission() / theirs.writes_per_admission():.2f}x the writes "
            f"per admission, {ours.all_finished / theirs.all_finished:.2f}x the time to finish "
            f"all")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=8,
                        help="8-GPU nodes in all: the single cluster's, or the workers' halves")
    parser.add_argument("--runtime", default="5s", help="how long KWOK runs each pod")
    parser.add_argument("--ways", default=",".join(ADMITTER_WAYS),
                        help=f"comma-separated, from {', '.join(WAYS)}")
    parser.add_argument("--with-multikueue", action="store_true",
                        help="add the multikueue way: Kueue's MultiKueue on the fleet's shape")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per way, seconds")
    args = parser.parse_args()
    if args.nodes < 2:
        parser.error(f"--nodes {args.nodes}: the fleet needs at least one node per worker")
    ways = [w for w in args.ways.split(",") if w]
    if args.with_multikueue and "multikueue" not in ways:
        ways.append("multikueue")
    unknown = set(ways) - set(WAYS)
    if unknown:
        parser.error(f"unknown ways: {', '.join(sorted(unknown))}")
    runs = []
    for way in ways:
        run = asyncio.run((run_kueue if way in KUEUE_WAYS else run_admitter)(
            way, args.nodes, args.jobs, args.runtime, args.timeout))
        print(f"{way}: {run.admitted} admitted by {run.last_admission:.1f} s, {run.finished} "
              f"finished, {run.writes_per_admission():.2f} API writes per admission", flush=True)
        runs.append(run)
    report(runs, args.nodes, args.runtime, Console(width=200))


if __name__ == "__main__":
    main()
