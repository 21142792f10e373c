"""The controller against the real control plane: Jobs wait suspended until admitted, start
inside the hinted domain, gangs never start partially, reclaim respects min runtime, and a
SIGKILLed controller leaves nothing double-admitted or uncounted."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from admitter_world import (
    ControllerProcess,
    apply_all,
    in_process_controller,
    jobs,
    pods,
    running,
    workloads,
)
from operator_runs import holds_what_it_is_charged

from admitter.api.workload import CONDITION_EVICTED, CONDITION_QUOTA_RESERVED
from admitter.controller.status import USAGE_WRITE_PERIOD
from admitter.core.decisions import EvictionReason, PendingReason
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import parse_time
from admitter.testing import BLOCK_LABEL, HOSTNAME_LABEL, RACK_LABEL, LocalCluster
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, cluster_queue, leaf_queue

RECLAIMED = EvictionReason.RECLAIMED.value

pytestmark = pytest.mark.integration
TOPOLOGY = f"""
apiVersion: admitter.dev/v1alpha1
kind: Topology
metadata: {{name: default}}
spec:
  levels:
  - {{nodeLabel: {BLOCK_LABEL}}}
  - {{nodeLabel: {RACK_LABEL}}}
  - {{nodeLabel: {HOSTNAME_LABEL}}}
"""


@pytest.fixture(scope="session", autouse=True)
def topology(local_cluster: LocalCluster, admitter_crds: None) -> None:
    """The local cluster's levels, as a platform team would declare them."""
    local_cluster.kubectl("apply", "-f", "-", input=TOPOLOGY)


@pytest.fixture
async def queues(api: Kube, namespace: str) -> AsyncIterator[tuple[str, str]]:
    """Two teams under one root, 32 GPUs of quota each; yields their LocalQueue names."""
    root = f"org-{secrets.token_hex(3)}"
    team_a, team_b = f"{root}-a", f"{root}-b"
    await apply_all(api, cluster_queue(root, 64),
                    *leaf_queue(team_a, 32, parent=root, namespace=namespace, local_name="team-a"),
                    *leaf_queue(team_b, 32, parent=root, namespace=namespace, local_name="team-b"))
    yield "team-a", "team-b"
    for job in (await jobs(api, namespace)).values():
        await api.request("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/"
                          f"{job['metadata']['name']}", {"propagationPolicy": "Background"})

    async def no_pods() -> bool:
        return not await pods(api, namespace)

    await eventually(no_pods, "the test's pods to be gone", timeout=60)


async def _node_labels(api: Kube) -> dict[str, dict[str, str]]:
    listed = await api.request("GET", "/api/v1/nodes")
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in listed["items"]}


async def test_job_starts_only_after_admission_inside_the_hinted_rack(
        api: Kube, namespace: str, queues: tuple[str, str], kubeconfig: Path) -> None:
    team_a, _ = queues
    await apply_all(api, JobWrapper("train", namespace).queue(team_a).pods(2)
                    .required(RACK_LABEL).obj())
    await asyncio.sleep(2)
    assert not await pods(api, namespace, "train"), "a suspended Job must not create pods"
    async with in_process_controller(kubeconfig):
        async def admitted_and_bound() -> list | None:
            placed = [p for p in await pods(api, namespace, "train") if p["spec"].get("nodeName")]
            return placed if len(placed) == 2 else None

        placed = await eventually(admitted_and_bound, "both pods bound", timeout=45)
        job = await api.get(kube.JOBS, "train", namespace)
        assert await holds_what_it_is_charged(api, job, "the Job") == 2 * 8  # JobWrapper's
    [wl] = await workloads(api, namespace)
    domain = wl["status"]["admission"]["topologyDomain"]
    labels = await _node_labels(api)
    racks = {labels[p["spec"]["nodeName"]][RACK_LABEL] for p in placed}
    assert racks == {domain[RACK_LABEL]}
    assert {labels[p["spec"]["nodeName"]][BLOCK_LABEL] for p in placed} == {domain[BLOCK_LABEL]}


async def test_gang_waits_without_pods_while_small_jobs_run(
        api: Kube, namespace: str, queues: tuple[str, str], kubeconfig: Path) -> None:
    team_a, team_b = queues
    # Five single-GPU-node jobs pinned to hosts fill block-0 and one node of block-1; the
    # block-0 ones finish first.
    fillers = [JobWrapper(f"fill-{i}", namespace).queue(team_b).required(HOSTNAME_LABEL)
               .runtime("20s" if i < 4 else "600s").obj() for i in range(5)]
    await apply_all(api, *fillers)
    async with in_process_controller(kubeconfig):
        async def fillers_running() -> bool:
            return sum(running(j) for j in (await jobs(api, namespace)).values()) == 5

        await eventually(fillers_running, "the fillers to run", timeout=45)
        await apply_all(api, JobWrapper("gang", namespace).queue(team_a).pods(4)
                        .required(BLOCK_LABEL).obj(),
                        JobWrapper("small", namespace).pods(1).queue(team_a).obj())

        async def small_running() -> bool:
            return running((await jobs(api, namespace))["small"])

        await eventually(small_running, "the small job to run while the gang waits", timeout=30)
        assert not await pods(api, namespace, "gang"), "a gang that does not fit has no pods"

        async def gang_explained() -> dict | None:
            gang = next(w for w in await workloads(api, namespace)
                        if w["spec"]["podSets"][0]["count"] == 4)
            return next((c for c in (gang.get("status") or {}).get("conditions", [])
                         if c["type"] == CONDITION_QUOTA_RESERVED and c["status"] == "False"), None)

        reserved = await eventually(gang_explained, "why the gang waits (once it waited 5 s)",
                                    timeout=30)
        # NoFit, or ProtectedVictims naming the fillers whose min runtime holds the block
        assert reserved["reason"] in (PendingReason.QUOTA_EXCEEDED, PendingReason.NO_FIT,
                                      PendingReason.PROTECTED_VICTIMS)
        assert "nvidia.com/gpu" in reserved["message"]

        async def gang_bound() -> bool:
            bound = [p for p in await pods(api, namespace, "gang") if p["spec"].get("nodeName")]
            return len(bound) == 4

        await eventually(gang_bound, "the gang to start once a block frees up", timeout=60)


async def test_reclaim_waits_for_min_runtime_and_requeues_the_victim(
        api: Kube, namespace: str, queues: tuple[str, str], kubeconfig: Path) -> None:
    team_a, team_b = queues
    protected = JobWrapper("b-protected", namespace).min_runtime("10m").queue(team_b).obj()
    # 7 of the 8 nodes: long starts leave 2 % of the 64 GPUs (1) for short jobs, which keeps
    # the eighth node out of reach of whole-node jobs
    borrowers = [JobWrapper(f"b-{i}", namespace).min_runtime("3s").queue(team_b).obj()
                 for i in range(6)]
    await apply_all(api, protected)
    async with in_process_controller(kubeconfig):
        async def protected_running() -> bool:
            return running((await jobs(api, namespace))["b-protected"])

        await eventually(protected_running, "the protected job to run", timeout=30)
        await apply_all(api, *borrowers)

        async def all_b_running() -> bool:
            return sum(running(j) for j in (await jobs(api, namespace)).values()) == 7

        await eventually(all_b_running, "team b to take all it may", timeout=45)
        await apply_all(api, JobWrapper("a-train", namespace).pods(2).runtime("10s")
                        .min_runtime("1m").queue(team_a).obj())

        async def a_running() -> bool:
            return running((await jobs(api, namespace))["a-train"])

        await eventually(a_running, "team a to reclaim its quota", timeout=45)
        current = await jobs(api, namespace)
        assert running(current["b-protected"]), "a job inside its min runtime is never touched"
        # a-train takes the idle eighth node and one borrower's: the five borrowers left, past
        # their min runtime, are room a short job could have at once
        evicted = [w for w in await workloads(api, namespace)
                   if (w.get("status") or {}).get("evictionCount")]
        assert len(evicted) == 1
        assert all(any(c["type"] == CONDITION_EVICTED and c["reason"] == RECLAIMED
                       for c in w["status"]["conditions"]) for w in evicted)

        async def victims_back() -> bool:
            return sum(running(j) for n, j in (await jobs(api, namespace)).items()
                       if n.startswith("b-")) == 7

        await eventually(victims_back, "the reclaimed jobs to run again after a-train", 60)


async def test_sigkill_mid_burst_leaves_quota_exactly_accounted(
        api: Kube, namespace: str, queues: tuple[str, str], kubeconfig: Path,
        tmp_path: Path) -> None:
    """The replacement takes over through the Lease, as the 2-replica Deployment does: it
    waits out the dead leader's lease, so writes the dead process left in flight (a loaded
    API server may apply them seconds after the kill) land before it decides anything."""
    team_a, _ = queues
    # Runs outlast the test: a run finishing (300 s by default) would rightly free room for
    # more admissions, and a loaded machine can take that long to settle.
    burst = [JobWrapper(f"burst-{i:02d}", namespace).gpus(2).queue(team_a).runtime("2h").obj()
             for i in range(40)]
    election = ("--leader-elect", "--lease-namespace", namespace, "--lease-name", "sigkill")
    first = ControllerProcess(kubeconfig, tmp_path / "first.log", *election)
    try:
        await apply_all(api, *burst)

        async def some_admitted() -> bool:
            admitted = [w for w in await workloads(api, namespace)
                        if (w.get("status") or {}).get("admission")]
            return len(admitted) >= 3

        await eventually(some_admitted, "admissions to begin", timeout=45)
    finally:
        first.kill()
    second = ControllerProcess(kubeconfig, tmp_path / "second.log", *election)
    seen: dict[str, object] = {}
    try:
        async def settled() -> bool:
            current = await jobs(api, namespace)
            listed = await workloads(api, namespace)
            admitted = {w["metadata"]["ownerReferences"][0]["name"] for w in listed
                        if (w.get("status") or {}).get("admission")}
            unsuspended = {n for n, j in current.items() if not j["spec"].get("suspend")}
            seen.update(workloads=len(listed), admitted=len(admitted),
                        unsuspended=len(unsuspended), differ=sorted(admitted ^ unsuspended)[:6])
            # 31 of the 2-GPU Jobs: long starts leave the short jobs' room, one GPU (2 % of
            # 64; no short job ran); the 32nd would take it and use only one GPU beyond it, no
            # more than the room keeps
            return len(listed) == 40 and admitted == unsuspended and len(admitted) == 31

        try:
            await eventually(settled, "every admitted Workload's Job, and only those, "
                             "running (team a may borrow the cluster's 64 GPUs less the headroom)",
                             timeout=240)
        except TimeoutError as error:
            raise AssertionError(f"{error}; last seen: {seen}") from error
    finally:
        second.kill()
    for name in (j["metadata"]["name"] for j in burst):
        created = await pods(api, namespace, name)
        assert len(created) <= 1, f"{name} was started twice ({len(created)} pods)"


async def test_usage_charged_by_one_controller_is_carried_on_by_the_next(
        api: Kube, namespace: str, queues: tuple[str, str], kubeconfig: Path) -> None:
    """A ClusterQueue's usage is the running Job's GPUs times the time since its admission,
    to the second, in every status write: under the controller that admitted it, and under a
    new one that restores the hours from status and charges the time no controller ran."""
    team_a, _ = queues
    local = await api.request("GET", f"/apis/admitter.dev/v1alpha1/namespaces/{namespace}/"
                              f"localqueues/{team_a}")
    cluster_queue_name = local["spec"]["clusterQueue"]
    await apply_all(api, JobWrapper("train", namespace).gpus(8).runtime("1h").queue(team_a).obj())

    async def charged(after: float) -> tuple[float, float] | None:
        """(seconds charged, seconds since admission) once a write is later than `after`."""
        cq = await api.request("GET", "/apis/admitter.dev/v1alpha1/clusterqueues/"
                               f"{cluster_queue_name}")
        status = cq.get("status") or {}
        accounted = parse_time(status.get("usageAccountedAt"))
        listed = await workloads(api, namespace)
        admission = ((listed[0].get("status") or {}).get("admission") or {}) if listed else {}
        admitted = parse_time(admission.get("admittedAt"))
        if accounted is None or admitted is None or accounted <= max(after, admitted):
            return None
        return sum(b["gpuSeconds"] for b in status.get("usage", [])), accounted - admitted

    async with in_process_controller(kubeconfig):
        # The write that records the admission may carry the admission's own second; the next
        # comes when the usage alone has moved for USAGE_WRITE_PERIOD.
        used, ran = await eventually(lambda: charged(0.0), "a usage write after the admission",
                                     timeout=USAGE_WRITE_PERIOD + 45)
        assert used == 8 * ran
    stopped = time.time()
    await asyncio.sleep(2)  # no controller: the Job runs on, and its time is owed
    async with in_process_controller(kubeconfig):
        used, ran = await eventually(lambda: charged(stopped), "the new controller's write",
                                     timeout=45)
        assert used == 8 * ran and ran > 2
