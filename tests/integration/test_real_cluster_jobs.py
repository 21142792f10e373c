"""Jobs as real clusters write them, against the real control plane: GPU nodes tainted the way
GKE and AKS taint them, nodeSelectors and required node affinity, native sidecars, and a
`topology-required` host level that the Topology does not list. Each test shows the Job
admitted with its pods bound by kube-scheduler, or pending with a reason that names the cause
and holding no quota."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from admitter_world import apply_all, in_process_controller, jobs, pods, workloads

from admitter.api.workload import CONDITION_QUOTA_RESERVED
from admitter.core.decisions import PendingReason
from admitter.kube.client import Kube
from admitter.kube.objects import Obj
from admitter.testing import (
    BLOCK_LABEL,
    HOSTNAME_LABEL,
    RACK_LABEL,
    LocalCluster,
)
from admitter.testing.nodes import KWOK_NODE_SELECTOR
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"
WAITING = (PendingReason.NO_FIT, PendingReason.PROTECTED_VICTIMS)
"""A Job that fits nowhere now waits with NoFit, or with ProtectedVictims when the session's
other tests left protected workloads running whose eviction would make room; the message leads
with the placement failure either way."""
TOPOLOGY = f"""
apiVersion: admitter.dev/v1alpha1
kind: Topology
metadata: {{name: a-racks-only}}
spec:
  levels:
  - {{nodeLabel: {BLOCK_LABEL}}}
  - {{nodeLabel: {RACK_LABEL}}}
"""


@pytest.fixture(scope="module", autouse=True)
def topology(local_cluster: LocalCluster, admitter_crds: None) -> Iterator[None]:
    """The cluster's levels as many platform teams declare them, without the host level; first
    by name, so the controller places by it, and deleted afterwards for the session's other
    tests."""
    local_cluster.kubectl("apply", "-f", "-", input=TOPOLOGY)
    try:
        yield
    finally:
        local_cluster.kubectl("delete", "topology", "a-racks-only")


@pytest.fixture
async def queue(api: Kube, namespace: str) -> AsyncIterator[str]:
    """One ClusterQueue with the whole cluster's 64 GPUs; yields its LocalQueue's name. The
    test's Jobs and their pods are gone afterwards, so the next test finds free nodes."""
    name = f"real-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 64, namespace=namespace, local_name="team"))
    yield "team"
    for job in await jobs(api, namespace):
        await api.request("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}",
                          {"propagationPolicy": "Background"})

    async def no_pods() -> bool:
        return not await pods(api, namespace)

    await eventually(no_pods, "the test's pods to be gone", timeout=60)


@pytest.fixture
def gpu_nodes_tainted(local_cluster: LocalCluster) -> Iterator[None]:
    """Every fake GPU node tainted as GKE and AKS taint theirs, untainted afterwards."""
    local_cluster.kubectl("taint", "nodes", "-l", KWOK_NODE_SELECTOR, GPU_TAINT, "--overwrite")
    try:
        yield
    finally:
        local_cluster.kubectl("taint", "nodes", "-l", KWOK_NODE_SELECTOR, f"{GPU_TAINT}-")


async def workload_of(api: Kube, namespace: str, job_name: str) -> Obj | None:
    return next((w for w in await workloads(api, namespace)
                 if w["metadata"]["ownerReferences"][0]["name"] == job_name), None)


async def bound_nodes(api: Kube, namespace: str, job_name: str) -> list[str] | None:
    """Nodes of the Job's pods once every pod is bound; None until then."""
    found = await pods(api, namespace, job_name)
    nodes = [p["spec"].get("nodeName") for p in found]
    return nodes if found and all(nodes) else None


async def pending_reason(api: Kube, namespace: str, job_name: str) -> Obj | None:
    """The Workload's QuotaReserved=False condition once it explains the wait."""
    wl = await workload_of(api, namespace, job_name)
    if wl is None:
        return None
    return next((c for c in (wl.get("status") or {}).get("conditions", [])
                 if c["type"] == CONDITION_QUOTA_RESERVED and c["status"] == "False"), None)


async def assert_waits_without_quota(api: Kube, namespace: str, job_name: str) -> None:
    wl = await workload_of(api, namespace, job_name)
    assert wl is not None and not (wl.get("status") or {}).get("admission")
    assert not await pods(api, namespace, job_name), "a Job that does not fit has no pods"


async def node_labels(api: Kube) -> dict[str, dict[str, str]]:
    listed = await api.request("GET", "/api/v1/nodes")
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in listed["items"]}


async def test_tainted_gpu_nodes_admit_only_jobs_that_tolerate_the_taint(
        api: Kube, namespace: str, queue: str, kubeconfig: Path,
        gpu_nodes_tainted: None) -> None:
    toleration = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                  "effect": "NoSchedule"}
    await apply_all(api,
                    JobWrapper("tolerant", namespace).queue(queue).toleration(toleration).obj(),
                    JobWrapper("plain", namespace).queue(queue).obj())
    async with in_process_controller(kubeconfig):
        await eventually(lambda: bound_nodes(api, namespace, "tolerant"),
                         "the tolerating Job admitted and its pod bound", timeout=45)
        reason = await eventually(lambda: pending_reason(api, namespace, "plain"),
                                  "why the Job without the toleration waits", timeout=45)
    assert reason["reason"] == PendingReason.NEVER_FITS, "no node will ever take its pods"
    assert "every schedulable node has a taint the pods do not tolerate" in reason["message"]
    await assert_waits_without_quota(api, namespace, "plain")
    tolerant = await workload_of(api, namespace, "tolerant")
    assert tolerant is not None
    assert tolerant["spec"]["podSets"][0]["tolerations"] == [toleration]


async def test_a_node_selector_for_a_full_rack_waits_while_a_free_rack_admits(
        api: Kube, namespace: str, queue: str, kubeconfig: Path) -> None:
    def on_rack(name: str, rack: str) -> JobWrapper:
        return JobWrapper(name, namespace).queue(queue).node_selector(RACK_LABEL, rack)

    fillers = [on_rack(f"fill-{i}", "rack-0").obj() for i in range(2)]
    # The user's own required affinity is ANDed with admitter's rack pin: rack-2 only.
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": RACK_LABEL, "operator": "In", "values": ["rack-2"]}]}]}}}
    await apply_all(api, *fillers)
    async with in_process_controller(kubeconfig):
        for filler in ("fill-0", "fill-1"):
            await eventually(lambda f=filler: bound_nodes(api, namespace, f),
                             f"{filler} bound on rack-0", timeout=45)
        await apply_all(api, on_rack("third", "rack-0").obj(), on_rack("free-rack", "rack-1").obj(),
                        JobWrapper("own-affinity", namespace).queue(queue).required(RACK_LABEL)
                        .affinity(affinity).obj())
        free_rack = await eventually(lambda: bound_nodes(api, namespace, "free-rack"),
                                     "the Job for a free rack bound", timeout=45)
        own = await eventually(lambda: bound_nodes(api, namespace, "own-affinity"),
                               "the Job with its own affinity bound", timeout=45)
        reason = await eventually(lambda: pending_reason(api, namespace, "third"),
                                  "why the third Job for rack-0 waits", timeout=45)
    labels = await node_labels(api)
    assert [labels[n][RACK_LABEL] for n in free_rack] == ["rack-1"]
    assert [labels[n][RACK_LABEL] for n in own] == ["rack-2"]
    assert reason["reason"] in WAITING
    assert ("no node the pods' nodeSelector and affinity match offers 8 nvidia.com/gpu per pod; "
            "the largest node has 0") in reason["message"]
    await assert_waits_without_quota(api, namespace, "third")
    pinned = (await jobs(api, namespace))["own-affinity"]["spec"]["template"]["spec"]["affinity"]
    [term] = pinned["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    keys = [e["key"] for e in term["matchExpressions"]]
    assert keys.count(RACK_LABEL) == 2 and BLOCK_LABEL in keys, "the user's term kept, pin added"


async def test_a_native_sidecars_cpu_is_counted(
        api: Kube, namespace: str, queue: str, kubeconfig: Path) -> None:
    """Nodes have 96 CPU. 64 CPU of container and a 40 CPU sidecar need 104 on one node: it
    never fits (the old count, the larger of the two, admitted it to a pod that stays
    Pending). A small sidecar's CPU shows in the Workload's request."""
    def with_sidecar(name: str, main_cpu: str, sidecar_cpu: str) -> Obj:
        sidecar = {"name": "proxy", "image": "registry.invalid/proxy", "restartPolicy": "Always",
                   "resources": {"requests": {"cpu": sidecar_cpu}}}
        return (JobWrapper(name, namespace).queue(queue).gpus(1).request("cpu", main_cpu)
                .init_container(sidecar).obj())

    await apply_all(api, with_sidecar("small", "2", "1"), with_sidecar("large", "64", "40"))
    async with in_process_controller(kubeconfig):
        await eventually(lambda: bound_nodes(api, namespace, "small"),
                         "the Job with a small sidecar bound", timeout=45)
        reason = await eventually(lambda: pending_reason(api, namespace, "large"),
                                  "why the Job with a large sidecar waits", timeout=45)
    small = await workload_of(api, namespace, "small")
    assert small is not None and str(small["spec"]["podSets"][0]["requests"]["cpu"]) == "3"
    assert "104000 cpu per pod" in reason["message"]
    await assert_waits_without_quota(api, namespace, "large")


async def test_a_job_requiring_the_host_level_is_admitted(
        api: Kube, namespace: str, queue: str, kubeconfig: Path) -> None:
    """Every node is a host domain whether the Topology lists the level or not (this one does
    not); the webhook has always said so, and the controller agrees instead of leaving the
    Job suspended without a Workload."""
    await apply_all(api, JobWrapper("per-host", namespace).queue(queue).gpus(4)
                    .required(HOSTNAME_LABEL).obj())
    async with in_process_controller(kubeconfig):
        [node] = await eventually(lambda: bound_nodes(api, namespace, "per-host"),
                                  "the Job admitted and its pod bound", timeout=45)
    wl = await workload_of(api, namespace, "per-host")
    assert wl is not None and wl["spec"]["topology"] == {"required": HOSTNAME_LABEL}
    assert wl["status"]["admission"]["topologyDomain"][HOSTNAME_LABEL] == node


@pytest.mark.parametrize(("kind", "level"), [
    (kind, level) for kind in ("required", "preferred")
    for level in (BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL)])
async def test_each_kind_of_topology_annotation_is_accepted_then_admitted(
        api: Kube, namespace: str, queue: str, kubeconfig: Path, kind: str, level: str) -> None:
    """A 2-pod Job with each topology annotation the webhook accepts is admitted by the
    controller, not left suspended: what the webhook takes, the controller can place. A
    required level puts both pods in one domain of it, as the Workload's admission says."""
    job = JobWrapper("shaped", namespace).queue(queue).pods(2).gpus(4)
    await apply_all(api, getattr(job, kind)(level).obj())
    async with in_process_controller(kubeconfig):
        bound = await eventually(lambda: bound_nodes(api, namespace, "shaped"),
                                 "the Job admitted and both pods bound", timeout=45)
    wl = await workload_of(api, namespace, "shaped")
    assert wl is not None and wl["spec"]["topology"] == {kind: level}
    if kind == "required":
        labels = await node_labels(api)
        domain = wl["status"]["admission"]["topologyDomain"][level]
        assert {labels[node][level] for node in bound} == {domain}
