"""A fleet against one cluster: the same small Jobs through admitter over 1 manager and 2
workers, and over one cluster with as many nodes.

    nice .venv/bin/python benchmarks/bench_fleet.py [--jobs 1000] [--nodes 8] [--runtime 5s]
        [--ways single,fleet]

Each way gets fresh control planes and creates the same Jobs (one pod of `nvidia.com/gpu: 1`,
KWOK runs it for `--runtime`) with 32 creations in flight, into one ClusterQueue whose quota is
every GPU; the controller runs as its own process (`controller_process.py`).

- single: one control plane with `--nodes` nodes of 8 GPUs; Jobs start in place.
- fleet: a manager with no GPU nodes of its own and two workers (`west`, `east`) with half
  the nodes each, registered by Secret and WorkerCluster (`docs/fleet.md`); each admitted Job
  is created as one copy in the worker the core chose.

The clock runs from the first creation to the moment every Workload is Finished. Admissions
per second counts to the last first admission; writes per admission sums every API server's
writes (the manager's and the workers', from all their clients: the Job controllers, the
schedulers, KWOK, admitter) over the run, divided by the Jobs.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from common import (
    api_writes,
    bounded,
    control_plane,
    create_leaf_queue,
    follow,
    machine,
    node_layout,
    wait_until,
)
from controller_process import ControllerProcess, ControllerStats, describe
from rich.console import Console
from rich.table import Table

from admitter.api.workercluster import CONDITION_REACHABLE
from admitter.api.workload import CONDITION_FINISHED, CONDITION_QUOTA_RESERVED
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, condition
from admitter.testing import GPU_RESOURCE, LocalCluster
from admitter.testing.in_process import background

from builders.kube import JobWrapper, namespace

NAMESPACE = "fleet"
ADMITTER_NAMESPACE = "admitter-system"
WORKERS = ("west", "east")
WAYS = ("single", "fleet")
SETTINGS = {"cycle": "1s", "fairShare": {"window": 0}}


@dataclass
class Run:
    way: str
    jobs: int
    created_in: float = float("nan")
    all_admitted: float = float("nan")
    all_finished: float = float("nan")
    admitted: int = 0
    finished: int = 0
    writes: dict[str, int] = field(default_factory=dict)
    """API writes during the run, per control plane."""
    timed_out: bool = False
    controller: ControllerStats = field(default_factory=ControllerStats)


def small_job(index: int, runtime: str) -> Obj:
    return (JobWrapper(f"small-{index:05d}", NAMESPACE).gpus(1).runtime(runtime).obj())


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


async def run_way(way: str, nodes: int, jobs: int, runtime: str, timeout: float) -> Run:
    result = Run(way, jobs)
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as work:
        if way == "single":
            manager = stack.enter_context(control_plane(node_layout(nodes, cpu=64, gpus=8,
                                                                    pods=110)))
            clusters = {"manager": manager}
        else:  # one CPU node of its own, left out of the model once WorkerClusters exist
            manager = stack.enter_context(control_plane(node_layout(1, cpu=64)))
            workers = {name: stack.enter_context(control_plane(
                replace(node_layout(size, cpu=64, gpus=8, pods=110),
                        name_prefix=f"{name}-node"), crd_dirs=()))
                for name, size in zip(WORKERS, (nodes - nodes // 2, nodes // 2), strict=True)}
            clusters = {"manager": manager, **workers}
        client = await Kube.from_kubeconfig(str(manager.kubeconfig_path))
        await create_leaf_queue(client, NAMESPACE, GPU_RESOURCE, nodes * 8)
        if way == "fleet":
            await register_workers(client, workers)
        controller = ControllerProcess(manager.kubeconfig_path, Path(work), SETTINGS)
        if way == "fleet":
            await workers_reachable(client)
        await asyncio.sleep(3.0)  # informers listed before the first Job
        admitted: set[str] = set()
        finished: set[str] = set()

        def on_workload(_type: str, wl: Obj) -> None:
            name = wl["metadata"]["name"]
            if (condition(wl, CONDITION_QUOTA_RESERVED) or {}).get("status") == "True" \
                    and name not in admitted:
                admitted.add(name)
                if len(admitted) == jobs:
                    result.all_admitted = time.monotonic() - started
            if (condition(wl, CONDITION_FINISHED) or {}).get("status") == "True":
                finished.add(name)

        print(f"{way}: {jobs} Jobs of 1 GPU for {runtime} on {nodes} nodes x 8 GPUs",
              flush=True)
        async with background(follow(client, kube.WORKLOADS, on_workload)) as tasks:
            before = {name: api_writes(c) for name, c in clusters.items()}
            started = time.monotonic()
            await bounded([client.create(kube.JOBS, small_job(i, runtime))
                           for i in range(jobs)])
            result.created_in = time.monotonic() - started
            try:
                await wait_until(lambda: len(finished) >= jobs, timeout,
                                 "every Workload Finished", tasks)
                result.all_finished = time.monotonic() - started
            except TimeoutError:
                result.timed_out = True
            result.admitted, result.finished = len(admitted), len(finished)
            result.writes = {name: api_writes(c) - before[name] for name, c in clusters.items()}
        result.controller = controller.stop()
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
        table.add_row(
            run.way, f"{run.created_in:.1f}", f"{run.all_admitted:.1f}",
            f"{run.admitted / run.all_admitted:.1f}",
            f"{run.all_finished:.1f}" + (" (timed out)" if run.timed_out else ""),
            f"{run.finished:,}",
            f"{sum(run.writes.values()) / per:.2f} ({by_plane})",
            f"{run.controller.writes / max(run.controller.admissions, 1):.2f}",
            f"{run.controller.passes}", f"{run.controller.cpu_seconds:.0f}")
    console.print(table)
    for run in runs:
        console.print(f"{run.way} controller {describe(run.controller)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=8,
                        help="8-GPU nodes in all: the single cluster's, or the workers' halves")
    parser.add_argument("--runtime", default="5s", help="how long KWOK runs each pod")
    parser.add_argument("--ways", default=",".join(WAYS),
                        help=f"comma-separated, from {', '.join(WAYS)}")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per way, seconds")
    args = parser.parse_args()
    if args.nodes < 2:
        parser.error(f"--nodes {args.nodes}: the fleet needs at least one node per worker")
    ways = [w for w in args.ways.split(",") if w]
    unknown = set(ways) - set(WAYS)
    if unknown:
        parser.error(f"unknown ways: {', '.join(sorted(unknown))}")
    runs = [asyncio.run(run_way(way, args.nodes, args.jobs, args.runtime, args.timeout))
            for way in ways]
    report(runs, args.nodes, args.runtime, Console(width=200))


if __name__ == "__main__":
    main()
