"""Over a fleet the dashboard's overview has a section per cluster: whether the manager reaches
it, its nodes, and the GPUs admitted there against its GPUs; without WorkerClusters the page
is what it was."""

from __future__ import annotations

import re
from typing import Any

from admitter.core.topology import CLUSTER
from admitter.dashboard.live import board
from admitter.dashboard.render import overview, sections
from admitter.dashboard.workload_page import explained, section
from admitter.kube.objects import format_time
from admitter.kubectl.state import QueueReading

from builders.plugin_api import FakeKube

NOW = 1_796_000_000.0
HISTORY = {"leaves": [], "points": []}


def admitted(name: str, cluster: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ml", "uid": name,
                         "creationTimestamp": format_time(NOW - 600)},
            "spec": {"queueName": "team", "podSets": [
                {"name": "main", "count": 1, "requests": {"nvidia.com/gpu": str(gpus)}}]},
            "status": {"admission": {"clusterQueue": "team",
                                     "admittedAt": format_time(NOW - 60),
                                     "topologyDomain": {CLUSTER: cluster}}}}


def worker(name: str, reachable: bool, gpus: int, reason: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"nodes": gpus // 8, "gpus": gpus, "conditions": [
                {"type": "Reachable", "status": str(reachable), "reason": reason,
                 "message": "" if reachable else "connection refused"}]}}


def reading(*workers: dict[str, Any]) -> QueueReading:
    return QueueReading(NOW, {}, {}, [admitted("a", "east", 8), admitted("b", "east", 16)],
                        worker_clusters={w["metadata"]["name"]: w for w in workers})


def test_each_cluster_shows_gpus_admitted_of_its_gpus_and_whether_it_answers() -> None:
    page = board(reading(worker("east", True, 32, "Connected"),
                         worker("west", False, 0, "Unreachable")), 32, HISTORY, "fleet")
    html = sections(page)["clusters"]
    rows = dict(re.findall(r'<tr data-cluster="(\w+)"(.*?)</tr>', html))
    assert 'data-reachable="True" data-gpus="32" data-admitted="24"' in rows["east"]
    assert "24 of 32 GPUs admitted (2 workloads)" in rows["east"]
    assert 'data-reachable="False"' in rows["west"]
    assert "not reachable: Unreachable (connection refused)" in rows["west"]
    assert '<section id="clusters">' in overview(page)


def test_without_worker_clusters_the_page_has_no_clusters_section() -> None:
    page = board(reading(), 32, HISTORY, "single")
    assert page["clusters"] == []
    assert set(sections(page)) == {"queues", "gpus", "pending", "running"}
    assert 'id="clusters"' not in overview(page)


async def test_a_workloads_page_names_its_cluster_and_its_copy() -> None:
    state = reading(worker("east", False, 32, "Unreachable"))
    state.workloads[0]["status"]["conditions"] = [
        {"type": "Dispatched", "status": "True", "reason": "Running",
         "message": "running in cluster east as ml/a: 1 active, 1 ready, 0 succeeded, 0 failed"}]
    found = await explained(FakeKube(), state, "ml", "a")  # type: ignore[arg-type]
    assert found is not None
    facts = dict(re.findall(r'data-fact="(\w+)">(.*?)</td>', section(found, NOW)))
    assert facts["cluster"] == ("east (a worker the manager does not reach: Unreachable: "
                                "connection refused)")
    assert facts["copy"].startswith("Running: running in cluster east as ml/a: 1 active")
    alone = await explained(FakeKube(), reading(), "ml", "a")  # type: ignore[arg-type]
    assert alone is not None
    facts = dict(re.findall(r'data-fact="(\w+)">(.*?)</td>', section(alone, NOW)))
    assert facts["cluster"] == "east (named by no WorkerCluster)", "its worker was deleted"
    assert "copy" not in facts
