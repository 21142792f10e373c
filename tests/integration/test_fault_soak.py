"""A fault soak: two `admitter run` replicas admit the Jobs of two teams under one parent queue
while a submitter keeps adding 4-8-GPU Jobs that finish within a minute (a third of them
requeued for the other team's turn once past a 5 s min runtime), and seven faults
strike in an order drawn from a printed seed: the leader SIGKILLed three times, the API
server stopped for 20 s, etcd killed and relaunched on its data directory, the API server
restarted, the leader frozen for 25 s and continued.

Every second, during and after each fault, the invariants hold: the GPUs admitted (the pods
of every Workload holding an admission, less those that succeeded) fit in the GPUs the nodes
can schedule, every queue stays within its limit, no Job runs without an admitted Workload,
no Job starts more often than it was admitted. The queues allow more than the cluster holds,
so the nodes bind.

One seed runs by default; `--soak` runs SOAK_SEEDS seeds, `--soak-seed N` the seed N.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from admitter_world import apply_all, jobs, workloads
from fault_world import (
    JOB_NAME_LABEL,
    Replicas,
    holds_admission,
    leader,
    pod_gpus,
    pod_set_gpus,
    safety_problems,
    two_replicas,
)
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.quantity import kube_base_units
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import TERMINAL_POD_PHASES, is_true
from admitter.testing import GPU_RESOURCE, LocalCluster
from admitter.testing.processes import signal_group
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, cluster_queue, leaf_queue

pytestmark = pytest.mark.integration
LEASE_SECONDS = 8
SOAK_SEEDS = 20
BACKLOG = 24
"""Unfinished Jobs the submitter keeps: enough to fill the cluster and keep a queue."""
SWAPPABLE_AFTER = "5s"
"""The min runtime of the Jobs that may be requeued for the other team."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "seed" in metafunc.fixturenames:
        seeds = metafunc.config.getoption("--soak-seed") or (
            list(range(1, SOAK_SEEDS + 1)) if metafunc.config.getoption("--soak")
            else [secrets.randbelow(10_000)])
        metafunc.parametrize("seed", seeds)


@dataclass
class Watch:
    """What the every-second check saw: problems, the most GPUs admitted at once, and
    the Workloads that held an admission (progress)."""

    capacity: int = 0
    phase: str = "the start"
    """The fault under way (or the last one), named in each problem found."""
    most: int = 0
    problems: list[str] = field(default_factory=list)
    admitted: set[str] = field(default_factory=set)
    holders: list[str] = field(default_factory=list)
    """The Workloads holding an admission at the last check, for a problem's message."""
    evictions: dict[str, int] = field(default_factory=dict)
    """Evictions per Workload uid, as last seen."""


async def schedulable_gpus(api: Kube, namespace: str) -> int:
    """GPUs the nodes can run for this test: allocatable, less other namespaces' pods."""
    nodes = (await api.list(kube.NODES))["items"]
    free = {n["metadata"]["name"]: kube_base_units(GPU_RESOURCE, (n.get("status") or {}).get(
        "allocatable", {}).get(GPU_RESOURCE, 0)) for n in nodes
        if not n["spec"].get("unschedulable")}
    for pod in (await api.list(kube.PODS))["items"]:
        node = pod["spec"].get("nodeName")
        if (node in free and pod["metadata"]["namespace"] != namespace
                and (pod.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES):
            free[node] -= pod_gpus(pod)
    return sum(max(0, gpus) for gpus in free.values())


async def admitted_gpus(api: Kube, namespace: str, watch: Watch) -> int:
    """GPUs of the Workloads holding an admission, less their pods that succeeded."""
    listed = await workloads(api, namespace)
    succeeded: dict[str, int] = {}
    pods_of: dict[str, list[str]] = {}
    for pod in (await api.list(kube.PODS, {"labelSelector": JOB_NAME_LABEL}))["items"]:
        if pod["metadata"]["namespace"] != namespace:
            continue
        owner = pod["metadata"]["labels"][JOB_NAME_LABEL]
        phase = (pod.get("status") or {}).get("phase")
        gone = " deleting" if pod["metadata"].get("deletionTimestamp") else ""
        pods_of.setdefault(owner, []).append(f"{pod['spec'].get('nodeName')}:{phase}{gone}")
        if phase == "Succeeded":
            succeeded[owner] = succeeded.get(owner, 0) + pod_gpus(pod)
    held = 0
    watch.holders = []
    for wl in listed:
        evicted = int((wl.get("status") or {}).get("evictionCount", 0))
        if evicted:
            watch.evictions[wl["metadata"]["uid"]] = evicted
        if holds_admission(wl):
            watch.admitted.add(wl["metadata"]["uid"])
            job = next((o["name"] for o in wl["metadata"].get("ownerReferences", [])), "")
            gpus = sum(pod_set_gpus(p) for p in wl["spec"]["podSets"]) - succeeded.get(job, 0)
            held += gpus
            admission = wl["status"]["admission"]
            hints = ",".join(f"{h['node']}x{h['count']}" for h in admission.get("nodeHints", []))
            watch.holders.append(f"{wl['metadata']['name']} {gpus} GPUs on {hints} at "
                                 f"{admission.get('admittedAt')} by "
                                 f"{(admission.get('admittedBy') or {}).get('holder')}, "
                                 f"pods [{' '.join(pods_of.get(job, []))}]")
    return held


async def check_every_second(api: Kube, namespace: str, limits: dict[str, int],
                             watch: Watch) -> None:
    """The invariants, every second until cancelled; a check the control plane does not
    answer (stopped, restarting) is skipped."""
    while True:
        with contextlib.suppress(ApiException, TimeoutError, *kube.CONNECTION_ERRORS):
            async with asyncio.timeout(10):
                problems = await safety_problems(api, namespace, limits)
                held = await admitted_gpus(api, namespace, watch)
                watch.most = max(watch.most, held)
                if held > watch.capacity:
                    problems.append(f"{held} GPUs admitted, {watch.capacity} schedulable: "
                                    + "; ".join(watch.holders))
                moment = time.strftime("%H:%M:%S")
                watch.problems += [f"{moment} during {watch.phase}: {p}" for p in problems]
        await asyncio.sleep(1.0)


async def submit(api: Kube, namespace: str, teams: tuple[str, str], rng: random.Random) -> None:
    """Keep BACKLOG unfinished Jobs of 4 to 8 GPUs, each running 5 to 60 s, until cancelled.
    A third are resumable and protected for SWAPPABLE_AFTER only, so the teams' turns
    (time-slicing) requeue running work while the faults strike."""
    count = 0
    while True:
        with contextlib.suppress(ApiException, TimeoutError, *kube.CONNECTION_ERRORS):
            current = await jobs(api, namespace)
            missing = BACKLOG - sum(not is_true(j, "Complete") for j in current.values())
            for _ in range(max(0, missing)):
                job = (JobWrapper(f"job-{count:04d}", namespace).queue(rng.choice(teams))
                       .gpus(rng.choice((4, 6, 8))).runtime(f"{rng.randint(5, 60)}s"))
                if rng.random() < 1 / 3:
                    job = job.min_runtime(SWAPPABLE_AFTER).resumable()
                count += 1
                await api.create(kube.JOBS, job.obj())
        await asyncio.sleep(1.0)


@pytest.fixture
async def cluster_queues(api: Kube, namespace: str) -> AsyncIterator[dict[str, int]]:
    """A parent queue over two teams, each allowed 3/4 of the cluster and the parent twice
    the cluster: the nodes, not the quota, bound what runs. Yields each queue's limit ("" for
    the whole namespace); deletes the Jobs afterwards and waits for their pods to go (the
    session's later tests need the GPUs)."""
    capacity = await schedulable_gpus(api, namespace)
    root = f"soak-{secrets.token_hex(3)}"
    team = capacity * 3 // 4
    await apply_all(api, cluster_queue(root, 2 * capacity),
                    *leaf_queue(f"{root}-a", team // 2, limit=team, parent=root,
                                namespace=namespace, local_name="team-a"),
                    *leaf_queue(f"{root}-b", team // 2, limit=team, parent=root,
                                namespace=namespace, local_name="team-b"))
    yield {"": 2 * capacity, f"{root}-a": team, f"{root}-b": team}
    for name in await jobs(api, namespace):
        with contextlib.suppress(ApiException):
            await api.delete(kube.JOBS, name, namespace, {"propagationPolicy": "Background"})

    async def no_pods() -> bool:
        listed = await api.list(kube.PODS, {"labelSelector": JOB_NAME_LABEL})
        return not [p for p in listed["items"] if p["metadata"]["namespace"] == namespace]

    await eventually(no_pods, "the soak's pods to be gone", timeout=120)


@pytest.fixture
async def soak_replicas(api: Kube, namespace: str, local_cluster: LocalCluster,
                        tmp_path: Path) -> AsyncIterator[Replicas]:
    async with two_replicas(api, local_cluster, namespace, tmp_path, LEASE_SECONDS) as started:
        yield started


async def test_faults_under_churn_never_admit_more_than_the_cluster_holds(
        api: Kube, namespace: str, local_cluster: LocalCluster, seed: int,
        cluster_queues: dict[str, int], soak_replicas: Replicas) -> None:
    rng = random.Random(seed)
    live = soak_replicas
    watch = Watch(capacity=await schedulable_gpus(api, namespace))
    spares = iter(range(2, 100))

    async def holder() -> str:
        async def alive() -> str | None:
            found = await leader(api, namespace)
            return found if found is not None and found not in live.killed else None

        return await eventually(alive, "a live replica to hold the Lease", timeout=120)

    async def kill_leader() -> None:
        live.kill(await holder())
        live.start(f"replica-{next(spares)}")  # the Deployment replaces the pod

    async def stop_api_server() -> None:
        local_cluster.pause("kube-apiserver")
        await asyncio.sleep(20)
        local_cluster.resume("kube-apiserver")

    async def kill_etcd() -> None:
        signal_group(local_cluster.component("etcd").pid, signal.SIGKILL)
        local_cluster.restart("etcd")

    async def restart_api_server() -> None:
        local_cluster.restart("kube-apiserver")

    async def freeze_leader() -> None:
        frozen = await holder()
        live.freeze(frozen, True)
        try:
            await asyncio.sleep(25)
        finally:
            live.freeze(frozen, False)

    faults: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        *[("SIGKILL of the leader", kill_leader)] * 3,
        ("SIGSTOP of kube-apiserver for 20 s", stop_api_server),
        ("etcd killed and relaunched on its data directory", kill_etcd),
        ("a restart of kube-apiserver", restart_api_server),
        ("the leader frozen for 25 s", freeze_leader),
    ]
    rng.shuffle(faults)
    print(f"\nfault soak seed {seed}: " + "; ".join(name for name, _ in faults))

    def checked(after: str) -> None:
        assert not watch.problems, f"after {after}: {watch.problems[:5]}"
        assert not live.exited(), f"replicas exited after {after}: {live.exited()}"

    async def progressed(after: str) -> None:
        """A live leader, and a Workload admitted that was not before."""
        before = set(watch.admitted)

        async def admitted_anew() -> bool:
            checked(after)
            await holder()
            return bool(watch.admitted - before)

        await eventually(admitted_anew, f"a new admission after {after}", timeout=180)

    teams = ("team-a", "team-b")
    checker = asyncio.create_task(check_every_second(api, namespace, cluster_queues, watch))
    submitter = asyncio.create_task(submit(api, namespace, teams, rng))
    try:
        await progressed("the start")
        for name, inject in faults:
            watch.phase = name
            await inject()
            await progressed(name)
        await asyncio.sleep(10)  # after the last fault, as after the others
        checked("the last fault")
    finally:
        for task in (submitter, checker):
            task.cancel()
        await asyncio.gather(submitter, checker, return_exceptions=True)
        print(f"fault soak seed {seed}: most GPUs admitted {watch.most} of {watch.capacity}, "
              f"{len(watch.admitted)} admissions, {sum(watch.evictions.values())} evictions, "
              f"{'FAIL ' + str(watch.problems[:3]) if watch.problems else 'pass'}")
    assert watch.admitted, "nothing was admitted"
