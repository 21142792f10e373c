"""The local control plane behaves like a real cluster: Job controller, kube-scheduler, KWOK pod
lifecycle, admission webhooks and kubectl all work against the fake GPU nodes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from admitter import pki
from admitter.testing import (
    GPU_RESOURCE,
    KWOK_NODE_LABEL,
    RACK_LABEL,
    LocalCluster,
)
from admitter.testing.waiting import eventually
from admitter.testing.webhooks import (
    admission_response,
    mutating_webhook_configuration,
    serve_https,
)

from builders.kube import JobWrapper

pytestmark = pytest.mark.integration

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def pod_spec(gpus: int = 0, **extra: Any) -> dict[str, Any]:
    resources = {"limits": {GPU_RESOURCE: str(gpus)}} if gpus else {}
    container = {"name": "main", "image": "registry.invalid/worker", "resources": resources}
    return {"containers": [container], "restartPolicy": "Never", **extra}


def plain_job(name: str, namespace: str) -> JobWrapper:
    """A Job that is not admitter's: no queue, no min runtime."""
    return JobWrapper(name, namespace).queue(None).min_runtime(None)


def condition(obj: Any, kind: str) -> bool:
    return any(c.type == kind and c.status == "True" for c in obj.status.conditions or [])


async def job_pods(core: client.CoreV1Api, namespace: str, job_name: str) -> list[Any]:
    pods = await core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME_LABEL}={job_name}")
    return list(pods.items)


async def test_suspended_job_creates_pods_only_when_resumed(
    kube_client: client.ApiClient, namespace: str
) -> None:
    batch, core = client.BatchV1Api(kube_client), client.CoreV1Api(kube_client)
    await batch.create_namespaced_job(
        namespace, plain_job("suspended", namespace).gpus(0).pods(3).suspend(True).obj()
    )

    async def suspended() -> bool:
        return condition(await batch.read_namespaced_job("suspended", namespace), "Suspended")

    # The Suspended condition proves the job controller has processed the job.
    await eventually(suspended, "the job controller to mark the job Suspended")
    assert await job_pods(core, namespace, "suspended") == []

    await batch.patch_namespaced_job("suspended", namespace, {"spec": {"suspend": False}})

    async def running_pods() -> list[Any] | None:
        pods = await job_pods(core, namespace, "suspended")
        return pods if [p.status.phase for p in pods] == ["Running"] * 3 else None

    pods = await eventually(running_pods, "3 running pods after resuming")
    assert all(p.spec.node_name for p in pods)


async def test_gpu_job_is_scheduled_into_one_rack_and_completes(
    local_cluster: LocalCluster, kube_client: client.ApiClient, namespace: str
) -> None:
    layout = local_cluster.layout
    batch, core = client.BatchV1Api(kube_client), client.CoreV1Api(kube_client)
    rack = "rack-1"
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": RACK_LABEL, "operator": "In", "values": [rack]}]}
                ]
            }
        }
    }
    train = (plain_job("train", namespace).gpus(layout.gpus_per_node).pods(2).runtime("2s")
             .affinity(affinity).suspend(False).obj())
    await batch.create_namespaced_job(namespace, train)

    async def complete() -> bool:
        return condition(await batch.read_namespaced_job("train", namespace), "Complete")

    await eventually(complete, "the GPU job to complete", timeout=60)
    pods = await job_pods(core, namespace, "train")
    assert [p.status.phase for p in pods] == ["Succeeded", "Succeeded"]
    assert sorted(p.spec.node_name for p in pods) == layout.nodes_in_rack(rack)


async def test_pod_wanting_more_gpus_than_any_node_stays_pending(
    local_cluster: LocalCluster, kube_client: client.ApiClient, namespace: str
) -> None:
    layout = local_cluster.layout
    core = client.CoreV1Api(kube_client)
    pod = {"metadata": {"name": "too-big"}, "spec": pod_spec(gpus=layout.gpus_per_node + 1)}
    await core.create_namespaced_pod(namespace, pod)

    async def failed_scheduling() -> Any:
        events = await core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=too-big,reason=FailedScheduling"
        )
        return events.items[0] if events.items else None

    event = await eventually(failed_scheduling, "a FailedScheduling event")
    assert f"Insufficient {GPU_RESOURCE}" in event.message
    current = await core.read_namespaced_pod("too-big", namespace)
    assert current.status.phase == "Pending"
    assert current.spec.node_name is None


async def test_api_server_calls_https_webhook_on_localhost(
    kube_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube_client)
    admission = client.AdmissionregistrationV1Api(kube_client)
    ca = pki.new_ca("test-webhook-ca")
    seen: list[dict[str, Any]] = []

    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        seen.append(review["request"])
        patch = [{"op": "add", "path": "/metadata/labels/admitter.dev~1mutated", "value": "yes"}]
        return web.json_response(admission_response(review, patch))

    app = web.Application()
    app.router.add_post("/mutate", mutate)
    async with serve_https(app, pki.serving_cert(ca, "webhook", ["127.0.0.1"])) as port:
        config = mutating_webhook_configuration(
            namespace, f"https://127.0.0.1:{port}/mutate", ca.cert_pem, namespace
        )
        await admission.create_mutating_webhook_configuration(config)
        try:
            pod = {"metadata": {"name": "p", "labels": {"app": "x"}}, "spec": pod_spec()}

            async def mutated_dry_run() -> bool:
                # The API server picks up new webhook configurations asynchronously.
                created = await core.create_namespaced_pod(namespace, pod, dry_run="All")
                return created.metadata.labels.get("admitter.dev/mutated") == "yes"

            await eventually(mutated_dry_run, "the webhook to be active")
            created = await core.create_namespaced_pod(namespace, pod)
        finally:
            await admission.delete_mutating_webhook_configuration(namespace)
    assert created.metadata.labels["admitter.dev/mutated"] == "yes"
    assert seen[-1]["namespace"] == namespace
    assert seen[-1]["kind"] == {"group": "", "version": "v1", "kind": "Pod"}


def test_kubectl_lists_fake_gpu_nodes(local_cluster: LocalCluster) -> None:
    columns = (
        "custom-columns=NAME:.metadata.name,GPU:.status.capacity.nvidia\\.com/gpu,"
        'READY:.status.conditions[?(@.type=="Ready")].status'
    )
    out = local_cluster.kubectl(
        "get", "nodes", "-l", KWOK_NODE_LABEL, "--no-headers", "-o", columns
    ).stdout
    rows = sorted(line.split() for line in out.splitlines())
    layout = local_cluster.layout
    expected = [[name, str(layout.gpus_per_node), "True"] for name in layout.node_names()]
    assert rows == expected

    versions = json.loads(local_cluster.kubectl("version", "-o", "json").stdout)
    kube_version = local_cluster.binaries.kube_version
    assert versions["clientVersion"]["gitVersion"] == kube_version
    assert versions["serverVersion"]["gitVersion"] == kube_version


def test_control_plane_starts_quickly(local_cluster: LocalCluster) -> None:
    # Measured from launch to Ready nodes; about 10 s on 2 cores, see hack/README.md.
    assert local_cluster.startup_seconds < 60
