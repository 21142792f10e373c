"""Kubeflow Trainer's real controller manager against the local control plane, with JobSet's
real controller beside it: a suspended TrainJob becomes a suspended JobSet shaped by its
runtime (no pods), and unsuspending the TrainJob makes the runtime's pods appear."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from operator_runs import GPU

from admitter.controller.kube import Kube, Obj
from admitter.testing import LocalCluster
from admitter.testing.jobset_operator import running_jobset_operator
from admitter.testing.trainer_operator import running_trainer_operator
from admitter.testing.waiting import eventually

pytestmark = pytest.mark.integration
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


@pytest.fixture(scope="module")
def trainer_operator(local_cluster: LocalCluster,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with (running_jobset_operator(local_cluster, tmp_path_factory.mktemp("jobset")),
          running_trainer_operator(local_cluster, tmp_path_factory.mktemp("trainer"))):
        yield


def two_node_torch_job(namespace: str) -> Obj:
    """Trainer's `torch-distributed` runtime on 2 nodes of one GPU, suspended."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": f"train-{secrets.token_hex(3)}", "namespace": namespace},
        "spec": {"suspend": True,
                 "runtimeRef": {"name": "torch-distributed"},
                 "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {GPU: "1"}}}},
    }


def trainjobs(namespace: str) -> str:
    return f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"


async def the_jobset(api: Kube, namespace: str, name: str) -> Obj | None:
    listed = await api.request("GET", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}"
                               "/jobsets")
    return next((js for js in listed["items"] if js["metadata"]["name"] == name), None)


async def test_an_unsuspended_trainjob_runs_its_runtimes_pods(
        trainer_operator: None, api: Kube, namespace: str) -> None:
    job = await api.request("POST", trainjobs(namespace), body=two_node_torch_job(namespace))
    name = job["metadata"]["name"]
    made = await eventually(lambda: the_jobset(api, namespace, name),
                            "Trainer makes the TrainJob's JobSet", timeout=60.0)
    assert made["spec"]["suspend"] is True
    (node,) = made["spec"]["replicatedJobs"]
    assert node["name"] == "node" and node["template"]["spec"]["parallelism"] == 2

    async def pods() -> list[Obj]:
        listed = await api.request("GET", f"/api/v1/namespaces/{namespace}/pods",
                                   query={"labelSelector": f"{NAME_LABEL}={name}"})
        return listed["items"]

    assert await pods() == []
    await api.request("PATCH", f"{trainjobs(namespace)}/{name}", body={"spec": {"suspend": False}},
                      content_type="application/merge-patch+json")

    async def two_pods() -> list[Obj] | None:
        found = await pods()
        return found if len(found) == 2 else None

    running = await eventually(two_pods, "the runtime's 2 node pods", timeout=90.0)
    limits = [p["spec"]["containers"][0]["resources"]["limits"] for p in running]
    assert all(limit[GPU] == "1" for limit in limits)
