"""Opt-in quota for unlabelled work on the real control plane: in a namespace the settings
select, an unlabelled GPU Job is held and admitted against quota, and plain GPU Pods are gated
until admitted (one over quota stays gated, its Workload saying why) and deleted when
preempted; the same objects in a namespace not selected run untouched."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from admitter_world import (
    FAST,
    apply_all,
    in_process_controller,
    jobs,
    priority_class,
    running,
    workloads,
)
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.contract import QUEUE_LABEL
from admitter.api.settings import Settings
from admitter.api.workload import CONDITION_QUOTA_RESERVED
from admitter.jobs.workloads import pod_workload_name
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.names import WEBHOOK_CONFIGURATION
from admitter.kube.objects import ADMISSION_GATE, Obj, condition
from admitter.testing import GPU_RESOURCE, SIMULATED_RUNTIME_ANNOTATION, LocalCluster
from admitter.testing.demo import ADMIN_USERNAME
from admitter.testing.waiting import eventually
from admitter.testing.webhooks import admitter_webhooks

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration
OPT_IN_LABEL = "admitter.dev/quota"


def unlabelled_job(namespace: str, name: str, gpus: int) -> Obj:
    return JobWrapper(name, namespace).queue(None).gpus(gpus).runtime("2h").suspend(False).obj()


def gpu_pod(namespace: str, name: str, gpus: int) -> Obj:
    container = {"name": "main", "image": "registry.invalid/notebook",
                 "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {SIMULATED_RUNTIME_ANNOTATION: "2h",
                                         "admitter.dev/min-runtime": "1h"}},
            "spec": {"restartPolicy": "Never", "containers": [container]}}


async def get_pod(api: Kube, namespace: str, name: str) -> Obj:
    return await api.get(kube.PODS, name, namespace)


async def unlabelled_webhooks_in_effect(api: Kube, namespace: str) -> None:
    """Wait until an unlabelled Job created in `namespace` would be queued in `default`."""
    async def in_effect() -> bool:
        probe = await api.request("POST", kube.JOBS.path(namespace),
                                  unlabelled_job(namespace, "probe", 1), query={"dryRun": "All"})
        return (probe["metadata"].get("labels") or {}).get(QUEUE_LABEL) == "default"

    await eventually(in_effect, "the unlabelled-work webhooks in effect")


def delete_webhook_configurations(cluster: LocalCluster) -> None:
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        cluster.kubectl("delete", kind, WEBHOOK_CONFIGURATION, "--ignore-not-found")


@pytest.fixture
async def other_namespace(api: Kube) -> AsyncIterator[str]:
    """A namespace the settings do not select."""
    name = f"unselected-{secrets.token_hex(3)}"
    await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})

    async def has_service_account() -> bool:
        try:
            await api.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
        except ApiException:
            return False
        return True

    await eventually(has_service_account, f"service account default in {name}")
    yield name
    await api.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture
async def opted_in(local_cluster: LocalCluster, api: Kube, namespace: str,
                   tmp_path: Path) -> AsyncIterator[Settings]:
    """The test's namespace selected by a label of its own, with LocalQueue `default` on a
    ClusterQueue of 8 GPUs; admitter's webhooks registered for it, as `admitter run
    --webhook-url-host` registers them."""
    token = secrets.token_hex(3)
    settings = FAST.model_copy(update={"unlabelled_work": Settings.model_validate(
        {"unlabelledWork": {"namespaceSelector": {"matchLabels": {OPT_IN_LABEL: token}}}}
    ).unlabelled_work})
    await api.request("PATCH", f"/api/v1/namespaces/{namespace}",
                      {"metadata": {"labels": {OPT_IN_LABEL: token}}},
                      content_type=kube.MERGE_PATCH)
    queue = f"unlabelled-{token}"
    await apply_all(api, *leaf_queue(queue, 8, limit=8, namespace=namespace))
    try:
        async with admitter_webhooks(api.api, settings, tmp_path / "certs", [ADMIN_USERNAME]):
            await unlabelled_webhooks_in_effect(api, namespace)
            yield settings
    finally:
        delete_webhook_configurations(local_cluster)
        for pod in (await api.request("GET", kube.PODS.path(namespace)))["items"]:
            with contextlib.suppress(ApiException):  # gone already
                await api.request("DELETE", kube.PODS.path(namespace, pod["metadata"]["name"]),
                                  {"gracePeriodSeconds": 0})


async def test_unlabelled_work_is_queued_only_where_the_settings_select_it(
        api: Kube, namespace: str, other_namespace: str, opted_in: Settings,
        kubeconfig: Path) -> None:
    # Outside the selection: exactly as created, running without admitter.
    job = await api.create(kube.JOBS, unlabelled_job(other_namespace, "free", 4))
    pod = await api.create(kube.PODS, gpu_pod(other_namespace, "free", 4))
    assert job["spec"]["suspend"] is False and QUEUE_LABEL not in job["metadata"].get(
        "labels", {})
    assert not pod["spec"].get("schedulingGates")

    # Inside: the Job is labelled with the default queue and held; the Pods are gated.
    held = await api.create(kube.JOBS, unlabelled_job(namespace, "train", 4))
    assert held["spec"]["suspend"] is True
    assert held["metadata"]["labels"][QUEUE_LABEL] == "default"
    first = await api.create(kube.PODS, gpu_pod(namespace, "first", 4))
    assert first["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]
    assert first["metadata"]["labels"][QUEUE_LABEL] == "default"

    async with in_process_controller(kubeconfig, opted_in):
        async def admitted() -> bool:
            current = (await jobs(api, namespace))["train"]
            pod = await get_pod(api, namespace, "first")
            return (running(current) and not pod["spec"].get("schedulingGates")
                    and pod["spec"].get("nodeName") is not None)

        await eventually(admitted, "the Job running and the first Pod ungated and bound", 90)
        first = await get_pod(api, namespace, "first")
        first_wl = await api.get(kube.WORKLOADS, pod_workload_name(first), namespace)
        assert first_wl["status"]["admission"]["clusterQueue"].startswith("unlabelled-")

        # The queue's 8 GPUs are taken by the Job (4) and the first Pod (4).
        second = await api.create(kube.PODS, gpu_pod(namespace, "second", 4))

        async def explained() -> Obj | None:
            for wl in await workloads(api, namespace):
                if wl["metadata"]["name"] == pod_workload_name(second):
                    reserved = condition(wl, CONDITION_QUOTA_RESERVED)
                    if reserved is not None and reserved.get("status") == "False":
                        return reserved
            return None

        reserved = await eventually(explained, "the second Pod's Workload saying why", 60)
        # Both the Job and the first Pod are charged to the queue.
        assert "holds 8 nvidia.com/gpu" in reserved["message"], reserved
        assert (await get_pod(api, namespace, "second"))["spec"]["schedulingGates"] == [
            {"name": ADMISSION_GATE}]

    # Outside the selection nothing was held, gated or given a Workload.
    assert (await jobs(api, other_namespace))["free"]["spec"]["suspend"] is False
    assert not (await get_pod(api, other_namespace, "free"))["spec"].get("schedulingGates")
    assert await workloads(api, other_namespace) == []


async def test_a_preempted_plain_pod_is_deleted_and_its_quota_goes_to_the_preemptor(
        api: Kube, namespace: str, opted_in: Settings, kubeconfig: Path) -> None:
    """A Pod cannot be suspended: evicting it deletes it, as Kueue stops Pods."""
    await priority_class(api, "unlabelled-test-low", 10)
    await priority_class(api, "unlabelled-test-high", 50)
    low = gpu_pod(namespace, "low", 8)
    low["metadata"]["annotations"].update({"admitter.dev/min-runtime": "2s",
                                           "admitter.dev/resumable": "true"})
    low["spec"]["priorityClassName"] = "unlabelled-test-low"
    high = unlabelled_job(namespace, "high", 8)
    high["metadata"]["annotations"]["admitter.dev/min-runtime"] = "2s"
    high["spec"]["template"]["spec"]["priorityClassName"] = "unlabelled-test-high"
    async with in_process_controller(kubeconfig, opted_in):
        await api.create(kube.PODS, low)

        async def low_running() -> bool:
            pod = await get_pod(api, namespace, "low")
            return (pod.get("status") or {}).get("phase") == "Running"

        await eventually(low_running, "the low-priority Pod to fill the queue's 8 GPUs", 90)
        await api.create(kube.JOBS, high)

        async def preempted() -> bool:
            try:
                await get_pod(api, namespace, "low")
            except ApiException as error:
                if not kube.is_not_found(error):
                    raise
                return running((await jobs(api, namespace))["high"])
            return False

        await eventually(preempted, "the low Pod deleted and the high Job running", 90)
