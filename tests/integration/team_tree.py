"""The queue tree the observability tests share: one root of 64 GPUs over two teams of 32,
each with a LocalQueue (`a`, `b`) in the test's namespace; and /metrics served for a test."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator

from admitter_world import apply_all, cluster_topology

from admitter.controller.kube import Kube
from admitter.controller.reconciler import Reconciler
from admitter.controller.server import health_app, serve

from builders.kube import cluster_queue, leaf_queue


async def two_teams(api: Kube, namespace: str, prefix: str) -> tuple[str, str, str]:
    """Creates the tree (and the cluster's Topology); returns root, team a's and team b's
    ClusterQueue names."""
    root = f"{prefix}-{secrets.token_hex(3)}"
    team_a, team_b = f"{root}-a", f"{root}-b"
    await cluster_topology(api)
    await apply_all(api, cluster_queue(root, 64),
                    *leaf_queue(team_a, 32, parent=root, namespace=namespace, local_name="a"),
                    *leaf_queue(team_b, 32, parent=root, namespace=namespace, local_name="b"))
    return root, team_a, team_b


@contextlib.asynccontextmanager
async def metrics_port(reconciler: Reconciler) -> AsyncIterator[int]:
    """The controller's /metrics, /healthz and /readyz on a free local port."""
    runner = await serve(health_app(reconciler.metrics.registry, reconciler.caches.synced),
                         "127.0.0.1", 0)
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
