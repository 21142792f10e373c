"""Shared pieces of the benchmarks: the repository and `tests/builders` on the path (every
benchmark imports this module first), and for the control-plane benchmarks
(`bench_kueue_shape.py`, `bench_fill.py`, `bench_kueue_side_by_side.py`) a local control plane
with admitter's CRDs, list-then-watch loops and summary statistics. The controller process is
in `controller_process.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the builders package the tests use (tests/builders)

from admitter.kube import client as kube  # noqa: E402
from admitter.kube.client import Kind, Kube, Obj  # noqa: E402
from admitter.testing import GpuNodeLayout, LocalCluster  # noqa: E402

from builders.kube import leaf_queue, namespace  # noqa: E402

# ---- the control plane ---------------------------------------------------------------------


@contextlib.contextmanager
def control_plane(layout: GpuNodeLayout, crd_dirs: tuple[Path, ...] = (ROOT / "crds",),
                  keep: bool = False) -> Iterator[LocalCluster]:
    """A fresh local cluster with `layout`'s nodes and the CRDs in `crd_dirs` Established."""
    state = Path(tempfile.mkdtemp(prefix="admitter-bench-"))
    try:
        with LocalCluster.start(state / "cluster", layout, timeout=600) as cluster:
            for directory in crd_dirs:
                cluster.kubectl("apply", "--server-side", "-f", str(directory))
            if crd_dirs:
                cluster.wait_established()
            yield cluster
    finally:
        if not keep:
            subprocess.run(["rm", "-rf", str(state)], check=False)


WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")


def api_writes(cluster: LocalCluster) -> int:
    """Writes the API server has served so far, from every client (its own metrics)."""
    text = cluster.api().request("GET", "/metrics")
    total = 0.0
    for line in str(text).splitlines():
        if line.startswith("apiserver_request_total{") and any(
                f'verb="{verb}"' in line for verb in WRITE_VERBS):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def component_cpu(cluster: LocalCluster) -> dict[str, float]:
    """CPU seconds each control-plane process has used so far (from /proc): on this machine
    they, not the benchmark's clients, are what saturates first."""
    return {component.name: process_cpu(component.pid) for component in cluster.components}


def control_plane_cpu(cluster: LocalCluster) -> tuple[float, float]:
    """CPU seconds so far of (kube-apiserver + etcd, the other components)."""
    used = component_cpu(cluster)
    storage = used.pop("kube-apiserver", 0.0) + used.pop("etcd", 0.0)
    return storage, sum(used.values())


def node_layout(nodes: int, cpu: int, gpus: int = 0, pods: int = 256) -> GpuNodeLayout:
    return GpuNodeLayout(nodes=nodes, gpus_per_node=gpus, cpu=str(cpu), pods=pods,
                         nodes_per_rack=max(1, nodes), racks_per_block=1)


async def create_leaf_queue(client: Kube, name: str, resource: str, quota: int,
                            limit: int | None = None, parent: str | None = None) -> None:
    """A leaf ClusterQueue, a namespace of the same name and its `default` LocalQueue."""
    cluster_queue, local_queue = leaf_queue(name, quota, namespace=name, resource=resource,
                                            limit=limit, parent=parent)
    await client.create(kube.CLUSTER_QUEUES, cluster_queue)
    await client.request("POST", "/api/v1/namespaces", namespace(name))
    await client.create(kube.LOCAL_QUEUES, local_queue)


# ---- watching and timing -------------------------------------------------------------------


async def follow(client: Kube, kind: Kind, on_object: Callable[[str, Obj], None],
                 query: dict[str, str] | None = None) -> None:
    """List, then watch `kind` forever, calling `on_object(event_type, obj)` for each; a
    failed list (a new CRD's cache still initialising) or an expired watch starts over."""
    from kubernetes_asyncio.client.exceptions import ApiException

    version = ""
    while True:
        try:
            if not version:
                listed = await client.list(kind, query)
                for item in listed.get("items", []):
                    on_object("ADDED", item)
                version = listed["metadata"]["resourceVersion"]
            async for event in client.watch(kind, version, query):
                obj = event["object"]
                version = obj["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    on_object(event["type"], obj)
        except ApiException as error:
            if error.status == 410:
                version = ""
            elif error.status not in (429, 500, 503):
                raise
            await asyncio.sleep(0.5)


async def bounded(calls: list[Awaitable[Any]], limit: int = 32) -> list[Any]:
    """Await `calls` with at most `limit` in flight."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Awaitable[Any]) -> Any:
        async with gate:
            return await call

    return list(await asyncio.gather(*(one(c) for c in calls)))


async def wait_until(condition: Callable[[], bool], timeout: float, what: str,
                     tasks: list[asyncio.Task[Any]] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for task in tasks or []:
            if task.done():
                task.result()  # a crashed watcher or generator ends the wait with its error
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def waits_cell(values: list[float]) -> str:
    """Mean / p90 of the times to admission, and how many were admitted at all."""
    return f"{mean(values):.1f} / {percentile(values, 90):.1f} ({len(values):,})"


def machine() -> str:
    load = os.getloadavg()
    return f"{os.cpu_count()} cores, load {load[0]:.1f} at start, Python {sys.version.split()[0]}"
