"""RayJob through admitter's job interface against KubeRay's real operator: a suspended RayJob
gets no Ray cluster; the writes the controller makes for an admission (pin the head, every
worker group and the submitter to the admitted domain, label them with the RayJob, write
KubeRay's default submitter template for a RayJob that has none, unsuspend) make KubeRay create
its RayCluster and then its submitter Job, whose pods carry the label and are placed in that
domain; an eviction (suspend) makes KubeRay delete them, and after the user's own templates
are restored (the submitter template admitter wrote gone) it runs again in another domain.
Then end to end, with admitter's controller (and, for users' requests, its webhooks) running:
a queued RayJob admitted in a rack, its pods (the submitter's too) counted as its admission,
preempted by a higher-priority Job (its cluster torn down), waiting suspended while the queue
has no room and admitted again once there is; one that ends (KubeRay's deadline) finished with
its quota released and its cluster deleted; one in `SidecarMode` charged on its head for
the submitter container KubeRay adds there; a forged unsuspend and a cluster kept after the
job ends refused naming the field."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from admitter_world import apply_all, cluster_topology, in_process_controller, priority_class
from kubernetes_asyncio.client import ApiClient
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
from admitter.api.quantity import kube_base_units, to_base_units
from admitter.api.workload import CONDITION_FINISHED, CONDITION_QUOTA_RESERVED, MAX_POD_SETS, Reason
from admitter.controller.actions import Actions
from admitter.core.decisions import EvictionReason
from admitter.jobs.rayjob import POD_LABEL, RayJob
from admitter.jobs.workloads import resource_of
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import TERMINAL_POD_PHASES, Obj, condition, pod_requests
from admitter.testing import RACK_LABEL, LocalCluster
from admitter.testing.kuberay_operator import running_kuberay_operator
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, cluster_queue, local_queue

pytestmark = pytest.mark.integration
RAYJOBS = resource_of(RayJob())
CLUSTER_LABEL = "ray.io/cluster"
WORKLOAD = "rayjob-tune-0a1b2"


@pytest.fixture(scope="module")
def kuberay_operator(local_cluster: LocalCluster,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with running_kuberay_operator(local_cluster, tmp_path_factory.mktemp("kuberay")):
        yield


@pytest.fixture(autouse=True)
async def cleared(api: Kube, namespace: str) -> AsyncIterator[None]:
    """The test's RayJobs and Jobs deleted and their pods gone after it, so later tests find
    the nodes free."""
    yield
    await clear(api, namespace, RAYJOBS, kube.JOBS)


def pod_template(container: str, gpus: int) -> Obj:
    limits = {GPU: str(gpus)} if gpus else {"cpu": "1"}
    return {"spec": {"containers": [{"name": container, "image": "rayproject/ray",
                                     "resources": {"limits": limits}}]}}


def head_and_workers(namespace: str) -> Obj:
    """A head and one worker group of 3 one-GPU workers, suspended as admitter's webhook
    leaves a queued RayJob (KubeRay suspends only RayJobs that shut their cluster down)."""
    return {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": f"tune-{secrets.token_hex(3)}", "namespace": namespace},
        "spec": {"suspend": True, "shutdownAfterJobFinishes": True,
                 "entrypoint": "python -c 'import ray; ray.init()'",
                 "rayClusterSpec": {
                     "headGroupSpec": {"rayStartParams": {},
                                       "template": pod_template("ray-head", 0)},
                     "workerGroupSpecs": [{"groupName": "gpu", "replicas": 3, "minReplicas": 0,
                                           "maxReplicas": 3, "rayStartParams": {},
                                           "template": pod_template("ray-worker", 1)}]}},
    }


async def cluster_pods(api: Kube, job: Obj) -> list[Obj]:
    """The live pods of the RayCluster KubeRay made for the RayJob (none before it made one)."""
    cluster = ((await read(api, job)).get("status") or {}).get("rayClusterName")
    if not cluster:
        return []
    listed = await api.request("GET", f"/api/v1/namespaces/{job['metadata']['namespace']}/pods",
                               query={"labelSelector": f"{CLUSTER_LABEL}={cluster}"})
    return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]


async def bound_pods(api: Kube, job: Obj) -> dict[str, str] | None:
    """Pod → node of the Ray cluster's pods, once the head and the 3 workers are bound."""
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName")
             for p in await cluster_pods(api, job)}
    return nodes if len(nodes) == 4 and all(nodes.values()) else None


async def bound_submitter(api: Kube, job: Obj) -> Obj | None:
    """The RayJob's live submitter pod, once bound: of the Job named after the RayJob that
    KubeRay makes, once the Ray cluster is up, to run `ray job submit`."""
    meta = job["metadata"]
    listed = await api.request("GET", f"/api/v1/namespaces/{meta['namespace']}/pods", query={
        "labelSelector": f"batch.kubernetes.io/job-name={meta['name']}"})
    return next((pod for pod in listed["items"] if pod["spec"].get("nodeName")
                 and not pod["metadata"].get("deletionTimestamp")
                 and pod["status"].get("phase") not in TERMINAL_POD_PHASES), None)


async def bound_and_charged(api: Kube, job: Obj) -> tuple[dict[str, str], Obj]:
    """Once the Ray cluster's pods are bound: pod → node, and the RayJob's Workload."""
    placed = await eventually(lambda: bound_pods(api, job), "head and 3 workers bound",
                              timeout=90.0)
    wl = await workload_of(api, job)
    assert wl is not None
    return placed, wl


async def ray_clusters(api: Kube, namespace: str) -> list[Obj]:
    listed = await api.request("GET", f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters")
    return [c for c in listed["items"] if not c["metadata"].get("deletionTimestamp")]


async def test_a_rayjobs_cluster_runs_in_the_admitted_rack_and_in_another_after_an_eviction(
        kuberay_operator: None, api: Kube, namespace: str, local_cluster: LocalCluster) -> None:
    racks = {node: rack for rack in ("rack-1", "rack-2")
             for node in local_cluster.layout.nodes_in_rack(rack)}
    actions = Actions(api)
    job = await api.create(RAYJOBS, head_and_workers(namespace))
    assert job["spec"]["submissionMode"] == "K8sJobMode"  # the CRD's default: a submitter Job

    async def suspended_by_kuberay() -> bool:
        status = (await read(api, job)).get("status") or {}
        return status.get("jobDeploymentStatus") == "Suspended"

    await eventually(suspended_by_kuberay, "KubeRay to see the RayJob suspended", timeout=60.0)
    assert await ray_clusters(api, namespace) == []

    await actions.start_job(await read(api, job), admitted_to("rack-1", WORKLOAD))
    placed = await eventually(lambda: bound_pods(api, job), "head and 3 workers bound",
                              timeout=90.0)
    assert {racks.get(node) for node in placed.values()} == {"rack-1"}
    (made,) = await ray_clusters(api, namespace)
    assert made["metadata"]["ownerReferences"][0]["name"] == job["metadata"]["name"]
    assert {p["metadata"]["labels"][POD_LABEL] for p in await cluster_pods(api, job)} == {
        job["metadata"]["name"]}
    # KubeRay's default submitter, from the template admitter wrote: the head's image, the
    # default's requests, labelled and pinned like the Ray pods.
    submitter = await eventually(lambda: bound_submitter(api, job), "the submitter pod bound",
                                 timeout=90.0)
    assert racks.get(submitter["spec"]["nodeName"]) == "rack-1"
    assert submitter["metadata"]["labels"][POD_LABEL] == job["metadata"]["name"]
    (container,) = submitter["spec"]["containers"]
    assert (container["name"], container["image"]) == ("ray-job-submitter", "rayproject/ray")
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    assert container["command"]  # filled in by KubeRay

    # Evicted: KubeRay deletes the Ray cluster; back to pending: the user's own placement.
    await actions.suspend_job(await read(api, job))

    async def no_cluster() -> bool:
        return await ray_clusters(api, namespace) == [] and not await cluster_pods(api, job)

    await eventually(no_cluster, "the suspended RayJob's cluster deleted", timeout=90.0)
    await eventually(suspended_by_kuberay, "KubeRay to see the RayJob suspended again",
                     timeout=60.0)
    restored = await actions.restore_job(await read(api, job))
    assert restored["spec"]["suspend"] is True
    cluster = restored["spec"]["rayClusterSpec"]
    for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"]):
        assert "affinity" not in group["template"]["spec"]
        assert "metadata" not in group["template"]
    assert "submitterPodTemplate" not in restored["spec"]  # admitter's, not the user's
    marks = restored["metadata"].get("annotations") or {}
    assert ADMITTED_WORKLOAD_ANNOTATION not in marks and ORIGINAL_AFFINITY_ANNOTATION not in marks

    await actions.start_job(await read(api, job), admitted_to("rack-2", WORKLOAD))
    placed = await eventually(lambda: bound_pods(api, job), "the cluster's pods bound again",
                              timeout=90.0)
    assert {racks.get(node) for node in placed.values()} == {"rack-2"}
    submitter = await eventually(lambda: bound_submitter(api, job),
                                 "the submitter pod bound again", timeout=90.0)
    assert racks.get(submitter["spec"]["nodeName"]) == "rack-2"


# End to end, with admitter's controller (and, for users' requests, its webhooks) running ---


def queued_rayjob(namespace: str, name: str) -> Obj:
    """`head_and_workers` in LocalQueue `default`, needing one rack."""
    job = head_and_workers(namespace)
    job["metadata"].update(name=name, labels={QUEUE_LABEL: "default"},
                           annotations={TOPOLOGY_REQUIRED_ANNOTATION: RACK_LABEL})
    return job


async def rayjobs_queue(api: Kube, namespace: str) -> None:
    """A ClusterQueue of 16 GPUs and 8 CPUs, which the namespace's LocalQueue `default` feeds."""
    name = f"rayjobs-{secrets.token_hex(3)}"
    await apply_all(api, cluster_queue(name, resources={GPU: {"quota": 16}, "cpu": {"quota": 8}}),
                    local_queue(name, namespace=namespace))


def with_worker_groups(job: Obj, groups: int) -> Obj:
    """The RayJob with `groups` worker groups like its first (each a pod set of its own)."""
    cluster = job["spec"]["rayClusterSpec"]
    first = cluster["workerGroupSpecs"][0]
    cluster["workerGroupSpecs"] = [{**first, "groupName": f"gpu-{index}"}
                                   for index in range(1, groups + 1)]
    return job


def rack_pin(pod: Obj) -> list[str]:
    """The racks the pod's required node affinity allows."""
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return [value for term in terms for expression in term["matchExpressions"]
            if expression["key"] == RACK_LABEL for value in expression["values"]]


async def test_a_queued_rayjob_is_preempted_by_a_higher_priority_job_and_waits_for_room(
        kuberay_operator: None, api: Kube, namespace: str, kubeconfig: Path) -> None:
    await cluster_topology(api)
    await priority_class(api, "rayjob-high", 100)
    await rayjobs_queue(api, namespace)
    # The user keeps the Ray cluster in rack-1: once that rack is taken, it has to wait.
    wanted = queued_rayjob(namespace, "tune")
    cluster = wanted["spec"]["rayClusterSpec"]
    for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"]):
        group["template"]["spec"]["nodeSelector"] = {RACK_LABEL: "rack-1"}
    job = await api.create(RAYJOBS, wanted)
    async with in_process_controller(kubeconfig) as controller:
        placed, wl = await bound_and_charged(api, job)
        # The admission charges the submitter KubeRay runs: its pod set, KubeRay's default.
        assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
            ("head", 1), ("gpu", 3), ("submitter", 1)]
        assert wl["spec"]["podSets"][-1]["requests"] == {"cpu": "500m", "memory": "200Mi"}
        assert wl["status"]["admission"]["topologyDomain"][RACK_LABEL] == "rack-1"
        submitter = await eventually(lambda: bound_submitter(api, job),
                                     "the submitter pod bound", timeout=90.0)
        for pod in [*await cluster_pods(api, job), submitter]:
            assert rack_pin(pod) == ["rack-1"]
            assert pod["metadata"]["labels"][POD_LABEL] == "tune"
        # All its pods, the submitter's too, are counted as the RayJob's admission where they
        # run and hold the GPUs it is charged; nothing on their nodes is foreign usage.
        nodes = Counter([*placed.values(), submitter["spec"]["nodeName"]])
        key = ("RayJob", namespace, job["metadata"]["name"])

        async def all_counted_and_none_foreign() -> bool:
            foreign = controller.caches.foreign_usage()
            return (controller.caches.bound_pods().get(key) == dict(nodes)
                    and not any(foreign.get(node) for node in nodes))

        await eventually(all_counted_and_none_foreign,
                         "the RayJob's pods counted as its own, none foreign", timeout=30.0)
        assert await holds_what_it_is_charged(api, job, "the RayJob") == 3

        # Funded (a min runtime), of higher priority and needing all of rack-1: it may
        # preempt the unfunded RayJob.
        await apply_all(api, JobWrapper("high", namespace).pods(2).gpus(8).min_runtime("1h")
                        .priority_class("rayjob-high").node_selector(RACK_LABEL, "rack-1")
                        .obj())

        async def torn_down() -> bool:
            return await ray_clusters(api, namespace) == [] and not await cluster_pods(api, job)

        await eventually(torn_down, "the preempted RayJob's cluster deleted", timeout=90.0)

        async def waiting() -> Obj | None:
            found = await workload_of(api, job)
            shown = condition(found, CONDITION_QUOTA_RESERVED) if found else None
            return shown if shown and shown["status"] == "False" else None

        await eventually(waiting, "the RayJob's Workload pending", timeout=60.0)
        assert (await read(api, job))["spec"]["suspend"] is True
        assert await ray_clusters(api, namespace) == []

        await api.request("DELETE", kube.JOBS.path(namespace) + "/high",
                          {"propagationPolicy": "Background"})
        await eventually(lambda: bound_pods(api, job), "the RayJob's cluster back once room",
                         timeout=120.0)
    events = await api.request("GET", kube.EVENTS.path(namespace))
    assert any(e["reason"] == EvictionReason.PREEMPTED.value
               and e["involvedObject"]["kind"] == "RayJob" for e in events["items"])


async def test_a_rayjob_that_ends_releases_its_quota_and_its_cluster_goes(
        kuberay_operator: None, api: Kube, namespace: str, kubeconfig: Path) -> None:
    """KWOK runs no Ray, so the Ray job never reports an end: KubeRay's own deadline ends the
    RayJob (`activeDeadlineSeconds`, deployment `Failed`), which is an end like any other."""
    await cluster_topology(api)
    await rayjobs_queue(api, namespace)
    wanted = queued_rayjob(namespace, "deadline")
    wanted["spec"]["activeDeadlineSeconds"] = 15
    job = await api.create(RAYJOBS, wanted)
    async with in_process_controller(kubeconfig):
        await eventually(lambda: bound_pods(api, job), "head and 3 workers bound", timeout=90.0)
        await finished_and_released(api, job, "the RayJob", reason=Reason.FAILED)
        wl = await workload_of(api, job)
        assert wl is not None and "DeadlineExceeded" in condition(wl, CONDITION_FINISHED)[
            "message"]

        async def gone() -> bool:
            return await ray_clusters(api, namespace) == [] and not await cluster_pods(api, job)

        await eventually(gone, "the ended RayJob's cluster deleted", timeout=90.0)


async def test_a_sidecar_mode_rayjob_charges_its_head_for_the_submitter_kuberay_adds_to_it(
        kuberay_operator: None, api: Kube, namespace: str, kubeconfig: Path) -> None:
    """In `SidecarMode` KubeRay runs `ray job submit` in a container it adds to the head pod,
    and makes no submitter Job: the head's pod set asks exactly what that pod asks."""
    await cluster_topology(api)
    await rayjobs_queue(api, namespace)
    wanted = queued_rayjob(namespace, "sidecar")
    wanted["spec"]["submissionMode"] = "SidecarMode"
    job = await api.create(RAYJOBS, wanted)
    async with in_process_controller(kubeconfig) as controller:
        placed, wl = await bound_and_charged(api, job)
        assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
            ("head", 1), ("gpu", 3)]
        (head,) = [pod for pod in await cluster_pods(api, job)
                   if pod["metadata"]["labels"].get("ray.io/node-type") == "head"]
        assert "ray-job-submitter" in [c["name"] for c in head["spec"]["containers"]]
        charged = {resource: kube_base_units(resource, amount)
                   for resource, amount in wl["spec"]["podSets"][0]["requests"].items()}
        assert charged == {resource: to_base_units(resource, amount)
                           for resource, amount in pod_requests(head["spec"]).items()}
        assert charged["cpu"] == 1500  # the head's 1 CPU and the submitter's 500m
        assert await bound_submitter(api, job) is None  # no submitter Job in this mode
        key = ("RayJob", namespace, job["metadata"]["name"])
        assert controller.caches.bound_pods().get(key) == dict(Counter(placed.values()))
        assert not set(controller.caches.foreign_usage()) & set(placed.values())


async def test_the_webhook_suspends_a_users_rayjob_and_refuses_what_admitter_cannot_count(
        kuberay_operator: None, api: Kube, kube_client: ApiClient, namespace: str,
        webhooks: None, user_client: ApiClient) -> None:  # noqa: F811 (fixtures)
    await cluster_topology(api)
    rayjobs = await users_jobs(kube_client, user_client, namespace, RAYJOBS)
    keeps_cluster = queued_rayjob(namespace, "keeps")
    keeps_cluster["spec"]["shutdownAfterJobFinishes"] = False
    assert ("spec.shutdownAfterJobFinishes: is false: the Ray cluster would hold its quota "
            "after the job ends; set it to true") in await rayjobs.refused(
                rayjobs.create(keeps_cluster))

    wanted = queued_rayjob(namespace, "tune")
    wanted["spec"]["suspend"] = False
    assert (await rayjobs.create(wanted))["spec"]["suspend"] is True
    assert "spec.suspend: alice may not unsuspend a RayJob that admitter has not admitted" in (
        await rayjobs.refused(rayjobs.patch("tune", UNSUSPEND)))
    autoscale = [{"op": "add", "path": "/spec/rayClusterSpec/enableInTreeAutoscaling",
                  "value": True}]
    assert "spec.rayClusterSpec.enableInTreeAutoscaling: is true" in (
        await rayjobs.refused(rayjobs.patch("tune", autoscale)))
    # A head, 7 worker groups and the submitter: 9 pod sets, one more than a Workload holds.
    too_many = with_worker_groups(queued_rayjob(namespace, "wide"), MAX_POD_SETS - 1)
    assert (f"spec: {MAX_POD_SETS + 1} pod sets (head, gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, "
            f"gpu-6, gpu-7, submitter) are more than a Workload holds "
            f"({MAX_POD_SETS})") in await rayjobs.refused(rayjobs.create(too_many))


async def test_a_rayjob_whose_workload_the_api_server_refuses_is_told_so_by_a_warning_event(
        kuberay_operator: None, api: Kube, namespace: str, kubeconfig: Path) -> None:
    """Made past the webhook (before it ran): the Workload CRD refuses 9 pod sets (the head,
    7 worker groups and the submitter), and the RayJob says why it waits."""
    await cluster_topology(api)
    await rayjobs_queue(api, namespace)
    job = await api.create(RAYJOBS, with_worker_groups(queued_rayjob(namespace, "wide"),
                                                       MAX_POD_SETS - 1))

    async def told() -> Obj | None:
        events = await api.request("GET", kube.EVENTS.path(namespace))
        return next((e for e in events["items"] if e["involvedObject"]["name"] == "wide"
                     and e["reason"] == Reason.REFUSED), None)

    async with in_process_controller(kubeconfig):
        event = await eventually(told, "the Warning Event on the refused RayJob")
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "RayJob"
    assert "its Workload cannot be created" in event["message"]
    assert f"Too many: {MAX_POD_SETS + 1}: must have at most {MAX_POD_SETS} items" in (
        event["message"])
    assert await workload_of(api, job) is None
    assert (await read(api, job))["spec"]["suspend"] is True
