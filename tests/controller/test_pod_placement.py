"""Held pods of an admitted Job get one patch each: the placement gate lifted and the node
their admission counted them on pinned; pods of a Job not admitted stay held; a host gone
before its pods were placed requeues the Job."""

from __future__ import annotations

import asyncio

from fake_api import FakeApi, add, reconciler, settled_pass, team

from admitter.api.workload import CONDITION_EVICTED, Reason
from admitter.jobs.workloads import workload_name
from admitter.kube import client as kube
from admitter.kube.objects import (
    PLACEMENT_GATE,
    POD_SET_LABEL,
    Obj,
    condition,
    is_gated,
    pinned_host,
)

from builders.kube import JobWrapper


def held_pod(job: Obj, index: int) -> Obj:
    """A pod the Job controller made from the started template, held by the webhook."""
    meta = job["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-{index}", "namespace": meta["namespace"],
                         "uid": f"pod-uid-{index}",
                         "labels": {POD_SET_LABEL: "main"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": meta["name"], "uid": meta["uid"],
                                              "controller": True}]},
            "spec": {"schedulingGates": [{"name": PLACEMENT_GATE}],
                     "containers": [{"name": "c"}]},
            "status": {"phase": "Pending"}}


async def admitted_job(api: FakeApi, gpus: int, pods: int, **node_gpus: int):
    controller = reconciler(api)
    team(api, controller, 16, **node_gpus)
    job = add(api, controller.caches.jobs["Job"], kube.JOBS,
              JobWrapper("train", "ns").pods(pods).gpus(gpus).min_runtime("1h").obj())
    for _ in range(2):
        await settled_pass(controller)
    wl = controller.caches.workloads.get("ns", workload_name(job))
    assert wl["status"]["admission"], "admitted"
    return controller, job, wl


def pod_now(api: FakeApi, name: str) -> Obj:
    return api.objects[kube.PODS.path("ns", name)]


def test_each_held_pod_is_pinned_to_a_node_its_admission_counted():
    async def run() -> None:
        api = FakeApi()
        controller, job, wl = await admitted_job(api, 4, 4, gpu_1=8, gpu_2=8)
        hints = {h["node"]: h["count"] for h in wl["status"]["admission"]["nodeHints"]}
        for i in range(4):
            add(api, controller.caches.pods, kube.PODS, held_pod(job, i))
        patches_before = api.count("PATCH", "pods")
        await settled_pass(controller)
        placed = [pod_now(api, f"train-{i}") for i in range(4)]
        assert not any(is_gated(p, PLACEMENT_GATE) for p in placed)
        hosts = [pinned_host(p) for p in placed]
        assert {h: hosts.count(h) for h in set(hosts)} == hints
        assert api.count("PATCH", "pods") - patches_before == 4, "one patch per pod"
        # a pod recreated after one ended takes the slot it left, on its host
        ended = {**placed[0], "status": {"phase": "Failed"}}
        controller.caches.pods.observe(api.put(kube.PODS, ended))
        add(api, controller.caches.pods, kube.PODS, held_pod(job, 9))
        await settled_pass(controller)
        assert pinned_host(pod_now(api, "train-9")) == hosts[0]

    asyncio.run(run())


def test_a_held_pod_of_a_job_not_admitted_stays_held():
    async def run() -> None:
        api = FakeApi()
        controller = reconciler(api)
        team(api, controller, 4, gpu_1=8)
        job = add(api, controller.caches.jobs["Job"], kube.JOBS,
                  JobWrapper("train", "ns").pods(1).gpus(8).min_runtime("1h").obj())
        add(api, controller.caches.pods, kube.PODS, held_pod(job, 0))
        for _ in range(3):
            await settled_pass(controller)
        wl = controller.caches.workloads.get("ns", workload_name(job))
        assert not (wl.get("status") or {}).get("admission"), "over its quota: pending"
        assert is_gated(pod_now(api, "train-0"), PLACEMENT_GATE)

    asyncio.run(run())


def test_a_host_cordoned_before_its_pods_were_placed_requeues_the_job():
    async def run() -> None:
        api = FakeApi()
        controller, job, wl = await admitted_job(api, 8, 1, gpu_1=8, gpu_2=8)
        (hint,) = wl["status"]["admission"]["nodeHints"]
        node = controller.caches.nodes.get("", hint["node"])
        controller.caches.nodes.observe(api.put(kube.NODES, {
            **node, "spec": {**node.get("spec", {}), "unschedulable": True}}))
        add(api, controller.caches.pods, kube.PODS, held_pod(job, 0))
        await settled_pass(controller)
        evicted = condition(api.objects[kube.WORKLOADS.path("ns", workload_name(job))],
                            CONDITION_EVICTED)
        assert evicted is not None and evicted["reason"] == Reason.HOST_UNAVAILABLE
        assert hint["node"] in evicted["message"]
        assert is_gated(pod_now(api, "train-0"), PLACEMENT_GATE), "never placed"
        assert api.objects[kube.JOBS.path("ns", "train")]["spec"]["suspend"] is True

    asyncio.run(run())


def test_a_held_pod_arriving_or_a_placed_one_going_while_pods_wait_wakes_a_pass():
    api = FakeApi()
    controller = reconciler(api)
    job = JobWrapper("train", "ns").uid("job-uid").obj()
    held = held_pod(job, 0)
    placed = {**held_pod(job, 1), "spec": {"nodeName": "gpu-1", "containers": []}}
    placer = controller.placer
    assert placer.wakes("ADDED", held)
    assert placer.wakes("MODIFIED", held), "its patch may have lost to a status write"
    assert not placer.wakes("ADDED", placed)
    assert not placer.wakes("DELETED", placed), "no pod waits for its slot"
    add(api, controller.caches.pods, kube.PODS, held)
    assert placer.wakes("DELETED", placed)
    assert placer.wakes("MODIFIED", {**placed, "status": {"phase": "Failed"}})
    assert not placer.wakes("MODIFIED", placed)


def test_a_held_pod_of_a_workload_being_evicted_stays_held():
    """Marked evicted, its admission still held until its Job is suspended: the pod made
    meanwhile is never placed."""
    async def run() -> None:
        api = FakeApi()
        controller, job, wl = await admitted_job(api, 8, 1, gpu_1=8, gpu_2=8)
        marked = {**wl, "status": {**wl["status"], "conditions": [
            *wl["status"]["conditions"],
            {"type": CONDITION_EVICTED, "status": "True", "reason": "Preempted",
             "message": "for another"}]}}
        controller.caches.workloads.observe(api.put(kube.WORKLOADS, marked))
        add(api, controller.caches.pods, kube.PODS, held_pod(job, 0))
        placing = controller.placer.place(lambda namespace, name: False)
        assert placing.patches == [] and placing.stranded == []
        await settled_pass(controller)
        assert is_gated(pod_now(api, "train-0"), PLACEMENT_GATE)

    asyncio.run(run())
