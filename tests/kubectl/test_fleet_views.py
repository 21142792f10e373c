"""What `kubectl admitter` shows of a fleet: the cluster a job runs in and how its copy does,
why no cluster fits, and per cluster its nodes, GPUs, GPUs admitted and whether the manager
reaches it; with no WorkerCluster, the output is what it was."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rich.console import Console

from admitter.core.decisions import PendingReason
from admitter.core.topology import CLUSTER
from admitter.kube.objects import format_time
from admitter.kubectl import main as plugin
from admitter.kubectl.clusters import cluster_rows, render_clusters
from admitter.kubectl.explain import explain_workload, render
from admitter.kubectl.state import (
    CLUSTER_QUEUES_UNREAD,
    WORKER_CLUSTERS_UNREAD,
    QueueReading,
    read_state,
)

from builders.plugin_api import FakeKube

NOW = 1_796_000_000.0
NAMESPACE = "ml"
NO_CLUSTER = ("no cluster has 64 free nvidia.com/gpu for 8 pods × 8; the largest room is 40, "
              "in cluster east")


def workload(name: str, gpus: int = 8, pods: int = 1, *, cluster: str | None = None,
             conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": conditions or []}
    if cluster is not None:
        status["admission"] = {
            "clusterQueue": "team", "admittedAt": format_time(NOW - 60),
            "topologyDomain": {CLUSTER: cluster},
            "nodeHints": [{"podSet": "main", "node": f"{cluster}-n0", "count": pods}]}
    return {"metadata": {"name": f"job-{name}", "namespace": NAMESPACE, "uid": name,
                         "creationTimestamp": format_time(NOW - 600),
                         "ownerReferences": [{"kind": "Job", "name": name, "uid": "j" + name}]},
            "spec": {"queueName": "team", "priority": 0, "minRuntime": "0s",
                     "podSets": [{"name": "main", "count": pods,
                                  "requests": {"nvidia.com/gpu": str(gpus)}}]},
            "status": status}


def worker(name: str, reachable: bool, nodes: int = 0, gpus: int = 0,
           reason: str = "Connected", message: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"kubeconfig": {"name": f"{name}-kubeconfig"}},
            "status": {"nodes": nodes, "gpus": gpus, "conditions": [
                {"type": "Reachable", "status": str(reachable), "reason": reason,
                 "message": message}]}}


RUNNING = {"type": "Dispatched", "status": "True", "reason": "Running",
           "message": "running in cluster east as ml/train: 2 active, 2 ready, 0 succeeded, "
                      "0 failed"}
WAITING = {"type": "QuotaReserved", "status": "False", "reason": PendingReason.NO_FIT,
           "message": NO_CLUSTER}
WORKERS = [worker("east", True, 5, 40),
           worker("west", False, reason="InvalidKubeconfig", message="no clusters")]


def fleet(*workloads: dict[str, Any],
          workers: list[dict[str, Any]] | None = None) -> QueueReading:
    listed = WORKERS if workers is None else workers
    return QueueReading(NOW, {}, {}, list(workloads),
                        worker_clusters={wc["metadata"]["name"]: wc for wc in listed})


def text(renderable: Any) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return " ".join(console.export_text().split())


def test_each_cluster_shows_its_nodes_gpus_gpus_admitted_and_reachability() -> None:
    state = fleet(workload("train", 8, 2, cluster="east"), workload("eval", 8, cluster="east"),
                  workload("local", 4, cluster="hq"), workload("big", 8, 8))
    rows = {row["name"]: row for row in cluster_rows(state)}
    assert list(rows) == ["east", "hq", "west"]
    assert rows["east"] == {"name": "east", "worker": True, "reachable": True,
                            "reason": "Connected", "message": "", "nodes": 5, "gpus": 40,
                            "admittedGpus": 24, "admittedWorkloads": 2}
    assert (rows["west"]["reachable"], rows["west"]["reason"], rows["west"]["admittedGpus"]) \
        == (False, "InvalidKubeconfig", 0)
    # the manager's own nodes labelled hq: no WorkerCluster tells their size
    assert (rows["hq"]["worker"], rows["hq"]["nodes"], rows["hq"]["admittedGpus"]) == (
        False, None, 4)
    shown = text(render_clusters(list(rows.values())))
    assert "east True Connected 5 40 24 2" in shown
    assert "west False InvalidKubeconfig 0 0 0 0" in shown
    assert "hq — the manager's own nodes ? ? 4 1" in shown


def test_without_worker_clusters_there_are_no_cluster_rows() -> None:
    assert cluster_rows(fleet(workload("local", 4, cluster="hq"), workers=[])) == []


async def test_explain_names_the_worker_a_job_runs_in_and_how_its_copy_does() -> None:
    wl = workload("train", 8, 2, cluster="east", conditions=[RUNNING])
    client = FakeKube()
    found = await explain_workload(client, fleet(wl), wl)  # type: ignore[arg-type]
    assert (found["cluster"], found["worker"], found["nodesFrom"]) == ("east", True, "worker")
    assert found["dispatched"]["message"] == RUNNING["message"]
    assert not any("/pods" in path for path, _ in client.queries), (
        "a worker's pods are not the manager's to list")
    shown = text(render(found, NOW))
    assert ("Where: on east-n0 (2 pods), as placed at admission (its pods run in cluster "
            "east)") in shown
    assert "Cluster: east (a worker the manager reaches)" in shown
    assert f"Copy: Running: {RUNNING['message']}" in shown


async def test_explain_says_when_the_manager_does_not_reach_the_jobs_worker() -> None:
    wl = workload("train", cluster="west")
    found = await explain_workload(FakeKube(), fleet(wl), wl)  # type: ignore[arg-type]
    shown = text(render(found, NOW))
    assert ("Cluster: west (a worker the manager does not reach: InvalidKubeconfig: no "
            "clusters)") in shown
    assert "Copy: not created yet" in shown


async def test_explain_of_a_job_on_the_managers_own_labelled_nodes_lists_its_pods() -> None:
    wl = workload("local", 4, cluster="hq")
    pod = {"spec": {"nodeName": "hq-n0"}, "status": {"phase": "Running"}}
    found = await explain_workload(FakeKube(pods=[pod]), fleet(wl), wl)  # type: ignore[arg-type]
    assert (found["worker"], found["nodesFrom"], found["nodes"]) == (False, "pods",
                                                                     {"hq-n0": 1})
    assert "Cluster: hq (the manager's own nodes)" in text(render(found, NOW))


async def test_explain_shows_why_no_cluster_fits_and_that_it_must_fit_in_one() -> None:
    wl = workload("big", 8, 8, conditions=[WAITING])
    found = await explain_workload(FakeKube(), fleet(wl), wl)  # type: ignore[arg-type]
    shown = text(render(found, NOW))
    assert f"Waiting: NoFit {NO_CLUSTER}" in shown
    assert "so that its 64 GPUs fit in one cluster" in found["wouldStart"]
    assert "cluster" not in found, "it runs nowhere yet"


async def test_outside_a_fleet_explain_shows_no_cluster() -> None:
    wl = workload("train", 8, 1)
    wl["status"]["admission"] = {"clusterQueue": "team", "admittedAt": format_time(NOW - 60),
                                 "topologyDomain": {}, "nodeHints": []}
    found = await explain_workload(FakeKube(), fleet(wl, workers=[]), wl)  # type: ignore[arg-type]
    assert "cluster" not in found and "Cluster:" not in text(render(found, NOW))


async def test_worker_clusters_are_read_when_the_crd_is_there_and_the_caller_may() -> None:
    readable = FakeKube(objects={"workerclusters": WORKERS})
    assert set((await read_state(readable)).worker_clusters) == {  # type: ignore[arg-type]
        "east", "west"}
    missing = FakeKube()  # the CRD not installed: the fake lists nothing, as none exist
    assert (await read_state(missing)).worker_clusters == {}  # type: ignore[arg-type]
    denied = await read_state(FakeKube(forbidden=("workerclusters",)))  # type: ignore[arg-type]
    assert denied.unread == [WORKER_CLUSTERS_UNREAD]
    both = await read_state(FakeKube(forbidden=("workerclusters", "clusterqueues")),
                            )  # type: ignore[arg-type]
    assert both.unread == [CLUSTER_QUEUES_UNREAD], "the one role grants both: said once"


def cluster_queue() -> dict[str, Any]:
    return {"metadata": {"name": "team"},
            "spec": {"resources": {"nvidia.com/gpu": {"quota": 64}}},
            "status": {"allocated": {"nvidia.com/gpu": "24"}}}


@pytest.mark.parametrize("workers", [[], WORKERS])
def test_queues_shows_the_clusters_only_over_a_fleet(
        workers: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeKube(objects={"clusterqueues": [cluster_queue()], "workerclusters": workers,
                               "workloads": [workload("train", 8, 3, cluster="east")]})

    async def connect(*_: object) -> tuple[FakeKube, str]:
        return client, NAMESPACE

    monkeypatch.setattr(plugin, "connect", connect)
    assert plugin.main(["queues", "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert plugin.main(["queues"]) == 0
    shown = capsys.readouterr().out
    if not workers:
        assert list(data) == ["queues"] and "Clusters" not in shown
        return
    assert [(row["name"], row["admittedGpus"]) for row in data["clusters"]] == [
        ("east", 24), ("west", 0)]
    assert "Clusters (GPUs; admitted: held by admitted Workloads)" in shown
    assert "ClusterQueues" in shown


async def test_explain_says_what_the_cluster_is_when_no_status_or_no_workercluster_tells() -> None:
    unreported = {"metadata": {"name": "north"}, "spec": {}}
    wl = workload("train", cluster="north")
    found = await explain_workload(FakeKube(), fleet(wl, workers=[unreported]),
                                   wl)  # type: ignore[arg-type]
    assert "Cluster: north (a worker the manager has not reported on yet)" in text(
        render(found, NOW))
    moved = workload("train", cluster="gone", conditions=[RUNNING])
    found = await explain_workload(FakeKube(), fleet(moved), moved)  # type: ignore[arg-type]
    assert found["worker"] and found["nodesFrom"] == "worker"
    assert "Cluster: gone (a worker no longer registered as a WorkerCluster)" in text(
        render(found, NOW))
