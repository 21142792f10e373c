"""TrainJob queued end to end, with admitter's controller (and, for users' requests, its
webhooks) running against Kubeflow Trainer's and JobSet's real controllers: its pod sets read
from the runtime the controller caches, admitted as one gang inside a rack, each pod on the
node its admission counted it on (gated and pinned through podSpecOverrides), preempted by a
higher-priority Job in its queue at its limit (evicted as Preempted: suspended, pods gone,
its own overrides back),
admitted again, finished with its quota released; one naming a missing runtime waits with
the reason and gets its Workload from the runtime's watch once the runtime is made; a forged
unsuspend denied."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from admitter_world import (
    apply_all,
    cluster_topology,
    in_process_controller,
    jobs,
    priority_class,
    running,
    workloads,
)
from kubernetes_asyncio.client import ApiClient
from operator_runs import (
    GPU,
    UNSUSPEND,
    clear,
    finished_and_released,
    placed_as_counted,
    read,
    users_jobs,
    workload_of,
)
from test_trainer_operator import (  # noqa: F401 (fixture)
    TRAINING_RUNTIMES,
    TRAINJOBS,
    trainer_operator,
)
from test_webhooks import crds, user_client, webhooks  # noqa: F401 (fixtures)

from admitter.api.contract import (
    ADMITTED_WORKLOAD_ANNOTATION,
    QUEUE_LABEL,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from admitter.api.workload import CONDITION_EVICTED, Reason
from admitter.core.decisions import EvictionReason
from admitter.jobs.trainjob import TrainJob
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, condition
from admitter.testing import RACK_LABEL
from admitter.testing.nodes import SIMULATED_RUNTIME_ANNOTATION
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration
CLUSTER_RUNTIMES = kube.Kind(TrainJob.api_version, "clustertrainingruntimes", False)
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


@pytest.fixture(autouse=True)
async def cleared(api: Kube, namespace: str) -> AsyncIterator[None]:
    """The test's TrainJobs and Jobs deleted and their pods gone after it, so later tests
    find the nodes free."""
    yield
    await clear(api, namespace, TRAINJOBS, kube.JOBS)


@pytest.fixture
async def two_gpu_queue(api: Kube, namespace: str) -> str:
    """A ClusterQueue of 2 GPUs, its limit too, fed by LocalQueue `default`: one 2-node
    TrainJob fills it."""
    name = f"trainjobs-{secrets.token_hex(3)}"
    await cluster_topology(api)
    await apply_all(api, *leaf_queue(name, 2, limit=2, namespace=namespace))
    return name


def queued_trainjob(namespace: str, name: str, runtime: str = "torch-distributed",
                    runtime_kind: str = "ClusterTrainingRuntime") -> Obj:
    """2 nodes of 1 GPU in LocalQueue `default`, needing one rack, suspended as admitter's
    webhook leaves it."""
    return {
        "apiVersion": TrainJob.api_version, "kind": TrainJob.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "default"},
                     "annotations": {TOPOLOGY_REQUIRED_ANNOTATION: RACK_LABEL}},
        "spec": {"suspend": True, "runtimeRef": {"name": runtime, "kind": runtime_kind},
                 "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {GPU: "1"}}}},
    }


async def pods(api: Kube, job: Obj) -> list[Obj]:
    listed = await api.request("GET", kube.PODS.path(job["metadata"]["namespace"]),
                               query={"labelSelector": f"{NAME_LABEL}={job['metadata']['name']}"})
    return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]


async def bound(api: Kube, job: Obj) -> dict[str, str] | None:
    """Pod → node of the TrainJob's live pods, once both are bound."""
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await pods(api, job)}
    return nodes if len(nodes) == 2 and all(nodes.values()) else None


async def test_a_queued_trainjob_runs_as_one_gang_is_preempted_and_runs_again(
        trainer_operator: None, api: Kube, namespace: str, two_gpu_queue: str,  # noqa: F811
        kubeconfig: Path) -> None:
    nodes = await api.request("GET", kube.NODES.path())
    racks = {n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL] for n in nodes["items"]}
    await priority_class(api, "trainjob-high", 100)
    job = await api.create(TRAINJOBS, queued_trainjob(namespace, "train"))
    async with in_process_controller(kubeconfig) as controller:
        placed = await eventually(lambda: bound(api, job), "2 node pods bound", timeout=90.0)
        wl = await workload_of(api, job)
        assert wl is not None and [(s["name"], s["count"]) for s in wl["spec"]["podSets"]] == [
            ("node", 2)]
        domain = wl["status"]["admission"]["topologyDomain"][RACK_LABEL]
        assert {racks[node] for node in placed.values()} == {domain}
        await placed_as_counted(api, job, await pods(api, job))
        # Its JobSet is its child: not queued itself, and its pods count as the TrainJob's.
        assert [w["metadata"]["name"] for w in await workloads(api, namespace)] == [
            wl["metadata"]["name"]]
        assert not set(controller.caches.foreign_usage()) & set(placed.values())
        assert controller.caches.bound_pods()[("TrainJob", namespace, "train")]

        # Funded and of higher priority, in the queue at its limit: it preempts the TrainJob.
        await apply_all(api, JobWrapper("high", namespace).pods(1).gpus(2).min_runtime("1h")
                        .priority_class("trainjob-high").obj())

        async def evicted() -> Obj | None:
            now, wl = await read(api, job), await workload_of(api, job)
            marks = now["metadata"].get("annotations") or {}
            why = condition(wl, CONDITION_EVICTED) if wl is not None else None
            return now if (now["spec"]["suspend"] and ADMITTED_WORKLOAD_ANNOTATION not in marks
                           and "podSpecOverrides" not in now["spec"]
                           and why is not None and why["status"] == "True"
                           and why["reason"] == EvictionReason.PREEMPTED.value
                           and not await pods(api, job)) else None

        await eventually(evicted, "the TrainJob suspended, its pods gone, its pins taken back",
                         timeout=120.0)
        await eventually(lambda: _running(api, namespace, "high"), "the high Job running")
        await api.delete(kube.JOBS, "high", namespace, {"propagationPolicy": "Background"})
        placed = await eventually(lambda: bound(api, job), "2 node pods bound again",
                                  timeout=120.0)
        assert len({racks[node] for node in placed.values()}) == 1
        await placed_as_counted(api, job, await pods(api, job))
        wl = await workload_of(api, job)
        assert wl is not None and wl["status"].get("evictionCount") == 1


async def _running(api: Kube, namespace: str, name: str) -> bool:
    found = (await jobs(api, namespace)).get(name)
    return found is not None and running(found)


async def short_runtime(api: Kube, namespace: str) -> str:
    """A TrainingRuntime in the namespace: Trainer's `torch-distributed` whose pods KWOK
    completes after 3 s."""
    torch = await api.request(
        "GET", "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed")
    spec = torch["spec"]
    for replicated in spec["template"]["spec"]["replicatedJobs"]:
        template = replicated["template"]["spec"]["template"]
        template.setdefault("metadata", {}).setdefault("annotations", {})[
            SIMULATED_RUNTIME_ANNOTATION] = "3s"
    await api.create(TRAINING_RUNTIMES, {
        "apiVersion": TrainJob.api_version, "kind": "TrainingRuntime",
        "metadata": {"name": "short", "namespace": namespace}, "spec": spec})
    return "short"


async def test_a_trainjob_finishes_and_releases_its_quota_and_one_without_runtime_waits(
        trainer_operator: None, api: Kube, namespace: str, two_gpu_queue: str,  # noqa: F811
        kubeconfig: Path) -> None:
    runtime = await short_runtime(api, namespace)
    short = await api.create(TRAINJOBS, queued_trainjob(namespace, "short", runtime,
                                                         "TrainingRuntime"))
    lost = await api.create(TRAINJOBS, queued_trainjob(namespace, "lost", "no-such-runtime"))
    async with in_process_controller(kubeconfig) as controller:
        await finished_and_released(api, short, "the short TrainJob")

        async def told() -> Obj | None:
            events = await api.request("GET", kube.EVENTS.path(namespace))
            return next((e for e in events["items"]
                         if e["involvedObject"]["name"] == "lost"
                         and e["reason"] == Reason.UNREADABLE), None)

        event = await eventually(told, "the reason the TrainJob without runtime waits")
        assert "spec.runtimeRef: no ClusterTrainingRuntime 'no-such-runtime'" in (
            event["message"])
        assert (await read(api, lost))["spec"]["suspend"] is True
        assert await workload_of(api, lost) is None

        # Right after a sweep, its runtime is made: its watch wakes the TrainJob, which has its
        # Workload before the next sweep would have read it.
        before = controller._swept_at

        async def swept() -> float | None:
            return controller._swept_at if controller._swept_at != before else None

        swept_at = await eventually(swept, "a sweep", timeout=60.0)
        torch = await api.get(CLUSTER_RUNTIMES, "torch-distributed")
        await api.create(CLUSTER_RUNTIMES, {
            "apiVersion": TrainJob.api_version, "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "no-such-runtime"}, "spec": torch["spec"]})
        try:
            await eventually(lambda: workload_of(api, lost), "the TrainJob's Workload",
                             timeout=60.0)
            assert controller._swept_at == swept_at, "made on the runtime's watch, not a sweep"
        finally:
            await api.delete(CLUSTER_RUNTIMES, "no-such-runtime")


async def test_the_webhook_suspends_a_users_trainjob_and_denies_a_forged_unsuspend(
        trainer_operator: None, api: Kube, kube_client: ApiClient,  # noqa: F811 (fixture)
        namespace: str, webhooks: None, user_client: ApiClient) -> None:  # noqa: F811
    await cluster_topology(api)
    trainjobs = await users_jobs(kube_client, user_client, namespace, TRAINJOBS)
    wanted = queued_trainjob(namespace, "train")
    wanted["spec"]["suspend"] = False
    assert (await trainjobs.create(wanted))["spec"]["suspend"] is True
    message = await trainjobs.refused(trainjobs.patch("train", UNSUSPEND))
    assert "spec.suspend: alice may not unsuspend a TrainJob that admitter has not admitted" in (
        message)
