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
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from admitter_world import apply_all, jobs, workloads
from fault_world import Replicas, during, leader, owner_uid, safety_problems, two_replicas

from admitter.api.workload import CONDITION_QUOTA_RESERVED
from admitter.kube.client import Kube
from admitter.kube.objects import condition, is_true
from admitter.testing import LocalCluster
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration
LEASE_SECONDS = 6
QUEUE_GPUS = 32
BURST = 24
"""Jobs of one 4-GPU pod, 20 to 40 s each: eight run at once, and the queue churns through
the whole test."""


@pytest.fixture
async def replicas(api: Kube, namespace: str, local_cluster: LocalCluster,
                   tmp_path: Path) -> AsyncIterator[Replicas]:
    name = f"faults-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, QUEUE_GPUS, limit=QUEUE_GPUS, namespace=namespace))
    async with two_replicas(api, local_cluster, namespace, tmp_path, LEASE_SECONDS) as started:
        yield started


async def safety_checked(api: Kube, namespace: str) -> None:
    problems = await safety_problems(api, namespace, {"": QUEUE_GPUS})
    assert not problems, problems


async def settled(api: Kube, namespace: str, live: Replicas) -> bool:
    """A leader holds the Lease, and every Job is finished, admitted, or explained (its
    Workload says why it waits); checks the safety invariants on the way."""
    await safety_checked(api, namespace)
    assert not live.exited(), f"replicas exited: {live.exited()}"
    holder = await leader(api, namespace)
    if holder is None or holder in live.killed:
        return False
    listed = {owner_uid(w): w for w in await workloads(api, namespace)}
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
        await during(LEASE_SECONDS + 2, lambda: safety_checked(api, namespace))

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
            await during(2, lambda: safety_checked(api, namespace))
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
        await safety_checked(api, namespace)
        done = sum(is_true(j, "Complete") for j in (await jobs(api, namespace)).values())
        admitted = [w for w in await workloads(api, namespace)
                    if (w.get("status") or {}).get("admission")]
        return done >= 1 and done + len(admitted) > QUEUE_GPUS // 4

    await eventually(went_on, "admission to go on after the faults", timeout=90)
