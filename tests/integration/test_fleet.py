"""A fleet on three real control planes: the session's is the manager, `west` (2 nodes of 8
GPUs) and `east` (4 nodes of 8 GPUs) are workers, each with KWOK GPU nodes, its Job controller
and kube-scheduler (and in east only, JobSet's controller and KubeRay's operator). Jobs,
JobSets and RayJobs are submitted to the manager; the manager's controller places each whole in
one worker and creates one copy there."""

# ruff: noqa: F401, F811 (fleet_world's fixtures are imported, then named as parameters)
from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator

import pytest
import yaml
from admitter_world import (
    ControllerProcess,
    apply_all,
    in_process_controller,
    priority_class,
    workloads,
)
from fleet_world import (
    WORKERS,
    admitted_gpus,
    fleet,
    fleet_namespace,
    job_copies,
    over_capacity,
    pods_on,
    reachable,
    secret,
    team,
    worker_cluster,
    workers,
)
from teams_world import event_on

from admitter.api.contract import MIN_RUNTIME_ANNOTATION, QUEUE_LABEL
from admitter.api.workercluster import CONDITION_KINDS_SERVED, CONDITION_REACHABLE
from admitter.api.workload import (
    CONDITION_EVICTED,
    CONDITION_FINISHED,
    CONDITION_QUOTA_RESERVED,
)
from admitter.controller.dispatching import CONDITION_DISPATCHED, WORKER_LOST, WORKER_REMOVED
from admitter.controller.reconciler import Reconciler
from admitter.fleet.worker import COPY_LABEL
from admitter.jobs.rayjob import POD_LABEL as RAYJOB_POD_LABEL
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import TERMINAL_POD_PHASES, Obj, condition
from admitter.kubectl.clusters import cluster_rows
from admitter.kubectl.explain import explain_workload
from admitter.kubectl.state import QueueReading, read_state
from admitter.testing import LocalCluster
from admitter.testing.jobset_operator import JOBSET, running_jobset_operator
from admitter.testing.kuberay_operator import KUBERAY, running_kuberay_operator
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration


async def test_workers_report_their_nodes_and_gpus(api, fleet, kubeconfig):
    async with in_process_controller(kubeconfig):
        for name, layout in WORKERS.items():
            wc = await eventually(lambda n=name: reachable(api, n), f"{name} reachable", 60)
            assert (wc["status"]["nodes"], wc["status"]["gpus"]) == (
                layout.nodes, layout.nodes * layout.gpus_per_node)


async def test_a_gang_lands_whole_in_the_one_worker_that_holds_it(api, namespace, team, fleet,
                                                                   kubeconfig):
    # 3 pods x 8 GPUs: west (16 GPUs) cannot hold it, east (32) can.
    job = JobWrapper("gang", namespace).pods(3).runtime("30s").obj()
    await api.create(kube.JOBS, job)
    async with in_process_controller(kubeconfig) as controller:
        async def running_in_east() -> list[Obj] | None:
            pods = await pods_on(fleet["east"], namespace, "gang")
            return pods if len(pods) == 3 else None

        pods = await eventually(running_in_east, "the gang's 3 pods running in east", 90)
        assert {p["spec"]["nodeName"] for p in pods} <= {
            WORKERS["east"].node_name(i) for i in range(WORKERS["east"].nodes)}
        copies = await job_copies(fleet, namespace)
        assert [worker for worker, _ in copies["gang"]] == ["east"]
        (wl,) = await workloads(api, namespace)
        assert copies["gang"][0][1]["metadata"]["labels"][COPY_LABEL] == wl["metadata"]["uid"]
        manager_job = await api.get(kube.JOBS, "gang", namespace)
        assert manager_job["spec"]["suspend"] is True  # the manager's own copy never runs
        assert "admitter.dev/cluster=east" in condition(wl, "Admitted")["message"]

        async def progress_shown() -> Obj | None:
            (current,) = await workloads(api, namespace)
            shown = condition(current, CONDITION_DISPATCHED) or {}
            return current if "3 active" in shown.get("message", "") else None

        await eventually(progress_shown, "the copy's progress on the Workload", 60)
        await _the_user_sees_the_gang_in_east(api, namespace, controller)

        async def finished() -> Obj | None:
            (current,) = await workloads(api, namespace)
            done = condition(current, CONDITION_FINISHED) or {}
            return current if done.get("status") == "True" else None

        done = await eventually(finished, "the Workload finished with its copy", 120)
        assert "in cluster east" in condition(done, CONDITION_FINISHED)["message"]


async def _the_user_sees_the_gang_in_east(api: Kube, namespace: str,
                                          controller: Reconciler) -> None:
    """`explain` names east and the copy's progress, `queues` east's GPUs and the gang's 24
    admitted there, and so do the metrics."""
    state = await read_state(api)
    ours = [w for w in state.workloads if w["metadata"]["namespace"] == namespace]
    found = await explain_workload(api, state, ours[0])
    assert (found["cluster"], found["worker"], found["nodesFrom"]) == ("east", True, "worker")
    assert "3 active" in found["dispatched"]["message"]
    rows = {row["name"]: row for row in cluster_rows(QueueReading(
        state.now, state.cluster_queues, state.local_queues, ours,
        worker_clusters=state.worker_clusters))}
    assert [(r["reachable"], r["nodes"], r["gpus"], r["admittedGpus"]) for r in rows.values()
            ] == [(True, 4, 32, 24), (True, 2, 16, 0)]  # east, west
    sample = controller.metrics.registry.get_sample_value
    assert sample("admitter_cluster_gpus", {"cluster": "east"}) == 32
    assert sample("admitter_cluster_admitted_gpus", {"cluster": "east"}) == 24
    assert sample("admitter_worker_reachable", {"cluster": "west"}) == 1


async def test_a_gang_larger_than_every_worker_waits_naming_the_largest(api, namespace, team,
                                                                        fleet, kubeconfig):
    await api.create(kube.JOBS, JobWrapper("huge", namespace).pods(5).obj())  # 40 GPUs
    async with in_process_controller(kubeconfig):
        async def waiting() -> str | None:
            wls = await workloads(api, namespace)
            reserved = condition(wls[0], CONDITION_QUOTA_RESERVED) if wls else None
            message = (reserved or {}).get("message", "")
            return message if "cluster east" in message else None

        message = await eventually(waiting, "a reason naming the largest cluster", 90)
        assert "the largest room is 32, in cluster east" in message, message
        state = await read_state(api)
        (wl,) = [w for w in state.workloads if w["metadata"]["namespace"] == namespace]
        found = await explain_workload(api, state, wl)
        assert "the largest room is 32, in cluster east" in found["message"]
        assert found["wouldStart"].startswith("never: no cluster has 40 free nvidia.com/gpu")
        assert await job_copies(fleet, namespace) == {}


async def test_a_worker_with_a_wrong_kubeconfig_is_told_and_the_rest_keep_admitting(
        api, namespace, team, fleet, kubeconfig, workers):
    unreachable = yaml.safe_load(workers["west"].kubeconfig_path.read_text())
    unreachable["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # nothing listens
    await secret(api, "garbage-kubeconfig", b"{this is: [not a kubeconfig")
    await secret(api, "nowhere-kubeconfig", yaml.safe_dump(unreachable).encode())
    await api.create(kube.WORKER_CLUSTERS, worker_cluster("garbage", "garbage-kubeconfig"))
    await api.create(kube.WORKER_CLUSTERS, worker_cluster("nowhere", "nowhere-kubeconfig"))
    await api.create(kube.WORKER_CLUSTERS, worker_cluster("unnamed", "no-such-secret"))
    await api.create(kube.JOBS, JobWrapper("small", namespace).pods(2).obj())
    async with in_process_controller(kubeconfig):
        async def told(name: str, reason: str) -> Obj | None:
            wc = await api.get(kube.WORKER_CLUSTERS, name)
            found = condition(wc, CONDITION_REACHABLE) or {}
            return found if (found.get("status"), found.get("reason")) == ("False",
                                                                          reason) else None

        garbage = await eventually(lambda: told("garbage", "InvalidKubeconfig"),
                                   "garbage told its kubeconfig is invalid", 60)
        assert "Secret admitter-system/garbage-kubeconfig key 'kubeconfig'" in garbage["message"]
        unnamed = await eventually(lambda: told("unnamed", "SecretNotFound"),
                                   "unnamed told its Secret is missing", 60)
        assert unnamed["message"] == "Secret admitter-system/no-such-secret not found"
        nowhere = await eventually(lambda: told("nowhere", "Unreachable"),
                                   "nowhere told it is unreachable", 90)
        assert "127.0.0.1:9" in nowhere["message"] or "onnect" in nowhere["message"]

        async def running_somewhere() -> list | None:
            copies = (await job_copies(fleet, namespace)).get("small", [])
            if len(copies) != 1:
                return None
            worker, _ = copies[0]
            return copies if len(await pods_on(fleet[worker], namespace, "small")) == 2 else None

        await eventually(running_somewhere, "the job running in one good worker", 90)


async def test_a_manager_killed_mid_dispatch_leaves_one_copy_per_admission(
        api, namespace, team, fleet, kubeconfig, tmp_path):
    names = [f"j{i}" for i in range(12)]
    for name in names:  # 12 x 4 GPUs: all fit in the fleet's 48
        await api.create(kube.JOBS, JobWrapper(name, namespace).gpus(4).obj())
    seen_twice: list[str] = []

    async def sample() -> None:
        while True:
            seen_twice.extend(n for n, found in (await job_copies(fleet, namespace)).items()
                              if len(found) > 1)
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    try:
        for _ in range(3):  # killed as soon as its first new copies appear, mid-batch
            before = len(await job_copies(fleet, namespace))
            if before == len(names):
                break
            controller = ControllerProcess(kubeconfig, tmp_path / "controller.log",
                                           "--no-leader-elect")
            try:
                async def more(before: int = before) -> bool:
                    return len(await job_copies(fleet, namespace)) > before

                await eventually(more, "the controller to create copies", 90, interval=0.05)
            finally:
                controller.kill()
        final = ControllerProcess(kubeconfig, tmp_path / "controller.log", "--no-leader-elect")
        try:
            async def all_dispatched() -> dict | None:
                copies = await job_copies(fleet, namespace)
                return copies if set(copies) == set(names) else None

            copies = await eventually(all_dispatched, "a copy of every job", 120)
        finally:
            final.kill()
    finally:
        sampler.cancel()
    assert seen_twice == []
    by_uid = {wl["metadata"]["uid"]: wl for wl in await workloads(api, namespace)}
    for name, found in copies.items():
        assert len(found) == 1, name
        (_, copy), = found
        wl = by_uid[copy["metadata"]["labels"][COPY_LABEL]]  # never a copy without a Workload
        assert (wl.get("status") or {}).get("admission"), name  # ... that holds an admission



async def test_a_preempted_copy_is_deleted_before_its_room_is_given_again(
        api, namespace, team, fleet, kubeconfig):
    await _priorities(api, *fleet.values())
    # low fills east (4 x 8): only east holds it; high (3 x 8) fits east alone, by preemption
    await api.create(kube.JOBS, JobWrapper("low", namespace).pods(4).min_runtime(None)
                     .priority_class("fleet-low").obj())
    east_gpus: list[int] = []

    async with in_process_controller(kubeconfig):
        await eventually(lambda: _running(fleet["east"], namespace, "low", 4),
                         "low's 4 pods running in east", 90)
        sampler = asyncio.create_task(_sample_gpus(fleet["east"], namespace, east_gpus))
        try:
            await api.create(kube.JOBS, JobWrapper("high", namespace).pods(3)
                             .priority_class("fleet-high").obj())
            await eventually(lambda: _running(fleet["east"], namespace, "high", 3),
                             "high's 3 pods running in east", 120)
        finally:
            sampler.cancel()
        copies = await job_copies(fleet, namespace)
        assert [worker for worker, _ in copies["high"]] == ["east"]
        assert "low" not in copies  # its copy deleted
        low = next(wl for wl in await workloads(api, namespace)
                   if wl["metadata"]["name"].endswith("-low") or "low" in wl["metadata"]["name"])
        assert (condition(low, CONDITION_EVICTED) or {}).get("reason") == "Preempted"
        assert not (low.get("status") or {}).get("admission")
    assert east_gpus and max(east_gpus) <= 32, east_gpus  # never both copies at once


async def _priorities(*clients: Kube) -> None:
    """fleet-low and fleet-high, on the manager and in the workers: a copy's pods name them
    in their worker too."""
    for client in clients:
        await priority_class(client, "fleet-low", 100)
        await priority_class(client, "fleet-high", 1000)


async def _sample_gpus(client: Kube, namespace: str, into: list[int]) -> None:
    """Every half second, the GPUs of the namespace's pods bound and not ended, into `into`."""
    while True:
        listed = await client.request("GET", kube.PODS.path(namespace))
        into.append(8 * sum(1 for p in listed["items"] if p["spec"].get("nodeName")
                            and p["status"].get("phase") not in TERMINAL_POD_PHASES))
        await asyncio.sleep(0.5)


async def _running(client: Kube, namespace: str, job: str, count: int) -> bool:
    return len(await pods_on(client, namespace, job)) == count


async def _requeued_into(api: Kube, fleet: dict[str, Kube], namespace: str, job: str,
                         worker: str, reason: str) -> Obj:
    """Once the job's 2 pods run in `worker`, its requeue Event (`reason`): it was requeued
    once and admitted again."""
    await eventually(lambda: _running(fleet[worker], namespace, job, 2),
                     f"{job} requeued and running in {worker}", 120)
    (wl,) = await workloads(api, namespace)
    assert wl["status"]["evictionCount"] == 1
    return await event_on(api, namespace, job, reason)


async def _running_in(fleet: dict[str, Kube], namespace: str, job: str, count: int) -> str | None:
    """The worker where the job's `count` pods run, if one."""
    for name, client in fleet.items():
        if await _running(client, namespace, job, count):
            return name
    return None


@contextlib.asynccontextmanager
async def _cut(api: Kube, workers: dict[str, LocalCluster], name: str,
               how: str) -> AsyncIterator[None]:
    """The manager cut from worker `name` for the block: its API server stopped, or the
    kubeconfig in its Secret broken."""
    if how == "apiserver":
        workers[name].pause("kube-apiserver")
    else:
        await secret(api, f"{name}-kubeconfig", b"{this is: [not a kubeconfig")
    try:
        yield
    finally:
        if how == "apiserver":
            workers[name].resume("kube-apiserver")
        else:
            await secret(api, f"{name}-kubeconfig", workers[name].kubeconfig_path.read_bytes())


@pytest.mark.parametrize("how", ["apiserver", "kubeconfig"])
async def test_a_lost_workers_work_moves_and_its_copy_goes_when_it_returns(
        api, namespace, team, fleet, kubeconfig, workers, how):
    for name in WORKERS:
        await api.patch(kube.WORKER_CLUSTERS, name, {"spec": {"lostGracePeriod": "5s"}})
    await api.create(kube.JOBS, JobWrapper("roam", namespace).pods(2).obj())  # either holds it
    async with in_process_controller(kubeconfig):
        first = await eventually(lambda: _running_in(fleet, namespace, "roam", 2),
                                   "roam's 2 pods running in a worker", 90)
        (other,) = set(WORKERS) - {first}
        over: list[dict[str, int]] = []

        async def sample() -> None:  # every second: no worker admitted past its nodes
            while True:
                admitted = await admitted_gpus(api, namespace)
                if over_capacity(admitted):
                    over.append(admitted)
                await asyncio.sleep(1.0)

        sampler = asyncio.create_task(sample())
        async with _cut(api, workers, first, how):
            requeued = await _requeued_into(api, fleet, namespace, "roam", other, WORKER_LOST)
            assert f"cluster {first}" in requeued["message"]

        async def moved_copy_gone() -> bool:
            return [w for w, _ in (await job_copies(fleet, namespace)).get("roam", [])] == [other]

        try:
            await eventually(moved_copy_gone, f"{first}'s copy of roam deleted once it answers",
                             120)
        finally:
            sampler.cancel()
        await eventually(lambda: reachable(api, first), f"{first} reachable again", 60)
        assert await _running(fleet[other], namespace, "roam", 2)
        assert over == []


@pytest.fixture(scope="module")
def operators_in_east(local_cluster: LocalCluster, workers: dict[str, LocalCluster],
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """JobSet's and KubeRay's CRDs on the manager (users' JobSets and RayJobs wait there,
    suspended; no JobSet controller nor KubeRay operator runs there), and their CRDs,
    controller and operator in east only (east serves every copied kind): west lacks them."""
    JOBSET.install(local_cluster)
    KUBERAY.install(local_cluster)
    with (running_jobset_operator(workers["east"], tmp_path_factory.mktemp("jobset-east")),
          running_kuberay_operator(workers["east"], tmp_path_factory.mktemp("kuberay-east"))):
        yield


def _jobset(name: str, namespace: str, pods: int, priority: str,
            min_runtime: str | None = None) -> Obj:
    """One replicated job of `pods` Jobs of one 8-GPU pod each, queued and suspended; funded
    (it may preempt) with a min runtime."""
    pod = {"spec": {"restartPolicy": "Never", "priorityClassName": priority, "containers": [
        {"name": "main", "image": "registry.invalid/train",
         "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {QUEUE_LABEL: "default"},
                         "annotations": {MIN_RUNTIME_ANNOTATION: min_runtime}
                         if min_runtime else {}},
            "spec": {"suspend": True, "replicatedJobs": [
                {"name": "workers", "replicas": pods,
                 "template": {"spec": {"parallelism": 1, "completions": 1,
                                       "template": pod}}}]}}


async def _kinds_served(api: Kube, name: str, status: str) -> Obj | None:
    """The WorkerCluster's KindsServed condition, once it has `status`."""
    wc = await api.get(kube.WORKER_CLUSTERS, name)
    found = condition(wc, CONDITION_KINDS_SERVED) or {}
    return found if found.get("status") == status else None


async def _dispatched_showing(api: Kube, namespace: str, text: str) -> Obj | None:
    """The namespace's one Workload's Dispatched condition, once its message holds `text`."""
    (current,) = await workloads(api, namespace)
    shown = condition(current, CONDITION_DISPATCHED) or {}
    return shown if text in shown.get("message", "") else None


async def _jobset_copies(client: Kube, namespace: str) -> list[str]:
    listed = await client.request("GET", kube.JOBSETS.path(namespace),
                                  query={"labelSelector": COPY_LABEL})
    return sorted(js["metadata"]["name"] for js in listed["items"])


async def _jobset_pods(client: Kube, namespace: str, name: str) -> int:
    listed = await client.request("GET", kube.PODS.path(namespace), query={
        "labelSelector": f"jobset.sigs.k8s.io/jobset-name={name}"})
    return sum(1 for p in listed["items"] if (p.get("status") or {}).get("phase") == "Running"
               and COPY_LABEL in p["metadata"]["labels"])


async def test_jobsets_run_as_one_copy_in_the_worker_that_serves_them_and_leave_on_preemption(
        operators_in_east, api, namespace, team, fleet, kubeconfig):
    await _priorities(api, *fleet.values())
    east_gpus: list[int] = []

    # low (2 x 8) would fit west exactly, the tighter fit; west serves no JobSets
    await api.create(kube.JOBSETS, _jobset("low", namespace, 2, "fleet-low"))
    try:
        async with in_process_controller(kubeconfig):
            west = await eventually(lambda: _kinds_served(api, "west", "False"),
                                    "west told it lacks JobSet's CRD", 60)
            assert west["reason"] == "CRDMissing" and "JobSet" in west["message"]
            await eventually(lambda: _kinds_served(api, "east", "True"),
                             "east serves every copied kind", 60)

            async def low_running() -> bool:
                return await _jobset_pods(fleet["east"], namespace, "low") == 2

            await eventually(low_running, "low's 2 pods running in east", 120)
            assert await _jobset_copies(fleet["east"], namespace) == ["low"]
            manager_low = await api.get(kube.JOBSETS, "low", namespace)
            assert manager_low["spec"]["suspend"] is True  # the manager's own never runs

            shown = await eventually(lambda: _dispatched_showing(api, namespace, "workers: "),
                                     "the copy's progress per replicated job", 60)
            assert f"running in cluster east as {namespace}/low" in shown["message"]

            sampler = asyncio.create_task(_sample_gpus(fleet["east"], namespace, east_gpus))
            try:  # high (3 x 8) fits east only by preempting low: west serves no JobSets
                await api.create(kube.JOBSETS, _jobset("high", namespace, 3, "fleet-high",
                                                              "1h"))

                async def high_running() -> bool:
                    return await _jobset_pods(fleet["east"], namespace, "high") == 3

                await eventually(high_running, "high's 3 pods running in east", 150)
            finally:
                sampler.cancel()
            assert await _jobset_copies(fleet["east"], namespace) == ["high"]  # low's deleted
            low = next(wl for wl in await workloads(api, namespace)
                       if "low" in wl["metadata"]["name"])
            assert (condition(low, CONDITION_EVICTED) or {}).get("reason") == "Preempted"
            assert not (low.get("status") or {}).get("admission")
        assert east_gpus and max(east_gpus) <= 32, east_gpus  # never both copies at once
    finally:
        for client in (api, fleet["east"]):
            for name in await _jobset_names(client, namespace):
                await client.delete(kube.JOBSETS, name, namespace,
                                    {"propagationPolicy": "Background"})


async def _jobset_names(client: Kube, namespace: str) -> list[str]:
    listed = await client.request("GET", kube.JOBSETS.path(namespace))
    return [js["metadata"]["name"] for js in listed["items"]]


async def test_a_deleted_worker_clusters_work_is_requeued_and_runs_elsewhere(
        api, namespace, team, fleet, kubeconfig):
    await api.create(kube.JOBS, JobWrapper("stay", namespace).pods(2).obj())  # either holds it
    async with in_process_controller(kubeconfig) as controller:
        first = await eventually(lambda: _running_in(fleet, namespace, "stay", 2),
                                   "stay's 2 pods running in a worker", 90)
        (other,) = set(WORKERS) - {first}
        await api.delete(kube.WORKER_CLUSTERS, first)
        requeued = await _requeued_into(api, fleet, namespace, "stay", other, WORKER_REMOVED)
        assert f"its WorkerCluster {first} was deleted" in requeued["message"]
        assert set(controller.fleet.workers) == {other}  # its client and informers stopped
        # The manager no longer reaches the deleted worker: the copy there runs on.
        assert sorted(w for w, _ in (await job_copies(fleet, namespace))["stay"]) == sorted(
            WORKERS)


async def test_a_copy_whose_job_is_deleted_on_the_manager_is_deleted_in_its_worker(
        api, namespace, team, fleet, kubeconfig):
    await api.create(kube.JOBS, JobWrapper("gone", namespace).pods(2).obj())
    async with in_process_controller(kubeconfig):
        worker = await eventually(lambda: _running_in(fleet, namespace, "gone", 2),
                                   "gone's 2 pods running in a worker", 90)
        await api.delete(kube.JOBS, "gone", namespace, {"propagationPolicy": "Background"})

        async def copy_and_pods_gone() -> bool:
            listed = await fleet[worker].request("GET", kube.PODS.path(namespace), query={
                "labelSelector": "batch.kubernetes.io/job-name=gone"})
            return (await job_copies(fleet, namespace) == {}
                    and not any(p["status"].get("phase") not in TERMINAL_POD_PHASES
                                for p in listed["items"]))

        await eventually(copy_and_pods_gone, f"gone's copy and pods deleted in {worker}", 90)
        assert await workloads(api, namespace) == []


@pytest.fixture
async def ray_queue(api: Kube, fleet_namespace: str) -> str:
    """A LocalQueue `ray` in the test's namespace over 64 GPUs and 8 CPUs (a Ray head's)."""
    await apply_all(api, *leaf_queue(f"ray-{secrets.token_hex(3)}", namespace=fleet_namespace,
                                     local_name="ray", resources={
                                         "nvidia.com/gpu": {"quota": 64}, "cpu": {"quota": 8}}))
    return "ray"


def _rayjob(name: str, namespace: str, queue: str, workers: int,
            priority: str | None = None) -> Obj:
    """A queued RayJob: a CPU head and `workers` Ray workers of 8 GPUs, suspended as the
    webhook leaves it."""
    def template(container: str, limits: dict[str, str]) -> Obj:
        pod = {"containers": [{"name": container, "image": "rayproject/ray",
                               "resources": {"limits": limits}}]}
        return {"spec": {**pod, "priorityClassName": priority} if priority else pod}

    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}},
            "spec": {"suspend": True, "shutdownAfterJobFinishes": True,
                     "entrypoint": "python -c 'import ray; ray.init()'",
                     "rayClusterSpec": {
                         "headGroupSpec": {"rayStartParams": {},
                                           "template": template("ray-head", {"cpu": "1"})},
                         "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers,
                                               "minReplicas": 0, "maxReplicas": workers,
                                               "rayStartParams": {}, "template": template(
                                                   "ray-worker", {"nvidia.com/gpu": "8"})}]}}}


async def _ray_pods(client: Kube, namespace: str, name: str) -> list[Obj]:
    """The live pods of the RayJob's copy: its Ray pods name it, and the Workload."""
    listed = await client.request("GET", kube.PODS.path(namespace), query={
        "labelSelector": f"{RAYJOB_POD_LABEL}={name},{COPY_LABEL}"})
    return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") not in TERMINAL_POD_PHASES]


async def _rayjob_copies(client: Kube, namespace: str) -> list[Obj]:
    listed = await client.request("GET", kube.RAYJOBS.path(namespace),
                                  query={"labelSelector": COPY_LABEL})
    return listed["items"]


async def test_a_rayjob_runs_as_one_copy_in_the_worker_that_serves_it_until_its_job_goes(
        operators_in_east, api, namespace, ray_queue, fleet, kubeconfig):
    # 2 x 8 GPUs and a CPU head: west (16 GPUs) would be the tighter fit, but lacks KubeRay
    await api.create(kube.RAYJOBS, _rayjob("tune", namespace, ray_queue, 2))
    try:
        async with in_process_controller(kubeconfig):
            west = await eventually(lambda: _kinds_served(api, "west", "False"),
                                    "west told it lacks KubeRay's RayJob CRD", 60)
            assert west["reason"] == "CRDMissing" and "RayJob" in west["message"], west

            async def bound_in_east() -> list[Obj] | None:
                pods = await _ray_pods(fleet["east"], namespace, "tune")
                return pods if len(pods) == 4 and all(
                    p["spec"].get("nodeName") for p in pods) else None

            pods = await eventually(bound_in_east, "the RayJob's head, 2 workers and submitter "
                                    "bound in east", 150)
            (wl,) = await workloads(api, namespace)
            hinted = {hint["node"] for hint in wl["status"]["admission"]["nodeHints"]}
            east_nodes = {WORKERS["east"].node_name(i) for i in range(WORKERS["east"].nodes)}
            assert hinted <= east_nodes, hinted  # the model placed it in east
            assert {p["spec"]["nodeName"] for p in pods} <= east_nodes
            assert {p["metadata"]["labels"][COPY_LABEL] for p in pods} == {wl["metadata"]["uid"]}
            (copy,) = await _rayjob_copies(fleet["east"], namespace)
            assert copy["metadata"]["labels"][COPY_LABEL] == wl["metadata"]["uid"]
            assert await _ray_pods(fleet["west"], namespace, "tune") == []  # no RayJobs there
            manager_tune = await api.get(kube.RAYJOBS, "tune", namespace)
            assert manager_tune["spec"]["suspend"] is True  # the manager's own never runs

            shown = await eventually(
                lambda: _dispatched_showing(api, namespace, "Running: Ray cluster tune-"),
                "the copy's Ray cluster on the Workload", 90)
            (copy,) = await _rayjob_copies(fleet["east"], namespace)
            assert shown["message"].startswith(  # the copy's own status, read from east
                f"running in cluster east as {namespace}/tune: Running: Ray cluster "
                f"{copy['status']['rayClusterName']}, Ray job "), shown

            await api.delete(kube.RAYJOBS, "tune", namespace, {"propagationPolicy": "Background"})

            async def copy_gone() -> bool:
                return (await _rayjob_copies(fleet["east"], namespace) == []
                        and await _ray_pods(fleet["east"], namespace, "tune") == [])

            await eventually(copy_gone, "the copy and its Ray pods deleted in east", 120)
            assert await workloads(api, namespace) == []
    finally:
        for client in (api, fleet["east"]):
            await client.request("DELETE", kube.RAYJOBS.path(namespace),
                                 {"propagationPolicy": "Background"})


async def _sample_east_gpus(client: Kube, namespace: str, into: list[int]) -> None:
    """Every half second, the GPUs the namespace's bound, not ended pods ask for, into `into`."""
    while True:
        listed = await client.request("GET", kube.PODS.path(namespace))
        into.append(sum(int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
                        for p in listed["items"] if p["spec"].get("nodeName")
                        and p["status"].get("phase") not in TERMINAL_POD_PHASES
                        for c in p["spec"]["containers"]))
        await asyncio.sleep(0.5)


async def test_a_preempted_rayjobs_copy_and_ray_pods_go_before_its_room_is_given_again(
        operators_in_east, api, namespace, ray_queue, fleet, kubeconfig):
    await _priorities(api, *fleet.values())
    # low's 4 x 8 GPUs fill east; high (3 x 8) fits east alone, by preempting low
    await api.create(kube.RAYJOBS, _rayjob("low", namespace, ray_queue, 4, "fleet-low"))
    east_gpus: list[int] = []
    try:
        async with in_process_controller(kubeconfig):
            async def low_bound() -> bool:
                pods = await _ray_pods(fleet["east"], namespace, "low")
                return len(pods) == 6 and all(p["spec"].get("nodeName") for p in pods)

            await eventually(low_bound, "low's head, 4 workers and submitter bound in east",
                             150)
            sampler = asyncio.create_task(_sample_east_gpus(fleet["east"], namespace,
                                                            east_gpus))
            try:
                await api.create(kube.JOBS, JobWrapper("high", namespace).queue(ray_queue)
                                 .pods(3).priority_class("fleet-high").obj())
                await eventually(lambda: _running(fleet["east"], namespace, "high", 3),
                                 "high's 3 pods running in east", 150)
            finally:
                sampler.cancel()
            assert await _rayjob_copies(fleet["east"], namespace) == []  # low's deleted
            assert await _ray_pods(fleet["east"], namespace, "low") == []
            low = next(wl for wl in await workloads(api, namespace)
                       if "low" in wl["metadata"]["name"])
            assert (condition(low, CONDITION_EVICTED) or {}).get("reason") == "Preempted"
            assert not (low.get("status") or {}).get("admission")
            assert (await api.get(kube.RAYJOBS, "low", namespace))["spec"]["suspend"] is True
        assert east_gpus and max(east_gpus) <= 32, east_gpus  # never both copies at once
    finally:
        for client in (api, fleet["east"]):
            await client.request("DELETE", kube.RAYJOBS.path(namespace),
                                 {"propagationPolicy": "Background"})
