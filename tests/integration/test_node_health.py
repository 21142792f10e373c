"""The local control plane's fake nodes stay Ready: KWOK renews each node's Lease well within
the node lifecycle controller's grace period, so no node is ever marked NotReady or tainted
not-ready / unreachable while tests run on it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes_asyncio import client, watch

from admitter.testing import LocalCluster
from admitter.testing.cluster import NODE_LEASE_SECONDS
from admitter.testing.nodes import KWOK_NODE_SELECTOR

pytestmark = pytest.mark.integration

WATCHED_SECONDS = 180
"""Three minutes: more than three rounds of the grace period (50 s) plus the controller's
monitor period (5 s), the rhythm in which nodes whose heartbeats lapse go NotReady."""
UNHEALTHY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _unhealthy(node: Any) -> list[str]:
    """What is wrong with a node: a Ready condition that is not True, an unhealthy taint."""
    found = [f"Ready={c.status} ({c.reason})" for c in node.status.conditions or ()
             if c.type == "Ready" and c.status != "True"]
    found += [f"taint {t.key}:{t.effect}" for t in node.spec.taints or ()
              if t.key in UNHEALTHY_TAINTS]
    return found


async def test_no_node_goes_not_ready_over_minutes(local_cluster: LocalCluster,
                                                   kube_client: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_client)
    listed = await core.list_node(label_selector=KWOK_NODE_SELECTOR)
    assert len(listed.items) == local_cluster.layout.nodes
    problems = [f"{n.metadata.name}: {p}" for n in listed.items for p in _unhealthy(n)]
    seen = 0
    resource_version = listed.metadata.resource_version
    deadline = time.monotonic() + WATCHED_SECONDS
    while (left := deadline - time.monotonic()) > 1:
        async with watch.Watch() as nodes:
            async for event in nodes.stream(core.list_node, label_selector=KWOK_NODE_SELECTOR,
                                            resource_version=resource_version,
                                            timeout_seconds=int(left)):
                node = event["object"]
                resource_version = node.metadata.resource_version
                seen += 1
                problems += [f"{event['type']} {node.metadata.name}: {p}"
                             for p in _unhealthy(node)]
    assert problems == []
    assert seen >= local_cluster.layout.nodes, "the status heartbeats arrive as watch events"

    leases = await client.CoordinationV1Api(kube_client).list_namespaced_lease("kube-node-lease")
    held = {lease.metadata.name: lease.spec for lease in leases.items}
    assert set(held) >= {n.metadata.name for n in listed.items}
    assert {spec.lease_duration_seconds for spec in held.values()} == {NODE_LEASE_SECONDS}
