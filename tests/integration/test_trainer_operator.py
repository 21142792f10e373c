"""TrainJob through admitter's job interface against Kubeflow Trainer's real controller
manager, with JobSet's real controller beside it: a suspended TrainJob becomes a suspended
JobSet whose shape is the pod sets admitter derives from the runtime; the writes for an
admission (pin through podSpecOverrides, unsuspend) run its pods in the admitted rack, an
eviction (suspend) removes them, and after the restore it runs again in another rack."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from operator_runs import GPU

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION
from admitter.jobs.trainjob import TrainJob
from admitter.jobs.workloads import resource_of
from admitter.kube.client import JSON_PATCH, Kube
from admitter.kube.objects import Obj
from admitter.testing import RACK_LABEL, LocalCluster
from admitter.testing.jobset_operator import running_jobset_operator
from admitter.testing.trainer_operator import running_trainer_operator
from admitter.testing.waiting import eventually

pytestmark = pytest.mark.integration
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
WORKLOAD = "trainjob-train-0a1b2"


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


async def the_jobset(api: Kube, namespace: str, name: str) -> Obj | None:
    listed = await api.request("GET", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}"
                               "/jobsets")
    return next((js for js in listed["items"] if js["metadata"]["name"] == name), None)


async def runtime_named(api: Kube, name: str) -> Obj:
    return await api.request(
        "GET", f"/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/{name}")


async def test_a_trainjob_is_shaped_by_its_runtime_and_runs_in_the_admitted_rack_then_another(
        trainer_operator: None, api: Kube, namespace: str, local_cluster: LocalCluster) -> None:
    racks = {node: rack for rack in ("rack-1", "rack-2")
             for node in local_cluster.layout.nodes_in_rack(rack)}
    torch = await runtime_named(api, "torch-distributed")
    kind = TrainJob(lambda _kind, _namespace, name: torch if name == "torch-distributed" else None)
    trainjobs = resource_of(kind)
    job = await api.create(trainjobs, two_node_torch_job(namespace))
    name = job["metadata"]["name"]
    made = await eventually(lambda: the_jobset(api, namespace, name),
                            "Trainer makes the TrainJob's JobSet", timeout=60.0)
    assert made["spec"]["suspend"] is True
    # The pod sets derived from the runtime are the JobSet Trainer made of it.
    (node,) = kind.pod_sets(job)
    (replicated,) = made["spec"]["replicatedJobs"]
    assert (node.name, node.count) == ("node", 2)
    assert replicated["name"] == "node" and replicated["template"]["spec"]["parallelism"] == 2
    made_spec = replicated["template"]["spec"]["template"]["spec"]
    assert node.pod_spec["containers"][0]["resources"] == made_spec["containers"][0]["resources"]

    async def pods() -> list[Obj]:
        listed = await api.request("GET", f"/api/v1/namespaces/{namespace}/pods",
                                   query={"labelSelector": f"{NAME_LABEL}={name}"})
        return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]

    async def bound() -> dict[str, str] | None:
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await pods()}
        return nodes if len(nodes) == 2 and all(nodes.values()) else None

    async def read_job() -> Obj:
        return await api.get(trainjobs, name, namespace)

    assert await pods() == []
    await api.patch(trainjobs, name, kind.run_patch(await read_job(), WORKLOAD,
                                                    {RACK_LABEL: "rack-1"}),
                    namespace, content_type=JSON_PATCH)
    placed = await eventually(bound, "the runtime's 2 node pods bound", timeout=90.0)
    assert {racks.get(node) for node in placed.values()} == {"rack-1"}

    # Evicted: suspended, its pods go; back to pending: the user's own (no) overrides.
    await api.patch(trainjobs, name, kind.suspend_patch(await read_job()), namespace)

    async def no_pods() -> bool:
        return await pods() == []

    await eventually(no_pods, "the suspended TrainJob's pods deleted", timeout=90.0)
    current = await read_job()
    restored = await api.patch(trainjobs, name, kind.restore_patch(current), namespace,
                               content_type=JSON_PATCH)
    assert "podSpecOverrides" not in restored["spec"]
    assert ADMITTED_WORKLOAD_ANNOTATION not in (restored["metadata"].get("annotations") or {})

    await api.patch(trainjobs, name, kind.run_patch(restored, WORKLOAD, {RACK_LABEL: "rack-2"}),
                    namespace, content_type=JSON_PATCH)
    placed = await eventually(bound, "the runtime's 2 node pods bound again", timeout=90.0)
    assert {racks.get(node) for node in placed.values()} == {"rack-2"}
