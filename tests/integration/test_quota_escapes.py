"""Tenant actions on the real control plane that used to stop admission or escape quota:
a pod with a fractional memory request, parallelism raised after admission (re-admitted
into a rack, which needs the template of a Job that ran to change again), and a Job deleted
with `--cascade=orphan`."""

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
    pods,
    running,
    workloads,
)

from admitter.api.workload import CONDITION_FINISHED, Reason
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, condition, is_true
from admitter.testing import RACK_LABEL
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration


@pytest.fixture
async def queue(api: Kube, namespace: str) -> AsyncIterator[str]:
    """A ClusterQueue of 32 GPUs and the namespace's LocalQueue `default` on it; the
    Topology the cluster's labels describe."""
    name = f"escapes-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 32, limit=32, namespace=namespace))
    await cluster_topology(api)
    yield name
    for job in (await jobs(api, namespace)).values():
        await api.request("DELETE", kube.JOBS.path(namespace, job["metadata"]["name"]),
                          {"propagationPolicy": "Background"})


def _admitted_workload(listed: list[Obj], job: Obj) -> Obj | None:
    uid = job["metadata"]["uid"]
    return next((w for w in listed if any(o.get("uid") == uid for o in w["metadata"].get(
        "ownerReferences", [])) and (w.get("status") or {}).get("admission")), None)


async def test_a_fractional_memory_request_stops_nothing(
        api: Kube, namespace: str, queue: str, kubeconfig: Path) -> None:
    """The API server accepts `memory: 500m` (with a warning); the pod is bound before the
    controller starts, so its first list holds it."""
    nodes = await api.request("GET", kube.NODES.path())
    odd_pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "odd", "namespace": namespace},
               "spec": {"nodeName": nodes["items"][0]["metadata"]["name"],
                        "containers": [{"name": "c", "image": "registry.invalid/x",
                                        "resources": {"requests": {"memory": "500m"}}}]}}
    await api.create(kube.PODS, odd_pod)
    odd_job = (JobWrapper("odd-job", namespace).gpus(1).runtime("2h")
               .request("memory", "500m").request("nvidia.com/gpu", "1").obj())
    await apply_all(api, odd_job, JobWrapper("plain", namespace).gpus(1).runtime("2h").obj())
    async with in_process_controller(kubeconfig) as controller:
        async def both_running() -> bool:
            current = await jobs(api, namespace)
            return running(current["odd-job"]) and running(current["plain"])

        await eventually(both_running, "both Jobs admitted and running", timeout=60)
        assert controller.caches.pods.synced.is_set()


async def test_raised_parallelism_is_evicted_and_admitted_again_into_a_rack(
        api: Kube, namespace: str, queue: str, kubeconfig: Path) -> None:
    train = (JobWrapper("train", namespace).pods(1).runtime("2h").required(RACK_LABEL)
             .completions(4).obj())  # completions are immutable; parallelism is not
    await apply_all(api, train)
    async with in_process_controller(kubeconfig):
        async def started() -> Obj | None:
            job = (await jobs(api, namespace))["train"]
            return job if running(job) and (job.get("status") or {}).get("startTime") else None

        await eventually(started, "the Job to run (and get a startTime)", timeout=60)
        (first,) = await workloads(api, namespace)
        await api.patch(kube.JOBS, "train", {"spec": {"parallelism": 2}}, namespace)

        async def two_pods_charged_and_running() -> bool:
            current = (await jobs(api, namespace))["train"]
            wl = _admitted_workload(await workloads(api, namespace), current)
            bound = [p for p in await pods(api, namespace, "train")
                     if p["spec"].get("nodeName") and not p["metadata"].get(
                         "deletionTimestamp")]
            return (wl is not None and wl["spec"]["podSets"][0]["count"] == 2
                    and int((current.get("status") or {}).get("active", 0)) == 2
                    and len(bound) == 2)

        await eventually(two_pods_charged_and_running,
                         "the Job evicted, charged for 2 pods and running again", timeout=90)
    listed = await workloads(api, namespace)
    assert len(listed) == 1, "the Workload charged for one pod was replaced"
    assert listed[0]["metadata"]["uid"] != first["metadata"]["uid"]
    events = await api.request("GET", kube.EVENTS.path(namespace))
    assert any(e["reason"] == Reason.JOB_CHANGED for e in events["items"])


async def test_a_workload_left_behind_by_an_orphaning_delete_is_finished(
        api: Kube, namespace: str, queue: str, kubeconfig: Path) -> None:
    await apply_all(api, JobWrapper("train", namespace).gpus(8).runtime("2h").obj())
    async with in_process_controller(kubeconfig):
        async def admitted() -> bool:
            return running((await jobs(api, namespace))["train"])

        await eventually(admitted, "the Job to run", timeout=60)
        await api.request("DELETE", kube.JOBS.path(namespace, "train"),
                          {"propagationPolicy": "Orphan"})

        async def finished() -> Obj | None:
            listed = await workloads(api, namespace)
            return next((w for w in listed if is_true(w, CONDITION_FINISHED)), None)

        # Worst case: the garbage collector's orphan finalizer, then a lookup that still found
        # the Job (the cache lagging) and is not repeated for a sweep (SWEEP_EVERY, 30 s).
        wl = await eventually(finished, "the orphaned Workload to be finished", timeout=120)
    assert not (wl.get("status") or {}).get("admission"), "its quota released"
    assert condition(wl, CONDITION_FINISHED)["reason"] == Reason.JOB_GONE
