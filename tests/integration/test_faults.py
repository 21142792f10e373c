"""Fault injection on the real control plane: two `admitter run` replicas elect a leader
while a burst of Jobs churns through a queue, and the control plane fails under them. Each
replica reaches the API server through its own relay, so the leader's path alone can be cut.

Faults, one after another: SIGKILL the leader (a new replica replaces it, as the Deployment
would), SIGSTOP the API server, restart it, restart etcd on its data directory, cut the
leader's path. During and after each, the invariants hold: no Job running without an
admitted Workload, neither the queue nor any node over-committed, no Job started twice,
every Job admitted or explained, and no replica exited on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from admitter_world import ControllerProcess, apply_all, jobs, running, workloads
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.quantity import kube_base_units
from admitter.api.workload import CONDITION_QUOTA_RESERVED
from admitter.controller import kube
from admitter.controller.kube import Kube, Obj
from admitter.controller.translate import TERMINAL_POD_PHASES, condition, is_true
from admitter.testing import GPU_RESOURCE, LocalCluster
from admitter.testing.partition import PartitionableRelay
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration
LEASE_SECONDS = 6
QUEUE_GPUS = 32
NODE_GPUS = 8
BURST = 24
"""Jobs of one 4-GPU pod, 20 to 40 s each: eight run at once, and the queue churns through
the whole test."""


class Replicas:
    """The controller replicas, each behind its own relay to the API server."""

    def __init__(self, cluster: LocalCluster, namespace: str, logs: Path) -> None:
        self.cluster, self.namespace, self.logs = cluster, namespace, logs
        self.processes: dict[str, ControllerProcess] = {}
        self.relays: dict[str, PartitionableRelay] = {}
        self.killed: set[str] = set()

    def start(self, identity: str) -> None:
        relay = self.relays[identity] = PartitionableRelay(self.cluster.api_port).start()
        config = relay.kubeconfig(self.cluster.kubeconfig_path, self.logs / f"{identity}.kcfg")
        self.processes[identity] = ControllerProcess(
            config, self.logs / f"{identity}.log", "--leader-elect", "--identity", identity,
            "--lease-namespace", self.namespace, "--lease-name", "faults",
            "--lease-duration", str(LEASE_SECONDS))

    def kill(self, identity: str) -> None:
        self.processes[identity].kill()
        self.killed.add(identity)

    def exited(self) -> list[str]:
        return [name for name, process in self.processes.items()
                if name not in self.killed and not process.alive()]

    def stop(self) -> None:
        for process in self.processes.values():
            process.kill()
        for relay in self.relays.values():
            relay.close()


@pytest.fixture
async def replicas(api: Kube, namespace: str, local_cluster: LocalCluster,
                   tmp_path: Path) -> AsyncIterator[Replicas]:
    name = f"faults-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, QUEUE_GPUS, limit=QUEUE_GPUS, namespace=namespace))
    started = Replicas(local_cluster, namespace, tmp_path)
    with _restored(local_cluster):
        try:
            for identity in ("replica-0", "replica-1"):
                started.start(identity)
            yield started
        finally:
            started.stop()


@contextlib.contextmanager
def _restored(cluster: LocalCluster) -> Iterator[None]:
    """Whatever a failed test left paused runs again: the session's later tests need it."""
    try:
        yield
    finally:
        for name in ("etcd", "kube-apiserver"):
            cluster.resume(name)


async def leader(api: Kube, namespace: str) -> str | None:
    try:
        lease = await api.get(kube.LEASES, "faults", namespace)
    except ApiException as error:
        if kube.is_not_found(error):
            return None  # no replica took it yet
        raise
    holder: str | None = (lease.get("spec") or {}).get("holderIdentity")
    return holder


def _gpus(pod_set: Obj) -> int:
    return int(pod_set["count"]) * kube_base_units(
        GPU_RESOURCE, (pod_set.get("requests") or {}).get(GPU_RESOURCE, 0))


def _owner_uid(wl: Obj) -> str | None:
    return next((o.get("uid") for o in wl["metadata"].get("ownerReferences", [])), None)


async def safety_problems(api: Kube, namespace: str) -> list[str]:
    """The invariants that must hold at every moment. Jobs are listed between two lists of
    Workloads: a Job started after the first list was admitted before the second, one being
    evicted was still admitted in the first."""
    before = await workloads(api, namespace)
    current = await jobs(api, namespace)
    after = await workloads(api, namespace)
    every_pod = (await api.list(kube.PODS))["items"]
    problems = []
    admitted = {_owner_uid(w) for w in before + after
                if (w.get("status") or {}).get("admission")}
    for name, job in current.items():
        if running(job) and not is_true(job, "Complete") and job["metadata"][
                "uid"] not in admitted:
            problems.append(f"Job {name} runs without an admitted Workload")
    for listed in (before, after):
        held = sum(_gpus(p) for w in listed if (w.get("status") or {}).get("admission")
                   for p in w["spec"]["podSets"])
        if held > QUEUE_GPUS:
            problems.append(f"the queue holds {held} GPUs of {QUEUE_GPUS}")
    per_node: dict[str, int] = {}
    for pod in every_pod:
        node = pod["spec"].get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES:
            requests = [c.get("resources", {}).get("limits", {}).get(GPU_RESOURCE, 0)
                        for c in pod["spec"]["containers"]]
            per_node[node] = per_node.get(node, 0) + sum(
                kube_base_units(GPU_RESOURCE, r) for r in requests)
    problems += [f"node {n} runs {g} GPUs of {NODE_GPUS}" for n, g in per_node.items()
                 if g > NODE_GPUS]
    evictions = {_owner_uid(w): int((w.get("status") or {}).get("evictionCount", 0))
                 for w in after}
    ours = [p for p in every_pod if p["metadata"]["namespace"] == namespace]
    for name, job in current.items():
        created = [p for p in ours if p["metadata"].get("labels", {}).get(
            "batch.kubernetes.io/job-name") == name]
        allowed = 1 + evictions.get(job["metadata"]["uid"], 0)
        if len(created) > allowed:
            problems.append(f"Job {name} started {len(created)} times ({allowed} allowed)")
    return problems


async def settled(api: Kube, namespace: str, live: Replicas) -> bool:
    """A leader holds the Lease, and every Job is finished, admitted, or explained (its
    Workload says why it waits); checks the safety invariants on the way."""
    problems = await safety_problems(api, namespace)
    assert not problems, problems
    assert not live.exited(), f"replicas exited: {live.exited()}"
    holder = await leader(api, namespace)
    if holder is None or holder in live.killed:
        return False
    listed = {_owner_uid(w): w for w in await workloads(api, namespace)}
    for job in (await jobs(api, namespace)).values():
        wl = listed.get(job["metadata"]["uid"])
        if is_true(job, "Complete"):
            continue
        if wl is None:
            return False
        reserved = condition(wl, CONDITION_QUOTA_RESERVED) or {}
        explained = reserved.get("status") == "False" and reserved.get("message")
        if not ((wl.get("status") or {}).get("admission") or explained):
            return False
    return True


async def during(seconds: float, api: Kube, namespace: str) -> None:
    """Check the safety invariants for `seconds` while a fault lasts (the API server
    answering or not)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        with contextlib.suppress(*kube.CONNECTION_ERRORS):
            problems = await asyncio.wait_for(safety_problems(api, namespace), timeout=5)
            assert not problems, problems
        await asyncio.sleep(0.5)


async def test_faults_never_over_commit_or_end_a_replica(
        api: Kube, namespace: str, local_cluster: LocalCluster, replicas: Replicas) -> None:
    burst = [JobWrapper(f"burst-{i:02d}", namespace).gpus(4).runtime(f"{20 + i % 3 * 10}s").obj()
             for i in range(BURST)]
    await apply_all(api, *burst)

    async def recovered(after: str) -> None:
        await eventually(lambda: settled(api, namespace, replicas),
                         f"every Job admitted or explained after: {after}", timeout=45)

    await recovered("the start")

    async def kill_leader() -> None:
        holder = await leader(api, namespace)
        assert holder is not None
        replicas.kill(holder)
        replicas.start("replica-2")  # the Deployment replaces the pod
        await during(LEASE_SECONDS + 2, api, namespace)

    async def stop_api_server() -> None:
        local_cluster.pause("kube-apiserver")
        await asyncio.sleep(LEASE_SECONDS)
        local_cluster.resume("kube-apiserver")

    async def restart_api_server() -> None:
        local_cluster.restart("kube-apiserver")

    async def restart_etcd() -> None:
        local_cluster.restart("etcd")

    async def cut_the_leaders_path() -> None:
        holder = await leader(api, namespace)
        assert holder is not None
        replicas.relays[holder].cut()
        try:
            async def taken_over() -> bool:
                return await leader(api, namespace) not in (None, holder)

            await eventually(taken_over, "another replica to take the Lease", timeout=30)
            await during(2, api, namespace)
        finally:
            replicas.relays[holder].heal()

    faults: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        ("SIGKILL of the leader", kill_leader),
        ("SIGSTOP of the API server", stop_api_server),
        ("a restart of the API server", restart_api_server),
        ("a restart of etcd on its data directory", restart_etcd),
        ("a cut of the leader's path to the API server", cut_the_leaders_path),
    ]
    for name, inject in faults:
        await inject()
        await recovered(name)

    async def went_on() -> bool:
        """More Jobs were admitted than the queue holds at once: a finished Job's GPUs went
        to the next. Waited for, not sampled: KWOK, which ends the pods, stalls through the
        faults too, so how many Jobs finished while they lasted is chance."""
        problems = await safety_problems(api, namespace)
        assert not problems, problems
        done = sum(is_true(j, "Complete") for j in (await jobs(api, namespace)).values())
        admitted = [w for w in await workloads(api, namespace)
                    if (w.get("status") or {}).get("admission")]
        return done >= 1 and done + len(admitted) > QUEUE_GPUS // 4

    await eventually(went_on, "admission to go on after the faults", timeout=90)
