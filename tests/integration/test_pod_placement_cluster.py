"""Each pod on the node its admission counted it on, on the real control plane (8 KWOK nodes
of 8 GPUs), with admitter's webhooks and controller running: a burst of 8-GPU and 2-GPU Jobs
admitted together leaves no pod unschedulable; a pod the Job controller recreates goes to an
admitted host; a pod whose host went down before it was placed stays held, never bound, and
its Job is requeued and runs elsewhere; a JobSet's and a RayJob's pods are placed per pod
set; and with admitter unreachable, pods start ungated while queued Jobs wait
(docs/placement.md)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from admitter_world import FAST, apply_all
from burst_world import admitter_running, burst, placement_gate_in_effect, queue
from kubernetes_asyncio.client.exceptions import ApiException
from operator_runs import placed_as_counted

from admitter.api.contract import QUEUE_LABEL
from admitter.api.settings import Settings
from admitter.api.workload import Reason
from admitter.commands.certs import mint
from admitter.jobs.jobset import JobSet
from admitter.jobs.rayjob import POD_LABEL as RAY_POD_LABEL
from admitter.jobs.rayjob import RayJob
from admitter.jobs.workloads import resource_of
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.informer import Informer
from admitter.kube.names import NAMESPACE, SERVICE, WEBHOOK_CONFIGURATION
from admitter.kube.objects import PLACEMENT_GATE, POD_SET_LABEL, Obj, is_gated, pinned_host
from admitter.testing import LocalCluster
from admitter.testing.jobset_operator import running_jobset_operator
from admitter.testing.kuberay_operator import running_kuberay_operator
from admitter.testing.waiting import eventually
from admitter.webhook.registration import register_url_webhooks

from builders.kube import JobWrapper

pytestmark = pytest.mark.integration
GPU = "nvidia.com/gpu"
PLACING = FAST.model_copy(update={"pod_placement": "Node"})


@pytest.fixture
async def placing(api: Kube, namespace: str, kubeconfig: Path, tmp_path: Path,
                  idle_cluster: None) -> AsyncIterator[Settings]:
    """A queue of the cluster's 64 GPUs in the test's namespace; admitter running with
    `podPlacement: Node`, its placement webhook in effect."""
    await queue(api, namespace, 64)
    async with admitter_running(api, kubeconfig, PLACING, tmp_path / "certs"):
        await placement_gate_in_effect(api, namespace)
        yield PLACING


@contextlib.asynccontextmanager
async def pod_history(api: Kube, namespace: str) -> AsyncIterator[list[Obj]]:
    """Every version of every pod of `namespace` the watch shows, while in the block."""
    seen: list[Obj] = []
    informer = Informer(api, kube.PODS, lambda event, pod: seen.append(pod),
                        {"fieldSelector": f"metadata.namespace={namespace}"})
    task = asyncio.create_task(informer.run())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def job_pods(api: Kube, namespace: str, job: str) -> list[Obj]:
    listed = await api.request("GET", kube.PODS.path(namespace),
                               query={"labelSelector": f"batch.kubernetes.io/job-name={job}"})
    items: list[Obj] = listed["items"]
    return items


async def hinted_hosts(api: Kube, namespace: str, job: str) -> dict[str, int]:
    for wl in (await api.request("GET", kube.WORKLOADS.path(namespace)))["items"]:
        owner = wl["metadata"]["ownerReferences"][0]["name"]
        admission = (wl.get("status") or {}).get("admission")
        if owner == job and admission:
            return {h["node"]: h["count"] for h in admission["nodeHints"]}
    return {}


async def test_a_burst_of_8_and_2_gpu_jobs_leaves_no_admitted_pod_unschedulable(
        api: Kube, namespace: str, placing: Settings) -> None:
    """Four 8-GPU and sixteen 2-GPU Jobs, the whole cluster, admitted in one cycle, three
    times over: kube-scheduler, left to spread them, leaves 8-GPU pods fitting no node
    (benchmarks/bench_pod_placement.py counts how often); placed, every pod binds where its
    admission counted it, none unschedulable."""
    for seed in range(3):
        outcome = await burst(api, namespace, big=4, small=16, seed=seed, settle=90)
        assert outcome.pods == 20
        assert outcome.unbound == 0, outcome
        assert outcome.unschedulable == 0, outcome


async def test_a_recreated_pod_is_placed_on_an_admitted_host(
        api: Kube, namespace: str, placing: Settings) -> None:
    """Two 4-GPU pods run; one is deleted and the Job controller makes a new one: it is held,
    then pinned to the host its predecessor left, and binds there."""
    job = JobWrapper("pair", namespace).pods(2).gpus(4).runtime("2h").obj()
    job["spec"]["backoffLimit"] = 3
    await apply_all(api, job)

    async def both_bound() -> list[Obj] | None:
        pods = await job_pods(api, namespace, "pair")
        return pods if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) else None

    first = await eventually(both_bound, "both pods bound", 90)
    hints = await hinted_hosts(api, namespace, "pair")
    assert sorted(p["spec"]["nodeName"] for p in first) == sorted(
        host for host, count in hints.items() for _ in range(count))
    assert all(pinned_host(p) == p["spec"]["nodeName"] for p in first)
    gone = first[0]
    await api.delete(kube.PODS, gone["metadata"]["name"], namespace)

    async def replaced() -> Obj | None:
        pods = await job_pods(api, namespace, "pair")
        fresh = [p for p in pods if p["metadata"]["uid"] not in {q["metadata"]["uid"]
                                                                 for q in first}]
        return fresh[0] if fresh and fresh[0]["spec"].get("nodeName") else None

    new = await eventually(replaced, "the recreated pod bound", 90)
    assert new["spec"]["nodeName"] == pinned_host(new) == gone["spec"]["nodeName"]
    assert not is_gated(new, PLACEMENT_GATE)


async def test_a_pod_whose_host_went_down_stays_held_and_its_job_runs_elsewhere(
        api: Kube, namespace: str, placing: Settings) -> None:
    """A Job of two 8-GPU pods one after the other: its first pod runs on its host, which is
    then cordoned. The second pod, made when the first ends, can go only to that host: it
    stays held and is never bound; the Job is requeued (`HostUnavailable`) and its next pod
    runs on another node."""
    job = JobWrapper("serial", namespace).gpus(8).completions(2).runtime("5s").obj()
    job["spec"]["backoffLimit"] = 3
    async with pod_history(api, namespace) as seen:
        await apply_all(api, job)

        async def first_bound() -> str | None:
            pods = await job_pods(api, namespace, "serial")
            return next((p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")),
                        None)

        host = await eventually(first_bound, "the first pod bound", 90)
        await api.patch(kube.NODES, host, {"spec": {"unschedulable": True}})
        try:
            async def requeued() -> bool:
                events = (await api.request(
                    "GET", f"/api/v1/namespaces/{namespace}/events"))["items"]
                return any(e.get("reason") == Reason.HOST_UNAVAILABLE
                           and e["involvedObject"]["name"] == "serial" for e in events)

            await eventually(requeued, "the Job requeued for its host down", 90)

            async def done() -> bool:
                current = await api.get(kube.JOBS, "serial", namespace)
                return int((current.get("status") or {}).get("succeeded", 0)) == 2

            await eventually(done, "the Job done on another node", 120)
        finally:
            await api.patch(kube.NODES, host, {"spec": {"unschedulable": None}})
    # Every version of every pod: the pods made after the cordon never reached its host, and
    # a pod held while its workload was being requeued was never bound nor ungated.
    by_uid: dict[str, list[Obj]] = {}
    for pod in seen:
        by_uid.setdefault(pod["metadata"]["uid"], []).append(pod)
    first_uid = next(uid for uid, versions in by_uid.items()
                     if any(v["spec"].get("nodeName") == host for v in versions))
    stranded = [versions for uid, versions in by_uid.items() if uid != first_uid
                and all(v["spec"].get("nodeName") is None for v in versions)]
    assert stranded, "the pod made for the host that went down"
    assert all(is_gated(v, PLACEMENT_GATE) for versions in stranded for v in versions)
    later = [v for uid, versions in by_uid.items() if uid != first_uid for v in versions]
    assert all(v["spec"].get("nodeName") != host for v in later)


@pytest.fixture
def operators(local_cluster: LocalCluster, tmp_path: Path) -> Iterator[None]:
    """JobSet's controller and KubeRay's operator, running."""
    with (running_jobset_operator(local_cluster, tmp_path / "jobset"),
          running_kuberay_operator(local_cluster, tmp_path / "kuberay")):
        yield


async def test_a_jobsets_pods_are_each_placed_where_their_pod_set_was_counted(
        api: Kube, namespace: str, operators: None, placing: Settings) -> None:
    """A leader of 2 GPUs and two replicas of three 2-GPU workers: JobSet's pods, made by its
    child Jobs from templates admitter labelled, are held by the webhook and each pinned to
    a node its pod set was counted on."""
    def template(gpus: int) -> Obj:
        return {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "trainer", "resources": {"limits": {GPU: str(gpus)}}}]}}

    body = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "gang", "namespace": namespace,
                         "labels": {QUEUE_LABEL: "default"}},
            "spec": {"suspend": True, "replicatedJobs": [
                {"name": "leader", "template": {"spec": {
                    "parallelism": 1, "completions": 1, "template": template(2)}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {
                    "parallelism": 3, "completions": 3, "template": template(2)}}}]}}
    jobset = await api.create(resource_of(JobSet()), body)

    async def all_bound() -> list[Obj] | None:
        listed = await api.request("GET", kube.PODS.path(namespace), query={
            "labelSelector": "jobset.sigs.k8s.io/jobset-name=gang"})
        pods: list[Obj] = listed["items"]
        return pods if len(pods) == 7 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = await eventually(all_bound, "the JobSet's 7 pods bound", 120)
    await placed_as_counted(api, jobset, pods)


async def test_a_rayjobs_head_workers_and_submitter_are_each_placed_where_counted(
        api: Kube, namespace: str, operators: None, placing: Settings) -> None:
    """KubeRay copies the template labels admitter put on to the pods it makes: the head,
    three 2-GPU workers and, once they are up, the submitter are held, then each pinned where
    its pod set was counted."""
    def template(container: str, limits: dict[str, str]) -> Obj:
        return {"spec": {"containers": [{"name": container, "image": "rayproject/ray",
                                         "resources": {"limits": limits}}]}}

    body = {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "tune", "namespace": namespace,
                         "labels": {QUEUE_LABEL: "default"}},
            "spec": {"suspend": True, "shutdownAfterJobFinishes": True,
                     "entrypoint": "python -c 'import ray; ray.init()'",
                     "rayClusterSpec": {
                         "headGroupSpec": {"rayStartParams": {},
                                           "template": template("ray-head", {"cpu": "1"})},
                         "workerGroupSpecs": [{
                             "groupName": "gpu", "replicas": 3, "minReplicas": 0,
                             "maxReplicas": 3, "rayStartParams": {},
                             "template": template("ray-worker", {GPU: "2"})}]}}}
    rayjob = await api.create(resource_of(RayJob()), body)

    async def all_bound() -> list[Obj] | None:
        listed = await api.request("GET", kube.PODS.path(namespace), query={
            "labelSelector": f"{RAY_POD_LABEL}=tune"})
        pods = [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]
        return pods if len(pods) == 5 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = await eventually(all_bound, "the Ray cluster's 4 pods and the submitter bound", 180)
    await placed_as_counted(api, rayjob, pods)


async def test_while_admitter_is_unreachable_pods_start_ungated_and_queued_jobs_wait(
        api: Kube, namespace: str, idle_cluster: None) -> None:
    """The webhooks registered, nothing serving them: the placement webhook fails open, so a
    started job's pod is created without the gate and bound by kube-scheduler; the job
    webhooks fail closed, so no queued Job is created outside quota."""
    certs = mint(SERVICE, NAMESPACE, dt.timedelta(hours=1))
    await register_url_webhooks(api.api, "127.0.0.1:1", certs.ca.cert_pem, PLACING)
    try:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "started", "namespace": namespace,
                            "labels": {POD_SET_LABEL: "main"}},
               "spec": {"containers": [{"name": "c", "image": "registry.invalid/train",
                                        "resources": {"limits": {GPU: "1"}}}]}}
        created = await api.create(kube.PODS, pod)
        assert not created["spec"].get("schedulingGates")

        async def bound() -> bool:
            return bool((await api.get(kube.PODS, "started", namespace))["spec"].get(
                "nodeName"))

        await eventually(bound, "the ungated pod bound", 60)
        with pytest.raises(ApiException) as refused:
            await api.create(kube.JOBS, JobWrapper("queued", namespace).obj())
        assert "mutate-jobs.admitter.dev" in str(refused.value.reason), refused.value
    finally:
        await api.delete(kube.PODS, "started", namespace)
        for kind in ("mutating", "validating"):
            await api.request("DELETE", "/apis/admissionregistration.k8s.io/v1/"
                              f"{kind}webhookconfigurations/{WEBHOOK_CONFIGURATION}")
