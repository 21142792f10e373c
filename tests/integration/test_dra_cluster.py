"""GPUs claimed through Dynamic Resource Allocation, on the real control plane: a test driver
publishes two KWOK nodes' GPUs as ResourceSlices (no device plugin GPUs on them), and a Job
and a JobSet ask for GPUs only through ResourceClaimTemplates. Created suspended by the
webhook, they are counted in their ClusterQueue's quota and fair share, admitted on the
nodes the slices describe, each pod pinned to the node its admission chose and its claim
allocated there by kube-scheduler; a higher-priority Job preempts one of them, whose pods and
claims go, and the devices it held serve the preemptor. A claim of a DeviceClass no mapping
names is refused by the webhook, naming it."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from admitter_world import FAST, apply_all, in_process_controller, jobs, priority_class
from kubernetes_asyncio.client.exceptions import ApiException
from operator_runs import clear, live_pods, placed_as_counted, read, workload_of
from test_jobset_operator import jobset_operator  # noqa: F401 (fixture)
from test_unlabelled_work import delete_webhook_configurations

from admitter.api.contract import MIN_RUNTIME_ANNOTATION, QUEUE_LABEL, RESUMABLE_ANNOTATION
from admitter.api.settings import DeviceClassMapping
from admitter.api.workload import CONDITION_EVICTED
from admitter.core.decisions import EvictionReason
from admitter.jobs.jobset import JobSet
from admitter.jobs.workloads import resource_of
from admitter.kube import client as kube
from admitter.kube.client import Kind, Kube
from admitter.kube.devices import class_label
from admitter.kube.objects import Obj, condition
from admitter.testing import GPU_RESOURCE, SIMULATED_RUNTIME_ANNOTATION, LocalCluster
from admitter.testing.demo import ADMIN_USERNAME
from admitter.testing.dra_driver import (
    DEVICE_CLASS,
    DRIVER,
    DraNodeLayout,
    TestDriver,
    claim_template,
    claiming,
)
from admitter.testing.waiting import eventually
from admitter.testing.webhooks import admitter_webhooks

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration
JOBSETS = resource_of(JobSet())
RESOURCE_CLAIMS = Kind("resource.k8s.io/v1", "resourceclaims", True)
SETTINGS = FAST.model_copy(update={"device_class_mappings": [
    DeviceClassMapping(name=GPU_RESOURCE, device_class_names=[DEVICE_CLASS])]})
LAYOUT = DraNodeLayout(nodes=2, nodes_per_rack=2, racks_per_block=1)
TEMPLATE = "eight-gpus"


@pytest.fixture
async def dra_nodes(local_cluster: LocalCluster, api: Kube) -> AsyncIterator[list[str]]:
    """Two KWOK nodes whose 8 GPUs each only the test driver publishes; gone after the test
    with their slices, so later tests find the cluster as it was."""
    names = local_cluster.create_gpu_nodes(LAYOUT)
    driver = TestDriver(api)
    await driver.publish(names, gpus=8)
    try:
        yield names
    finally:
        await driver.withdraw()
        for name in names:
            await api.delete(kube.NODES, name)


@pytest.fixture
async def dra_webhooks(local_cluster: LocalCluster, api: Kube, namespace: str,
                       tmp_path: Path) -> AsyncIterator[None]:
    """admitter's webhooks, with the DeviceClass mapping, registered as `admitter run` does,
    in effect: a queued Job's dry run comes back suspended (or refused for want of its
    LocalQueue, which only admitter's webhook says)."""
    async def in_effect() -> bool:
        probe = JobWrapper("probe", namespace).gpus(1).obj()
        try:
            made = await api.request("POST", kube.JOBS.path(namespace), probe,
                                     query={"dryRun": "All"})
        except ApiException as error:
            return "LocalQueue" in str(error)
        return made["spec"].get("suspend") is True

    try:
        async with admitter_webhooks(api.api, SETTINGS, tmp_path / "certs", [ADMIN_USERNAME]):
            await eventually(in_effect, "admitter's webhooks in effect")
            yield
    finally:
        delete_webhook_configurations(local_cluster)


def claiming_job(namespace: str, name: str, priority: str) -> Obj:
    job = (JobWrapper(name, namespace).runtime("1h").min_runtime("2s").resumable()
           .priority_class(priority).obj())
    template = job["spec"]["template"]
    template["spec"] = claiming(template["spec"], TEMPLATE)
    return job


def claiming_jobset(namespace: str, name: str, priority: str) -> Obj:
    pod = claiming({"restartPolicy": "Never", "priorityClassName": priority,
                    "containers": [{"name": "main", "image": "registry.invalid/train"}]},
                   TEMPLATE)
    return {
        "apiVersion": JobSet.api_version, "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {QUEUE_LABEL: "default"},
                     "annotations": {MIN_RUNTIME_ANNOTATION: "2s",
                                     RESUMABLE_ANNOTATION: "true"}},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
            "parallelism": 1, "completions": 1, "template": {
                "metadata": {"annotations": {SIMULATED_RUNTIME_ANNOTATION: "1h"}},
                "spec": pod}}}}]},
    }


async def allocated_claims(api: Kube, namespace: str) -> dict[str, str]:
    """Pod → the node its ResourceClaim's devices were allocated on (their pool, which the
    driver names after the node), for every claim allocated to a live pod."""
    listed = (await api.request("GET", RESOURCE_CLAIMS.path(namespace)))["items"]
    found = {}
    for claim in listed:
        if claim["metadata"].get("deletionTimestamp"):
            continue
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        pools = {result["pool"] for result in results if result["driver"] == DRIVER}
        owners = [o["name"] for o in claim["metadata"].get("ownerReferences") or ()
                  if o["kind"] == "Pod"]
        if len(results) == 8 and len(pools) == 1 and owners:
            found[owners[0]] = pools.pop()
    return found


async def placed_on_their_devices(api: Kube, namespace: str, job: Obj) -> str | None:
    """The node of the job's one live pod, once it is bound there and its claim's 8 devices
    were allocated on that same node."""
    pods = await live_pods(api, job)
    if len(pods) != 1 or not pods[0]["spec"].get("nodeName"):
        return None
    pod = pods[0]
    node: str = pod["spec"]["nodeName"]
    allocated = await allocated_claims(api, namespace)
    return node if allocated.get(pod["metadata"]["name"]) == node else None


async def cluster_queue_status(api: Kube, name: str) -> Obj:
    found: Obj = (await api.get(kube.CLUSTER_QUEUES, name)).get("status") or {}
    return found


async def test_jobs_claiming_gpus_through_dra_are_queued_admitted_allocated_and_preempted(
        jobset_operator: None, dra_nodes: list[str], dra_webhooks: None, api: Kube,  # noqa: F811
        namespace: str, kubeconfig: Path) -> None:
    await priority_class(api, "dra-low", 10)
    await priority_class(api, "dra-high", 50)
    queue = f"dra-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(queue, 16, limit=16, namespace=namespace))
    await api.create(kube.RESOURCE_CLAIM_TEMPLATES, claim_template(namespace, TEMPLATE, 8))
    job = await api.create(kube.JOBS, claiming_job(namespace, "train", "dra-low"))
    jobset = await api.create(JOBSETS, claiming_jobset(namespace, "sweep", "dra-low"))
    assert job["spec"]["suspend"] is True and jobset["spec"]["suspend"] is True
    try:
        async with in_process_controller(kubeconfig, SETTINGS) as controller:
            nodes = {}
            for owner, what in ((job, "the Job"), (jobset, "the JobSet")):
                nodes[what] = await eventually(
                    lambda owner=owner: placed_on_their_devices(api, namespace, owner),
                    f"{what}'s pod bound where kube-scheduler allocated its claim", 120.0)
                wl = await workload_of(api, owner)
                assert wl is not None
                (pod_set,) = wl["spec"]["podSets"]
                assert str(pod_set["requests"][GPU_RESOURCE]) == "8", pod_set
                assert pod_set["nodeSelector"] == {class_label(DEVICE_CLASS): "true"}
                # Its pod is on the node the model chose for it, pinned there by admitter.
                await placed_as_counted(api, owner, await live_pods(api, owner))
            assert sorted(nodes.values()) == sorted(dra_nodes)
            published, held = controller.caches.node_devices()
            assert {node: on.counts for node, on in published.items()} == {
                node: {GPU_RESOURCE: 8} for node in dra_nodes}
            assert held == {}, "admitted jobs' claims are counted by their admission, once"

            async def counted() -> Obj | None:
                status = await cluster_queue_status(api, queue)
                allocated = str((status.get("allocated") or {}).get(GPU_RESOURCE))
                return status if allocated == "16" else None

            status = await eventually(counted, "16 DRA GPUs allocated in the queue's status")
            assert status["admittedWorkloads"] == 2
            # Fair share is capped by the queue's demand: the GPUs its jobs ask through claims
            # (0 if the claims were not counted).
            assert str(status["deserved"][GPU_RESOURCE]) == "16", status
            assert str(status["fairShare"][GPU_RESOURCE]) == "16", status

            urgent = await api.create(kube.JOBS, claiming_job(namespace, "urgent", "dra-high"))
            freed = await eventually(
                lambda: placed_on_their_devices(api, namespace, urgent),
                "the high-priority Job bound where its claim was allocated", 120.0)
            await placed_as_counted(api, urgent, await live_pods(api, urgent))
            victims = []
            for owner in (job, jobset):
                wl = await workload_of(api, owner)
                assert wl is not None
                evicted = condition(wl, CONDITION_EVICTED)
                if evicted is not None and evicted["reason"] == EvictionReason.PREEMPTED.value:
                    victims.append(owner)
            assert len(victims) == 1, "one of the two made room"
            (victim,) = victims
            assert (await read(api, victim))["spec"]["suspend"] is True
            assert freed == nodes["the Job" if victim is job else "the JobSet"]

            async def released() -> bool:
                # The victim's pod and its claim are gone; the two claims left are the
                # survivor's and the preemptor's, on the two nodes.
                allocated = await allocated_claims(api, namespace)
                return not await live_pods(api, victim) and sorted(
                    allocated.values()) == sorted(dra_nodes)

            await eventually(released, "the preempted job's pod and claim released", 120.0)

            async def used() -> Obj | None:
                status = await cluster_queue_status(api, queue)
                seconds = sum(float(b["gpuSeconds"]) for b in status.get("usage") or ())
                return status if seconds > 0 else None

            status = await eventually(used, "the queue's GPU time in its status", 120.0)
            assert str(status["allocated"][GPU_RESOURCE]) == "16"
            assert (await jobs(api, namespace))["urgent"]["spec"]["suspend"] is False
    finally:
        await clear(api, namespace, JOBSETS, kube.JOBS)


async def test_the_webhook_refuses_a_claim_of_a_device_class_with_no_mapping(
        dra_webhooks: None, api: Kube, namespace: str) -> None:
    await api.create(kube.RESOURCE_CLAIM_TEMPLATES,
                     claim_template(namespace, "nics", 1, device_class_name="nic.example.com"))
    job = (JobWrapper("unmapped", namespace).runtime("1h").obj())
    job["spec"]["template"]["spec"] = claiming(job["spec"]["template"]["spec"], "nics")
    with pytest.raises(ApiException) as refused:
        await api.create(kube.JOBS, job)
    assert refused.value.status in (400, 403, 422)
    body = str(refused.value)
    assert "'nic.example.com' has no quota resource" in body, body
    assert "spec.template.spec.resourceClaims[0]" in body, body
