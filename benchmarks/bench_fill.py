"""KAI Scheduler's fill test on the local control plane: plain Jobs, then Jobs through admitter.

    .venv/bin/python benchmarks/bench_fill.py [--nodes 250] [--jobs 2000]
        [--ways plain,admitter,webhooks]

KAI's scale test fills 500 KWOK nodes of 8 GPUs with 4,000 single-GPU Jobs (published example:
6 min 37 s). Here the three ways at that scale take about 25 minutes on 2 cores, so the default
is half of it (250 nodes, 2,000 Jobs: the same 100 % fill); `--nodes 500 --jobs 4000` runs
KAI's scale. Each way gets a fresh control plane with the same nodes and creates the same Jobs
(one pod, `nvidia.com/gpu: 1`, running forever) with 32 creations in flight; the clock runs
from the first creation to the moment the last pod is Running.

- plain: unlabelled Jobs; the upstream job controller and kube-scheduler alone (the physical
  limit of this control plane).
- admitter: labelled Jobs created suspended (as admitter's mutating webhook leaves them), one
  ClusterQueue with the whole cluster as quota, the controller as a separate process.
- webhooks: as admitter, but the Jobs are created unsuspended and admitter's own webhooks
  (served by the controller process, registered from deploy/webhooks.yaml) suspend and guard
  them: the production path.

The ratio column is each way's time over plain's.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import (
    api_writes,
    bounded,
    control_plane,
    control_plane_cpu,
    create_leaf_queue,
    follow,
    machine,
    node_layout,
    wait_until,
)
from controller_process import ControllerProcess, ControllerStats, describe
from rich.console import Console
from rich.table import Table

from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj
from admitter.testing import GPU_RESOURCE
from admitter.testing.in_process import background

from builders.kube import JobWrapper, namespace

NAMESPACE = "fill"
WAYS = ("plain", "admitter", "webhooks")
SETTINGS = {"cycle": "1s", "fairShare": {"window": 0}}


@dataclass
class Fill:
    way: str
    jobs: int
    created_in: float = float("nan")
    first_running: float = float("nan")
    all_running: float = float("nan")
    running: int = 0
    api_writes: int = 0
    control_plane_cpu: tuple[float, float] = (float("nan"), float("nan"))
    """CPU seconds from the first creation to the end: kube-apiserver + etcd, and the
    controller manager, scheduler and KWOK."""
    timed_out: bool = False
    controller: ControllerStats = field(default_factory=ControllerStats)


def fill_job(index: int, way: str) -> Obj:
    """One 1-GPU pod that runs until the end; queued and with a min runtime unless `way` is
    plain Kubernetes, and suspended by the user only where no webhook would do it."""
    job = (JobWrapper(f"fill-{index:05d}", NAMESPACE).gpus(1).image("registry.invalid/fill")
           .runtime(None).suspend(True if way == "admitter" else None))
    if way == "plain":
        job.queue(None).annotations({})
    return job.obj()


async def webhooks_in_effect(client: Kube) -> None:
    """A dry-run labelled Job comes back suspended once the API server calls the webhook."""
    for _ in range(200):
        probe = fill_job(99999, "webhooks")
        created = await client.request("POST", kube.JOBS.path(NAMESPACE), probe,
                                       query={"dryRun": "All"})
        if created["spec"].get("suspend"):
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("admitter's webhooks were not called within 20 s")


async def run_way(way: str, nodes: int, jobs: int, timeout: float,
                  profile: Path | None = None) -> Fill:
    layout = node_layout(nodes, cpu=64, gpus=8, pods=110)
    result = Fill(way, jobs)
    with control_plane(layout) as cluster, tempfile.TemporaryDirectory() as work:
        client = await Kube.from_kubeconfig(str(cluster.kubeconfig_path))
        controller = None
        if way == "plain":
            await client.request("POST", "/api/v1/namespaces", namespace(NAMESPACE))
        else:
            await create_leaf_queue(client, NAMESPACE, GPU_RESOURCE, nodes * 8)
            controller = ControllerProcess(
                cluster.kubeconfig_path, Path(work), SETTINGS,
                None if profile is None else profile / f"controller-fill-{way}.txt",
                webhooks=way == "webhooks")
            await asyncio.sleep(3.0)  # informers listed before the first Job
            if way == "webhooks":
                await webhooks_in_effect(client)
        running: set[str] = set()

        def on_pod(_type: str, pod: Obj) -> None:
            if (pod.get("status") or {}).get("phase") == "Running":
                if not running:
                    result.first_running = time.monotonic() - started
                running.add(pod["metadata"]["name"])

        print(f"{way}: {jobs} Jobs on {nodes} nodes x 8 GPUs", flush=True)
        async with background(follow(client, kube.PODS, on_pod)) as tasks:
            writes_before, cpu_before = api_writes(cluster), control_plane_cpu(cluster)
            started = time.monotonic()
            await bounded([client.create(kube.JOBS, fill_job(i, way)) for i in range(jobs)])
            result.created_in = time.monotonic() - started
            try:
                await wait_until(lambda: len(running) >= jobs, timeout, "all pods Running",
                                 tasks)
                result.all_running = time.monotonic() - started
            except TimeoutError:
                result.timed_out = True
            result.running = len(running)
            result.api_writes = api_writes(cluster) - writes_before
            storage, others = control_plane_cpu(cluster)
            result.control_plane_cpu = (storage - cpu_before[0], others - cpu_before[1])
        if controller is not None:
            result.controller = controller.stop()
        await client.close()
    return result


def report(fills: list[Fill], nodes: int, console: Console) -> None:
    table = Table(title=f"fill: {fills[0].jobs:,} single-GPU Jobs on {nodes} nodes x 8 GPUs "
                        f"({datetime.date.today()}, {machine()})")
    for column in ("way", "Jobs created s", "first Running s", "all Running s", "Running",
                   "ratio to plain", "API writes (all clients)",
                   "apiserver+etcd cpu s", "kcm+scheduler+kwok cpu s", "ctl writes/admission",
                   "ctl passes", "ctl cycle s", "ctl cpu s"):
        table.add_column(column, justify="right")
    plain = next((f.all_running for f in fills if f.way == "plain"), float("nan"))
    for fill in fills:
        stats = fill.controller
        admitted = fill.way != "plain"
        table.add_row(
            fill.way, f"{fill.created_in:.1f}", f"{fill.first_running:.1f}",
            f"{fill.all_running:.1f}" + (" (timed out)" if fill.timed_out else ""),
            f"{fill.running:,}", f"{fill.all_running / plain:.2f}x", f"{fill.api_writes:,}",
            f"{fill.control_plane_cpu[0]:.0f}", f"{fill.control_plane_cpu[1]:.0f}",
            f"{stats.writes / max(stats.admissions, 1):.2f}" if admitted else "-",
            f"{stats.passes}" if admitted else "-",
            f"{stats.cycle_seconds:.1f}" if admitted else "-",
            f"{stats.cpu_seconds:.0f}" if admitted else "-")
    console.print(table)
    for fill in fills:
        if fill.controller.by_kind:
            console.print(f"{fill.way} controller {describe(fill.controller)}")
    console.print("KAI's published example for 500 nodes / 4,000 Jobs: 6 min 37 s (397 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=250)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--ways", default=",".join(WAYS),
                        help=f"comma-separated, from {', '.join(WAYS)}")
    parser.add_argument("--timeout", type=float, default=480.0, help="per way, seconds")
    parser.add_argument("--profile", type=Path,
                        help="directory for pyinstrument profiles of the controller process")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    ways = [w for w in args.ways.split(",") if w]
    unknown = set(ways) - set(WAYS)
    if unknown:
        parser.error(f"unknown ways: {', '.join(sorted(unknown))}")
    fills = [asyncio.run(run_way(way, args.nodes, args.jobs, args.timeout, args.profile))
             for way in ways]
    report(fills, args.nodes, Console(width=200))


if __name__ == "__main__":
    main()
