"""JobSet queued by admitter against the real JobSet controller: the writes the controller
makes for an admission (pin every pod set to the admitted domain, unsuspend), an eviction
(suspend) and the return to pending (restore the user's own placement), and what JobSet's
controller and kube-scheduler then do with the pods; then end to end, with admitter's controller
and webhooks running: created suspended, admitted as one gang inside a rack, drained and
admitted again in another rack, finished with its quota released, a forged unsuspend denied,
a gang too big for any rack waiting with a reason naming the rack level, and replicated jobs
each kept in a rack of their own inside the JobSet's block."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from admitter_world import (
    apply_all,
    cluster_topology,
    in_process_controller,
    jobs,
    priority_class,
    running,
)
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException
from operator_runs import (
    GPU,
    UNSUSPEND,
    admitted_to,
    clear,
    finished_and_released,
    holds_what_it_is_charged,
    read,
    users_jobs,
    workload_of,
)
from test_webhooks import crds, user_client, webhooks  # noqa: F401 (fixtures)

from admitter.api.contract import (
    ADMITTED_WORKLOAD_ANNOTATION,
    ORIGINAL_AFFINITY_ANNOTATION,
    QUEUE_LABEL,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from admitter.api.workload import CONDITION_QUOTA_RESERVED
from admitter.controller.actions import Actions
from admitter.core.decisions import EvictionReason
from admitter.jobs.jobset import JobSet
from admitter.jobs.workloads import resource_of
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, condition
from admitter.testing import BLOCK_LABEL, RACK_LABEL, LocalCluster
from admitter.testing.jobset_operator import running_jobset_operator
from admitter.testing.nodes import SIMULATED_RUNTIME_ANNOTATION
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration
JOBSETS = resource_of(JobSet())
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
WORKLOAD = "jobset-train-0a1b2"


@pytest.fixture(scope="module")
def jobset_operator(local_cluster: LocalCluster,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with running_jobset_operator(local_cluster, tmp_path_factory.mktemp("jobset")):
        yield


@pytest.fixture(autouse=True)
async def cleared(api: Kube, namespace: str) -> AsyncIterator[None]:
    """The test's JobSets and Jobs (an orphaned JobSet's too) deleted and their pods gone
    after it, so later tests find the nodes free."""
    yield
    await clear(api, namespace, JOBSETS, kube.JOBS)


def pod_template(gpus: int) -> Obj:
    return {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "trainer", "resources": {"limits": {GPU: str(gpus)}}}]}}


def leader_and_workers(namespace: str) -> Obj:
    """1 leader + 2 × 4 workers, suspended as admitter's webhook leaves a queued JobSet."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": f"train-{secrets.token_hex(3)}", "namespace": namespace},
        "spec": {"suspend": True, "replicatedJobs": [
            {"name": "leader", "replicas": 1,
             "template": {"spec": {"parallelism": 1, "completions": 1,
                                   "template": pod_template(1)}}},
            {"name": "workers", "replicas": 2,
             "template": {"spec": {"parallelism": 4, "completions": 4,
                                   "template": pod_template(1)}}},
        ]},
    }


async def bound_pods(api: Kube, js: Obj) -> dict[str, str] | None:
    """Pod → node of the JobSet's live pods, once all 9 are bound."""
    listed = await api.request("GET", f"/api/v1/namespaces/{js['metadata']['namespace']}/pods",
                               query={"labelSelector": f"{NAME_LABEL}={js['metadata']['name']}"})
    live = [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in live}
    return nodes if len(nodes) == 9 and all(nodes.values()) else None


async def live_pods(api: Kube, js: Obj) -> int:
    listed = await api.request("GET", f"/api/v1/namespaces/{js['metadata']['namespace']}/pods",
                               query={"labelSelector": f"{NAME_LABEL}={js['metadata']['name']}"})
    return sum(1 for p in listed["items"] if not p["metadata"].get("deletionTimestamp"))


async def start(actions: Actions, api: Kube, js: Obj, rack: str) -> Obj | None:
    """Start the JobSet as read now; None when JobSet's controller changed it meanwhile (the
    start is conditional on the version read, as the controller's is)."""
    try:
        return await actions.start_job(await read(api, js), admitted_to(rack, WORKLOAD))
    except ApiException as error:
        if error.status != 409:
            raise
        return None


async def test_a_jobset_runs_in_the_admitted_rack_and_again_in_another_after_an_eviction(
        jobset_operator: None, api: Kube, namespace: str, local_cluster: LocalCluster) -> None:
    racks = {node: rack for rack in ("rack-1", "rack-2")
             for node in local_cluster.layout.nodes_in_rack(rack)}
    actions = Actions(api)
    js = await api.create(JOBSETS, leader_and_workers(namespace))

    selector = f"{NAME_LABEL}={js['metadata']['name']}"

    async def child_jobs_suspended() -> bool:
        listed = await api.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs",
                                   query={"labelSelector": selector})
        return len(listed["items"]) == 3 and all(j["spec"].get("suspend")
                                                 for j in listed["items"])

    await eventually(child_jobs_suspended, "JobSet's controller makes 3 suspended child Jobs")
    assert await live_pods(api, js) == 0

    await eventually(lambda: start(actions, api, js, "rack-1"), "the JobSet started")
    placed = await eventually(lambda: bound_pods(api, js), "9 pods bound", timeout=60.0)
    assert {racks.get(node) for node in placed.values()} == {"rack-1"}

    # Evicted: suspended, its pods go; back to pending: the user's own (no) affinity again.
    await actions.suspend_job(await read(api, js))

    async def no_pods() -> bool:
        return await live_pods(api, js) == 0

    await eventually(no_pods, "the suspended JobSet's pods deleted", timeout=60.0)
    restored = await actions.restore_job(await read(api, js))
    assert restored["spec"]["suspend"] is True
    for replicated in restored["spec"]["replicatedJobs"]:
        assert "nodeSelector" not in replicated["template"]["spec"]["template"]["spec"]
    marks = restored["metadata"].get("annotations") or {}
    assert ADMITTED_WORKLOAD_ANNOTATION not in marks and ORIGINAL_AFFINITY_ANNOTATION not in marks

    await eventually(lambda: start(actions, api, js, "rack-2"), "the JobSet started again")
    placed = await eventually(lambda: bound_pods(api, js), "9 pods bound again", timeout=60.0)
    assert {racks.get(node) for node in placed.values()} == {"rack-2"}


# End to end, with admitter's controller (and, for users' requests, its webhooks) running ---


def queued_jobset(namespace: str, name: str, workers: int, runtime: str | None = None) -> Obj:
    """1 leader + 2 × `workers` workers of 1 GPU each in LocalQueue `default`, needing one
    rack; its pods run for `runtime` (KWOK), or until deleted."""
    js = leader_and_workers(namespace)
    js["metadata"].update(name=name, labels={QUEUE_LABEL: "default"},
                          annotations={TOPOLOGY_REQUIRED_ANNOTATION: RACK_LABEL})
    leader, workers_job = js["spec"]["replicatedJobs"]
    workers_job["template"]["spec"].update(parallelism=workers, completions=workers)
    if runtime is not None:
        for replicated in (leader, workers_job):
            replicated["template"]["spec"]["template"]["metadata"] = {
                "annotations": {SIMULATED_RUNTIME_ANNOTATION: runtime}}
    return js


@pytest.fixture
async def team_queue(api: Kube, namespace: str) -> str:
    """A ClusterQueue of 64 GPUs fed by LocalQueue `default` in the test's namespace."""
    name = f"jobsets-{secrets.token_hex(3)}"
    await cluster_topology(api)
    await apply_all(api, *leaf_queue(name, 64, namespace=namespace))
    return name


async def test_a_queued_jobset_runs_as_one_gang_in_a_rack_and_in_another_after_a_drain(
        jobset_operator: None, api: Kube, namespace: str, team_queue: str,
        kubeconfig: Path) -> None:
    nodes = await api.request("GET", kube.NODES.path())
    racks = {n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL] for n in nodes["items"]}
    js = await api.create(JOBSETS, queued_jobset(namespace, "train", 4))
    async with in_process_controller(kubeconfig) as controller:
        placed = await eventually(lambda: bound_pods(api, js), "9 pods bound", timeout=90.0)
        (first_rack,) = {racks[node] for node in placed.values()}
        wl = await workload_of(api, js)
        assert wl is not None and len(wl["spec"]["podSets"]) == 2
        assert wl["status"]["admission"]["topologyDomain"][RACK_LABEL] == first_rack
        started = await read(api, js)
        for replicated in started["spec"]["replicatedJobs"]:
            selector = replicated["template"]["spec"]["template"]["spec"]["nodeSelector"]
            assert selector[RACK_LABEL] == first_rack
        # The JobSet's pods are counted as its admission, not as foreign usage, and hold the
        # GPUs it is charged: 1 leader and 2 × 4 workers of one GPU.
        assert not set(controller.caches.foreign_usage()) & set(placed.values())
        assert await holds_what_it_is_charged(api, js, "the JobSet") == 9

        drained = sorted(placed.values())[0]
        await api.patch(kube.NODES, drained, {"spec": {"unschedulable": True}})
        try:
            async def elsewhere() -> dict[str, str] | None:
                found = await bound_pods(api, js)
                return found if found and racks[drained] not in {
                    racks[node] for node in found.values()} else None

            moved = await eventually(elsewhere, "9 pods bound in another rack", timeout=120.0)
        finally:
            await api.patch(kube.NODES, drained, {"spec": {"unschedulable": None}})
        assert len({racks[node] for node in moved.values()}) == 1
        wl = await workload_of(api, js)
        assert wl is not None and wl["status"].get("evictionCount") == 1
        events = await api.request("GET", kube.EVENTS.path(namespace))
        assert any(e["reason"] == EvictionReason.DRAINED.value
                   and e["involvedObject"]["kind"] == "JobSet" for e in events["items"])


async def test_a_jobset_finishes_and_releases_its_quota_and_one_too_big_for_a_rack_waits(
        jobset_operator: None, api: Kube, namespace: str, team_queue: str,
        kubeconfig: Path) -> None:
    short = await api.create(JOBSETS, queued_jobset(namespace, "short", 4, runtime="3s"))
    too_big = await api.create(JOBSETS, queued_jobset(namespace, "too-big", 8))
    async with in_process_controller(kubeconfig):
        await finished_and_released(api, short, "the short JobSet")

        async def waiting() -> Obj | None:
            found = await workload_of(api, too_big)
            shown = condition(found, CONDITION_QUOTA_RESERVED) if found else None
            return shown if shown and shown["status"] == "False" else None

        why = await eventually(waiting, "the 17-GPU gang's pending reason", timeout=60.0)
        assert RACK_LABEL in why["message"], why
        assert (await read(api, too_big))["spec"]["suspend"] is True
        assert await live_pods(api, too_big) == 0


async def test_the_webhook_suspends_a_users_jobset_and_denies_a_forged_unsuspend(
        jobset_operator: None, api: Kube, kube_client: ApiClient, namespace: str,
        webhooks: None, user_client: ApiClient) -> None:  # noqa: F811 (fixtures)
    await cluster_topology(api)
    jobsets = await users_jobs(kube_client, user_client, namespace, JOBSETS)
    wanted = queued_jobset(namespace, "train", 4)
    wanted["spec"]["suspend"] = False
    assert (await jobsets.create(wanted))["spec"]["suspend"] is True
    message = await jobsets.refused(jobsets.patch("train", UNSUSPEND))
    assert "spec.suspend: alice may not unsuspend a JobSet that admitter has not admitted" in (
        message)


async def test_a_jobset_preempted_by_a_gang_needing_its_rack_runs_again_in_another(
        jobset_operator: None, api: Kube, namespace: str, team_queue: str,
        kubeconfig: Path) -> None:
    nodes = await api.request("GET", kube.NODES.path())
    racks = {n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL] for n in nodes["items"]}
    await priority_class(api, "jobset-low", 10)
    await priority_class(api, "jobset-high", 100)
    low = queued_jobset(namespace, "low", 4)
    for replicated in low["spec"]["replicatedJobs"]:
        replicated["template"]["spec"]["template"]["spec"]["priorityClassName"] = "jobset-low"
    js = await api.create(JOBSETS, low)
    async with in_process_controller(kubeconfig):
        placed = await eventually(lambda: bound_pods(api, js), "9 pods bound", timeout=90.0)
        (rack,) = {racks[node] for node in placed.values()}
        # Funded (a min runtime) and of higher priority: it may preempt the unfunded JobSet.
        await apply_all(api, JobWrapper("high", namespace).pods(2).gpus(8).min_runtime("1h")
                        .priority_class("jobset-high").node_selector(RACK_LABEL, rack).obj())

        async def elsewhere() -> dict[str, str] | None:
            found = await bound_pods(api, js)
            return found if found and rack not in {racks[n] for n in found.values()} else None

        moved = await eventually(elsewhere, "the JobSet's 9 pods in another rack", timeout=120.0)
        assert len({racks[node] for node in moved.values()}) == 1
        assert running((await jobs(api, namespace))["high"])
    events = await api.request("GET", kube.EVENTS.path(namespace))
    assert any(e["reason"] == EvictionReason.PREEMPTED.value
               and e["involvedObject"]["kind"] == "JobSet" for e in events["items"])



async def test_replicated_jobs_that_each_ask_for_a_rack_get_one_each_inside_the_jobsets_block(
        jobset_operator: None, api: Kube, namespace: str, team_queue: str,
        kubeconfig: Path) -> None:
    """Two replicated jobs of 2 × 4 pods × 2 GPUs, each filling a rack (16 GPUs), the
    JobSet in one block (32 GPUs); the pod templates carry the rack request."""
    js = leader_and_workers(namespace)
    js["metadata"].update(name="racks", labels={QUEUE_LABEL: "default"},
                          annotations={TOPOLOGY_REQUIRED_ANNOTATION: BLOCK_LABEL})
    js["spec"]["replicatedJobs"] = [
        {"name": name, "replicas": 2, "template": {"spec": {
            "parallelism": 4, "completions": 4, "template": {
                "metadata": {"annotations": {TOPOLOGY_REQUIRED_ANNOTATION: RACK_LABEL}},
                **pod_template(2)}}}}
        for name in ("a", "b")]
    js = await api.create(JOBSETS, js)
    nodes = await api.request("GET", kube.NODES.path())
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes["items"]}

    async def bound() -> dict[str, set[str]] | None:
        listed = await api.request("GET", f"/api/v1/namespaces/{namespace}/pods", query={
            "labelSelector": f"{NAME_LABEL}=racks"})
        live = [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]
        if len(live) < 16 or not all(p["spec"].get("nodeName") for p in live):
            return None
        racks: dict[str, set[str]] = {}
        for pod in live:
            replicated = pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]
            racks.setdefault(replicated, set()).add(labels[pod["spec"]["nodeName"]][RACK_LABEL])
        return racks

    async with in_process_controller(kubeconfig):
        racks = await eventually(bound, "16 pods bound", timeout=90.0)
    assert set(racks) == {"a", "b"} and all(len(found) == 1 for found in racks.values()), racks
    (rack_a,), (rack_b,) = racks["a"], racks["b"]
    assert rack_a != rack_b
    wl = await workload_of(api, js)
    assert wl is not None
    admission = wl["status"]["admission"]
    (block,) = {labels[node][BLOCK_LABEL] for node in labels
                if labels[node].get(RACK_LABEL) in (rack_a, rack_b)}
    assert admission["topologyDomain"] == {BLOCK_LABEL: block}
    assert {entry["podSet"]: entry["domain"][RACK_LABEL]
            for entry in admission["podSetDomains"]} == {"a": rack_a, "b": rack_b}
    started = await read(api, js)
    for replicated, rack in zip(started["spec"]["replicatedJobs"], (rack_a, rack_b),
                                strict=True):
        selector = replicated["template"]["spec"]["template"]["spec"]["nodeSelector"]
        assert selector == {BLOCK_LABEL: block, RACK_LABEL: rack}
