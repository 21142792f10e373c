"""RayJob through admitter's job interface against KubeRay's real operator: a suspended RayJob
gets no Ray cluster; the writes the controller makes for an admission (pin the head and every
worker group to the admitted domain, unsuspend) make KubeRay create its RayCluster, whose pods
kube-scheduler places in that domain; an eviction (suspend) makes KubeRay delete the cluster,
and after the user's own placement is restored it runs again in another domain."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from operator_runs import GPU, admitted_to, read

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION, ORIGINAL_AFFINITY_ANNOTATION
from admitter.controller.actions import Actions, resource_of
from admitter.controller.kube import Kube, Obj
from admitter.jobs.rayjob import RayJob
from admitter.testing import LocalCluster
from admitter.testing.kuberay_operator import running_kuberay_operator
from admitter.testing.waiting import eventually

pytestmark = pytest.mark.integration
RAYJOBS = resource_of(RayJob())
CLUSTER_LABEL = "ray.io/cluster"
WORKLOAD = "rayjob-tune-0a1b2"


@pytest.fixture(scope="module")
def kuberay_operator(local_cluster: LocalCluster,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with running_kuberay_operator(local_cluster, tmp_path_factory.mktemp("kuberay")):
        yield


def pod_template(container: str, gpus: int) -> Obj:
    limits = {GPU: str(gpus)} if gpus else {"cpu": "1"}
    return {"spec": {"containers": [{"name": container, "image": "rayproject/ray",
                                     "resources": {"limits": limits}}]}}


def head_and_workers(namespace: str) -> Obj:
    """A head and one worker group of 3 one-GPU workers, suspended as admitter's webhook
    leaves a queued RayJob (KubeRay suspends only RayJobs that shut their cluster down)."""
    return {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": f"tune-{secrets.token_hex(3)}", "namespace": namespace},
        "spec": {"suspend": True, "shutdownAfterJobFinishes": True,
                 "entrypoint": "python -c 'import ray; ray.init()'",
                 "rayClusterSpec": {
                     "headGroupSpec": {"rayStartParams": {},
                                       "template": pod_template("ray-head", 0)},
                     "workerGroupSpecs": [{"groupName": "gpu", "replicas": 3, "minReplicas": 0,
                                           "maxReplicas": 3, "rayStartParams": {},
                                           "template": pod_template("ray-worker", 1)}]}},
    }


async def cluster_pods(api: Kube, job: Obj) -> list[Obj]:
    """The live pods of the RayCluster KubeRay made for the RayJob (none before it made one)."""
    cluster = ((await read(api, job)).get("status") or {}).get("rayClusterName")
    if not cluster:
        return []
    listed = await api.request("GET", f"/api/v1/namespaces/{job['metadata']['namespace']}/pods",
                               query={"labelSelector": f"{CLUSTER_LABEL}={cluster}"})
    return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]


async def bound_pods(api: Kube, job: Obj) -> dict[str, str] | None:
    """Pod → node of the Ray cluster's pods, once the head and the 3 workers are bound."""
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName")
             for p in await cluster_pods(api, job)}
    return nodes if len(nodes) == 4 and all(nodes.values()) else None


async def ray_clusters(api: Kube, namespace: str) -> list[Obj]:
    listed = await api.request("GET", f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters")
    return [c for c in listed["items"] if not c["metadata"].get("deletionTimestamp")]


async def test_a_rayjobs_cluster_runs_in_the_admitted_rack_and_in_another_after_an_eviction(
        kuberay_operator: None, api: Kube, namespace: str, local_cluster: LocalCluster) -> None:
    racks = {node: rack for rack in ("rack-1", "rack-2")
             for node in local_cluster.layout.nodes_in_rack(rack)}
    actions = Actions(api)
    job = await api.create(RAYJOBS, head_and_workers(namespace))

    async def suspended_by_kuberay() -> bool:
        status = (await read(api, job)).get("status") or {}
        return status.get("jobDeploymentStatus") == "Suspended"

    await eventually(suspended_by_kuberay, "KubeRay to see the RayJob suspended", timeout=60.0)
    assert await ray_clusters(api, namespace) == []

    await actions.start_job(await read(api, job), admitted_to("rack-1", WORKLOAD))
    placed = await eventually(lambda: bound_pods(api, job), "head and 3 workers bound",
                              timeout=90.0)
    assert {racks.get(node) for node in placed.values()} == {"rack-1"}
    (made,) = await ray_clusters(api, namespace)
    assert made["metadata"]["ownerReferences"][0]["name"] == job["metadata"]["name"]

    # Evicted: KubeRay deletes the Ray cluster; back to pending: the user's own placement.
    await actions.suspend_job(await read(api, job))

    async def no_cluster() -> bool:
        return await ray_clusters(api, namespace) == [] and not await cluster_pods(api, job)

    await eventually(no_cluster, "the suspended RayJob's cluster deleted", timeout=90.0)
    await eventually(suspended_by_kuberay, "KubeRay to see the RayJob suspended again",
                     timeout=60.0)
    restored = await actions.restore_job(await read(api, job))
    assert restored["spec"]["suspend"] is True
    cluster = restored["spec"]["rayClusterSpec"]
    for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"]):
        assert "affinity" not in group["template"]["spec"]
    marks = restored["metadata"].get("annotations") or {}
    assert ADMITTED_WORKLOAD_ANNOTATION not in marks and ORIGINAL_AFFINITY_ANNOTATION not in marks

    await actions.start_job(await read(api, job), admitted_to("rack-2", WORKLOAD))
    placed = await eventually(lambda: bound_pods(api, job), "the cluster's pods bound again",
                              timeout=90.0)
    assert {racks.get(node) for node in placed.values()} == {"rack-2"}
