"""A TrainJob in the controller: its pod sets resolved from the training runtimes the
controller caches, one naming a missing runtime waiting with the reason until it appears, and
its pods (labelled with its JobSet's name) counted as its own, never as its child JobSet's."""

from __future__ import annotations

import copy

from fake_api import CLOCK, FakeApi, add, reconciler, settled_pass, team

from admitter.api.contract import QUEUE_LABEL
from admitter.api.workload import Reason
from admitter.controller.snapshot import _pods_ready
from admitter.core.model import GPU
from admitter.jobs.jobset import JobSet
from admitter.jobs.trainjob import ANCESTOR_LABEL, TrainJob
from admitter.jobs.workloads import resource_of, workload_name
from admitter.kube import client as kube
from admitter.kube.objects import Obj

TRAINJOBS = resource_of(TrainJob())
JOBSETS = resource_of(JobSet())
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def training_runtime(kind: str, name: str, namespace: str | None = None) -> Obj:
    """One trainer job of `node` containers, as Trainer's torch runtimes have it."""
    meta: Obj = {"name": name, "uid": f"u-{name}"}
    if namespace is not None:
        meta["namespace"] = namespace
    node_job = {"name": "node", "template": {
        "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
        "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "torch"}]}}}}}
    return {"apiVersion": TrainJob.api_version, "kind": kind, "metadata": meta,
            "spec": {"mlPolicy": {"numNodes": 1},
                     "template": {"spec": {"replicatedJobs": [node_job]}}}}


def trainjob(name: str, runtime: str, runtime_kind: str = "ClusterTrainingRuntime") -> Obj:
    return {"apiVersion": TrainJob.api_version, "kind": TrainJob.kind,
            "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}",
                         "resourceVersion": "1", "labels": {QUEUE_LABEL: "default"}},
            "spec": {"suspend": True, "runtimeRef": {"name": runtime, "kind": runtime_kind},
                     "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {GPU: "2"}}}}}


async def test_a_trainjob_is_shaped_by_the_cached_runtime_and_one_without_waits_for_it() -> None:
    api = FakeApi()
    now = [CLOCK]
    controller = reconciler(api, lambda: now[0])
    caches = controller.caches
    team(api, controller, 8, node_a=8)
    add(api, caches.runtimes["TrainingRuntime"], kube.Kind(TrainJob.api_version,
                                                           "trainingruntimes", True),
        training_runtime("TrainingRuntime", "torch", "ns"))
    add(api, caches.jobs["TrainJob"], TRAINJOBS, trainjob("ready", "torch", "TrainingRuntime"))
    lost = add(api, caches.jobs["TrainJob"], TRAINJOBS, trainjob("lost", "torch"))
    for _ in range(2):
        await settled_pass(controller)
    ready = caches.jobs["TrainJob"].get("ns", "ready")
    assert ready is not None
    wl = caches.workloads.get("ns", workload_name(ready))
    assert wl is not None
    assert [(s["name"], s["count"], s["requests"]) for s in wl["spec"]["podSets"]] == [
        ("node", 2, {GPU: 2})]
    assert (wl.get("status") or {}).get("admission"), "admitted as one gang"
    assert caches.workloads.get("ns", workload_name(lost)) is None
    (told,) = [e["message"] for e in api.events() if e["involvedObject"]["name"] == "lost"
               and e["reason"] == Reason.UNREADABLE]
    assert "spec.runtimeRef: no ClusterTrainingRuntime 'torch'; the TrainJob waits" in told

    # The cluster's runtime appears: its watch wakes the TrainJob naming it, in the next pass
    # (well before the sweep that reads every job).
    now[0] += 1.0
    add(api, caches.runtimes["ClusterTrainingRuntime"],
        kube.Kind(TrainJob.api_version, "clustertrainingruntimes", False),
        training_runtime("ClusterTrainingRuntime", "torch"))
    assert controller.wakeup.is_set()
    await settled_pass(controller)
    assert controller._swept_at == CLOCK, "not a sweep: a second after the last one"
    assert caches.workloads.get("ns", workload_name(lost)) is not None


async def test_a_changed_runtime_wakes_only_the_trainjobs_naming_it() -> None:
    api = FakeApi()
    controller = reconciler(api)
    caches = controller.caches
    runtimes = kube.Kind(TrainJob.api_version, "trainingruntimes", True)
    for name, runtime in (("a", "torch"), ("b", "other"), ("c", "torch")):
        add(api, caches.jobs["TrainJob"], TRAINJOBS, trainjob(name, runtime, "TrainingRuntime"))
    elsewhere = trainjob("d", "torch", "TrainingRuntime")
    elsewhere["metadata"]["namespace"] = "other-ns"
    add(api, caches.jobs["TrainJob"], TRAINJOBS, elsewhere)
    controller.touched.clear()
    add(api, caches.runtimes["TrainingRuntime"], runtimes,
        training_runtime("TrainingRuntime", "torch", "ns"))
    assert controller.touched == {("TrainJob", "ns", "a"), ("TrainJob", "ns", "c")}


def test_two_controllers_in_one_process_each_read_their_own_runtimes() -> None:
    first, second = reconciler(FakeApi()), reconciler(FakeApi())
    cluster_runtimes = kube.Kind(TrainJob.api_version, "clustertrainingruntimes", False)
    runtime = training_runtime("ClusterTrainingRuntime", "torch")
    add(FakeApi(), first.caches.runtimes["ClusterTrainingRuntime"], cluster_runtimes, runtime)
    wide = copy.deepcopy(runtime)
    wide["spec"]["mlPolicy"]["numNodes"] = 3
    add(FakeApi(), second.caches.runtimes["ClusterTrainingRuntime"], cluster_runtimes, wide)
    job = trainjob("train", "torch")
    del job["spec"]["trainer"]["numNodes"]
    assert [s.count for s in first.caches.kinds.reader_of(job).pod_sets(job)] == [1]
    assert [s.count for s in second.caches.kinds.reader_of(job).pod_sets(job)] == [3]


def node_pod(name: str, trainjob_name: str) -> Obj:
    """A pod of the JobSet Trainer makes for a TrainJob (one of its child Jobs' pods)."""
    return {"metadata": {"name": name, "namespace": "ns", "labels": {NAME_LABEL: trainjob_name},
                         "ownerReferences": [{"kind": "Job", "name": f"{trainjob_name}-node-0"}]},
            "spec": {"nodeName": "node-a",
                     "containers": [{"name": "node", "resources": {"requests": {GPU: "2"}}}]},
            "status": {"phase": "Running"}}


def test_a_trainjobs_pods_count_for_it_not_for_its_labelled_child_jobset() -> None:
    api = FakeApi()
    caches = reconciler(api).caches
    caches.pods.observe(node_pod("train-node-0-0", "train"))
    caches.pods.observe(node_pod("train-node-0-1", "train"))
    child = {"apiVersion": JOBSETS.group_version, "kind": "JobSet",
             "metadata": {"name": "train", "namespace": "ns", "uid": "u-js",
                          "labels": {QUEUE_LABEL: "default"},
                          "ownerReferences": [{"kind": "TrainJob", "name": "train",
                                               "uid": "u-train"}]},
             "spec": {"replicatedJobs": []}}
    add(api, caches.jobs["JobSet"], JOBSETS, child)
    assert caches.foreign_usage() == {"node-a": {GPU: 4}}, "a child is no queued job itself"
    added = add(api, caches.jobs["TrainJob"], TRAINJOBS, trainjob("train", "torch"))
    assert caches.foreign_usage() == {}
    assert caches.bound_pods() == {("TrainJob", "ns", "train"): {"node-a": 2}}
    caches.jobs["TrainJob"]._apply({"type": "DELETED", "object": added})
    assert caches.foreign_usage() == {"node-a": {GPU: 4}} and caches.bound_pods() == {}


def test_a_plain_jobsets_pods_still_count_for_the_jobset() -> None:
    api = FakeApi()
    caches = reconciler(api).caches
    caches.pods.observe(node_pod("solo-node-0-0", "solo"))
    add(api, caches.jobs["JobSet"], JOBSETS,
        {"apiVersion": JOBSETS.group_version, "kind": "JobSet",
         "metadata": {"name": "solo", "namespace": "ns", "uid": "u-solo"}, "spec": {}})
    assert caches.bound_pods() == {("JobSet", "ns", "solo"): {"node-a": 1}}


def test_an_admitted_trainjob_is_ready_once_its_pods_run_though_trainer_counts_none() -> None:
    """Trainer v2.0 leaves `status.jobsStatus` empty: the pods on nodes tell readiness."""
    job = trainjob("train", "torch")
    wl = {"status": {"admission": {"clusterQueue": "team"}}}
    key = ("TrainJob", "ns", "train")
    assert not _pods_ready(wl, job, 2, {key: {"node-a": 1}})
    assert _pods_ready(wl, job, 2, {key: {"node-a": 1, "node-b": 1}})
    assert not _pods_ready(wl, job, 2, {("JobSet", "ns", "train"): {"node-a": 2}})


async def test_a_changed_runtime_reshapes_a_waiting_trainjob_and_never_evicts_a_running_one(
        ) -> None:
    """Trainer leaves a running TrainJob's JobSet as it started; a suspended one it makes
    anew from the runtime."""
    api = FakeApi()
    controller = reconciler(api)
    caches = controller.caches
    team(api, controller, 4, node_a=8)
    cluster_runtimes = kube.Kind(TrainJob.api_version, "clustertrainingruntimes", False)
    runtime = training_runtime("ClusterTrainingRuntime", "torch")
    add(api, caches.runtimes["ClusterTrainingRuntime"], cluster_runtimes, runtime)
    for name in ("first", "second"):  # 2 × 2 GPUs each: one fits the queue's 4
        add(api, caches.jobs["TrainJob"], TRAINJOBS, trainjob(name, "torch"))
    for _ in range(2):
        await settled_pass(controller)
    jobs = {job["metadata"]["name"]: job for job in caches.jobs["TrainJob"].items()}
    (running,) = [name for name, job in jobs.items() if not job["spec"]["suspend"]]
    (waiting,) = set(jobs) - {running}
    admitted = caches.workloads.get("ns", workload_name(jobs[running]))
    assert admitted is not None

    grown = copy.deepcopy(runtime)
    sidecar = copy.deepcopy(grown["spec"]["template"]["spec"]["replicatedJobs"][0])
    sidecar["name"], sidecar["template"]["metadata"] = "sidecar", {}
    grown["spec"]["template"]["spec"]["replicatedJobs"].append(sidecar)
    add(api, caches.runtimes["ClusterTrainingRuntime"], cluster_runtimes, grown)
    for _ in range(2):
        await settled_pass(controller)
    still = caches.workloads.get("ns", workload_name(jobs[running]))
    assert still is not None and still["metadata"]["uid"] == admitted["metadata"]["uid"]
    assert (still.get("status") or {}).get("admission"), "still admitted, not evicted"
    assert not caches.jobs["TrainJob"].get("ns", running)["spec"]["suspend"]
    reshaped = caches.workloads.get("ns", workload_name(jobs[waiting]))
    assert reshaped is not None
    assert [s["name"] for s in reshaped["spec"]["podSets"]] == ["node", "sidecar"]
