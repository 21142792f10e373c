"""The queue tree the observability tests share: one root of 64 GPUs over two teams of 32,
each with a LocalQueue (`a`, `b`) in the test's namespace; and /metrics served for a test."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator

from admitter_world import apply_all, cluster_topology, earlier_work_gone, jobs, pods

from admitter.controller.reconciler import Reconciler
from admitter.controller.server import health_app, serve
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.testing.waiting import eventually

from builders.kube import cluster_queue, leaf_queue


@contextlib.asynccontextmanager
async def two_teams(api: Kube, namespace: str,
                    prefix: str) -> AsyncIterator[tuple[str, str, str]]:
    """Creates the tree (and the cluster's Topology); yields root, team a's and team b's
    ClusterQueue names. Afterwards the namespace's Jobs are deleted and their pods awaited
    gone, so the next test on the shared cluster finds its GPUs free."""
    root = f"{prefix}-{secrets.token_hex(3)}"
    team_a, team_b = f"{root}-a", f"{root}-b"
    await eventually(lambda: earlier_work_gone(api),
                     "earlier tests' pods and admissions to be gone", timeout=180)
    await cluster_topology(api)
    await apply_all(api, cluster_queue(root, 64),
                    *leaf_queue(team_a, 32, parent=root, namespace=namespace, local_name="a"),
                    *leaf_queue(team_b, 32, parent=root, namespace=namespace, local_name="b"))
    try:
        yield root, team_a, team_b
    finally:
        for name in await jobs(api, namespace):
            await api.request("DELETE", kube.JOBS.path(namespace, name),
                              {"propagationPolicy": "Background"})

        async def no_pods() -> bool:
            return not await pods(api, namespace)

        await eventually(no_pods, "the test's pods to be gone", timeout=60)


@contextlib.asynccontextmanager
async def metrics_port(reconciler: Reconciler) -> AsyncIterator[int]:
    """The controller's /metrics, /healthz and /readyz on a free local port."""
    runner = await serve(health_app(reconciler.metrics.registry, reconciler.caches.synced),
                         "127.0.0.1", 0)
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
