"""TrainJob through admitter's job interface against Kubeflow Trainer's real controller
manager, with JobSet's real controller beside it: a suspended TrainJob becomes a suspended
JobSet whose shape is the pod sets admitter derives from the runtime; the writes for an
admission (pin through podSpecOverrides, unsuspend) run its pods in the admitted rack, an
eviction (suspend) removes them, and after the restore it runs again in another rack. Then,
with admitter's controller running, a TrainJob on each runtime shape Trainer ships (torch,
JAX, MPI with its launcher as a node, torchtune's initializers) runs the pods of the JobSet
Trainer made, whose pods hold the GPUs its Workload is charged."""

from __future__ import annotations

import copy
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from admitter_world import apply_all, in_process_controller
from operator_runs import GPU, clear, holds_what_it_is_charged, workload_of

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION, QUEUE_LABEL
from admitter.jobs.trainjob import ANCESTOR_LABEL, TrainJob
from admitter.jobs.workloads import resource_of
from admitter.kube import client as kube
from admitter.kube.client import JSON_PATCH, Kube
from admitter.kube.objects import Obj, pod_requests
from admitter.testing import RACK_LABEL, LocalCluster
from admitter.testing.jobset_operator import running_jobset_operator
from admitter.testing.nodes import SIMULATED_RUNTIME_ANNOTATION
from admitter.testing.trainer_operator import running_trainer_operator
from admitter.testing.waiting import eventually

from builders.kube import leaf_queue

pytestmark = pytest.mark.integration
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
WORKLOAD = "trainjob-train-0a1b2"
TRAINJOBS = resource_of(TrainJob())
TRAINING_RUNTIMES = kube.Kind(TrainJob.api_version, "trainingruntimes", True)


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


SHAPES = {runtime["metadata"]["name"]: runtime for runtime in yaml.safe_load_all(
    (Path(__file__).parents[1] / "data" / "trainer_runtimes.yaml").read_text())}
"""Trainer's own runtimes, one of each shape (tests/data/trainer_runtimes.yaml)."""
SIZES = {"torch-distributed": 3, "jax-distributed": 2, "mpi-distributed": 3,
         "torchtune-llama3.2-1b": 1}
"""numNodes of each TrainJob (torchtune's 1B model trains on one node)."""


def runtime_in(namespace: str, shipped: Obj) -> Obj:
    """A shipped runtime as a TrainingRuntime of the namespace, its initializers done after
    3 s (KWOK completes their pods) so the trainer after them starts."""
    spec = copy.deepcopy(shipped["spec"])
    for job in spec["template"]["spec"]["replicatedJobs"]:
        labels = (job["template"].get("metadata") or {}).get("labels") or {}
        if labels.get(ANCESTOR_LABEL, "").endswith("-initializer"):
            job["template"]["spec"]["template"].setdefault("metadata", {}).setdefault(
                "annotations", {})[SIMULATED_RUNTIME_ANNOTATION] = "3s"
    return {"apiVersion": TrainJob.api_version, "kind": "TrainingRuntime",
            "metadata": {"name": shipped["metadata"]["name"], "namespace": namespace},
            "spec": spec}


def jobset_shape(jobset: Obj) -> list[tuple[str, int, int]]:
    """(replicated job, pods, GPUs per pod) of the JobSet Trainer made."""
    return [(job["name"], int(job.get("replicas", 1)) * int(job["template"]["spec"].get(
                "parallelism", 1)),
             int(pod_requests(job["template"]["spec"]["template"]["spec"]).get(GPU, 0)))
            for job in jobset["spec"]["replicatedJobs"]]


def workload_shape(wl: Obj) -> list[tuple[str, int, int]]:
    return [(s["name"], int(s["count"]), int(s.get("requests", {}).get(GPU, 0)))
            for s in wl["spec"]["podSets"]]


async def test_each_runtime_shape_runs_the_pods_and_gpus_its_workload_is_charged(
        trainer_operator: None, api: Kube, namespace: str, kubeconfig: Path) -> None:
    queue = f"shapes-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(queue, 32, limit=32, namespace=namespace))
    made = {}
    for name, nodes in SIZES.items():
        await api.create(TRAINING_RUNTIMES, runtime_in(namespace, SHAPES[name]))
        made[name] = await api.create(TRAINJOBS, {
            "apiVersion": TrainJob.api_version, "kind": TrainJob.kind,
            "metadata": {"name": name.split("-")[0], "namespace": namespace,
                         "labels": {QUEUE_LABEL: "default"}},
            "spec": {"suspend": True,
                     "runtimeRef": {"name": name, "kind": "TrainingRuntime"},
                     "trainer": {"numNodes": nodes,
                                 "resourcesPerNode": {"limits": {GPU: "4"}}}}})
    try:
        async with in_process_controller(kubeconfig):
            held = {name: await holds_what_it_is_charged(api, job, name)
                    for name, job in made.items()}
            shapes = {}
            for name, job in made.items():
                wl = await workload_of(api, job)
                jobset = await the_jobset(api, namespace, job["metadata"]["name"])
                assert wl is not None and jobset is not None
                assert workload_shape(wl) == jobset_shape(jobset), name
                shapes[name] = workload_shape(wl)
    finally:
        await clear(api, namespace, TRAINJOBS)
    assert shapes == {
        "torch-distributed": [("node", 3, 4)],
        "jax-distributed": [("node", 2, 4)],
        # The launcher runs as one of the 3 nodes, with resourcesPerNode; the other two are
        # the runtime's own `node` pods.
        "mpi-distributed": [("launcher", 1, 4), ("node", 2, 0)],
        "torchtune-llama3.2-1b": [("dataset-initializer", 1, 0), ("model-initializer", 1, 0),
                                  ("node", 1, 4)],
    }
    assert held == {"torch-distributed": 12, "jax-distributed": 8, "mpi-distributed": 4,
                    "torchtune-llama3.2-1b": 4}
