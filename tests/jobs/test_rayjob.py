"""RayJob behind the job interface: its head and worker groups as pod sets sized as KubeRay
sizes them, the patches that start it pinned and take the pin back, and when it has ended."""

import pytest
from kind_objects import OWN, RACK, apply, pod_template

from admitter.api.contract import (
    ADMITTED_WORKLOAD_ANNOTATION,
    ORIGINAL_AFFINITY_ANNOTATION,
    QUEUE_LABEL,
    JobContract,
)
from admitter.controller.converge import equivalent
from admitter.jobs.rayjob import POD_LABEL, RayJob, worker_pods
from admitter.jobs.registry import job_of
from admitter.jobs.workloads import workload_for


def worker_group(name: str, gpus: int, **sizes: int) -> dict:
    return {"groupName": name, "rayStartParams": {}, **sizes,
            "template": pod_template(gpus, OWN)}


def rayjob(*groups: dict) -> dict:
    """A head and the given worker groups, suspended as admitter's webhook leaves it."""
    return {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": "ns", "uid": "u-2", "resourceVersion": "7",
                     "labels": {QUEUE_LABEL: "team-a"}},
        "spec": {"suspend": True, "shutdownAfterJobFinishes": True, "entrypoint": "python t.py",
                 "rayClusterSpec": {
                     "headGroupSpec": {"rayStartParams": {}, "template": pod_template(0)},
                     "workerGroupSpecs": list(groups)}},
    }


def test_the_head_and_each_worker_group_are_pod_sets():
    job = rayjob(worker_group("gpu", 8, replicas=2, numOfHosts=2),
                 worker_group("cpu", 0, replicas=3))
    assert [(s.name, s.count) for s in RayJob().pod_sets(job)] == [
        ("head", 1), ("gpu", 4), ("cpu", 3)]
    assert job_of(job).kind == "RayJob"


@pytest.mark.parametrize(("sizes", "pods"), [
    ({"replicas": 2, "minReplicas": 1, "maxReplicas": 4}, 2),
    ({"replicas": 0, "minReplicas": 2, "maxReplicas": 4}, 2),   # held at least minReplicas
    ({"replicas": 9, "minReplicas": 1, "maxReplicas": 4}, 4),   # at most maxReplicas
    ({"replicas": 1, "minReplicas": 5, "maxReplicas": 3}, 3),   # contradictory: maxReplicas
    ({"minReplicas": 1}, 1),                                    # replicas defaults to 0
    ({"replicas": 3, "suspend": True}, 0),                      # a suspended group runs none
])
def test_a_worker_group_counts_the_pods_kuberay_starts_it_with(sizes, pods):
    assert worker_pods(worker_group("w", 1, **sizes)) == pods


def test_a_worker_group_of_no_pods_is_no_pod_set_and_a_bad_size_is_named():
    job = rayjob(worker_group("idle", 1, replicas=0), worker_group("w", 1, replicas=1))
    assert [s.name for s in RayJob().pod_sets(job)] == ["head", "w"]
    with pytest.raises(ValueError, match=r"workerGroupSpecs\[w\]\.replicas .* not -1"):
        worker_pods(worker_group("w", 1, replicas=-1))
    with pytest.raises(ValueError, match=r"spec\.rayClusterSpec is required"):
        RayJob().pod_sets({**rayjob(), "spec": {"clusterSelector": {"ray.io/cluster": "c"}}})


def test_a_rayjobs_workload_holds_head_and_workers_and_a_resize_is_not_what_was_admitted():
    job = rayjob(worker_group("gpu", 8, replicas=2))
    made = workload_for(job, JobContract(3600.0, True, "rack", None), priority=0)
    assert made["metadata"]["name"].startswith("rayjob-tune-")
    assert made["metadata"]["ownerReferences"][0]["apiVersion"] == "ray.io/v1"
    assert [(p["name"], p["count"]) for p in made["spec"]["podSets"]] == [("head", 1), ("gpu", 2)]
    assert equivalent(job, made)
    assert not equivalent(rayjob(worker_group("gpu", 8, replicas=3)), made)


def test_starting_a_rayjob_pins_every_group_and_restoring_gives_back_the_users_own():
    kind = RayJob()
    job = rayjob(worker_group("gpu", 8, replicas=2))
    started = apply(job, kind.run_patch(job, "rayjob-tune-abcde", RACK))
    assert started["spec"]["suspend"] is False
    assert started["metadata"]["annotations"][ADMITTED_WORKLOAD_ANNOTATION] == "rayjob-tune-abcde"
    head = started["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    worker = started["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    (head_term,) = head["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert head_term["matchExpressions"] == [
        {"key": "topology.admitter.dev/rack", "operator": "In", "values": ["rack-2"]}]
    (worker_term,) = worker["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(worker_term["matchExpressions"]) == 2   # the user's own term, narrowed
    # Read while admitted, the pod sets are the user's own.
    assert [s.pod_spec.get("affinity") for s in kind.pod_sets(started)] == [None, OWN]
    # Every template names the RayJob, so KubeRay's pods do.
    templates = [started["spec"]["rayClusterSpec"]["headGroupSpec"]["template"],
                 started["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]]
    assert [t["metadata"]["labels"] for t in templates] == [{POD_LABEL: "tune"}] * 2

    suspended = apply(started, [{"op": "add", "path": "/spec/suspend", "value": True}])
    assert kind.is_suspended(suspended)
    restored = apply(suspended, kind.restore_patch(suspended))
    assert restored["spec"] == job["spec"]
    assert ORIGINAL_AFFINITY_ANNOTATION not in restored["metadata"]["annotations"]


@pytest.mark.parametrize(("status", "ended"), [
    ({}, None),
    ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, None),
    ({"jobDeploymentStatus": "Suspended"}, None),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"},
     (True, "the RayJob succeeded")),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"},
     (False, "the RayJob's Ray job ended STOPPED")),
    ({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"},
     (False, "the RayJob failed (DeadlineExceeded)")),
    ({"jobDeploymentStatus": "ValidationFailed"}, (False, "the RayJob failed (ValidationFailed)")),
])
def test_a_rayjob_has_finished_when_kuberay_says_its_deployment_ended(status, ended):
    assert RayJob().finished({**rayjob(), "status": status}) == ended


@pytest.mark.parametrize("metadata", [{}, {"labels": None}, {"labels": {"team": "a"}},
                                      {"annotations": {"note": "x"}}])
def test_the_pod_label_joins_whatever_metadata_a_template_has_and_leaves_with_the_restore(
        metadata: dict):
    kind = RayJob()
    group = worker_group("gpu", 1, replicas=1)
    group["template"]["metadata"] = metadata
    job = rayjob(group)
    started = apply(job, kind.run_patch(job, "rayjob-tune-abcde", RACK))
    labels = started["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["metadata"][
        "labels"]
    assert labels == {**(metadata.get("labels") or {}), POD_LABEL: "tune"}
    suspended = apply(started, [{"op": "add", "path": "/spec/suspend", "value": True}])
    restored = apply(suspended, kind.restore_patch(suspended))
    template = restored["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]
    assert (template.get("metadata") or {}).get("labels") == (metadata.get("labels") or None)


@pytest.mark.parametrize(("change", "field", "says"), [
    ({"clusterSelector": {"ray.io/cluster": "shared"}}, "spec.clusterSelector",
     'is {"ray.io/cluster": "shared"}: a queued RayJob cannot run on an existing Ray cluster'),
    ({"shutdownAfterJobFinishes": False}, "spec.shutdownAfterJobFinishes",
     "is false: the Ray cluster would hold its quota after the job ends; set it to true"),
    ({"shutdownAfterJobFinishes": None}, "spec.shutdownAfterJobFinishes", "is false"),
    ({"rayClusterSpec": {"enableInTreeAutoscaling": True, "workerGroupSpecs": []}},
     "spec.rayClusterSpec.enableInTreeAutoscaling", "is true: the autoscaler would change"),
    ({"rayClusterSpec": {"workerGroupSpecs": [worker_group("head", 1)]}},
     "spec.rayClusterSpec.workerGroupSpecs[0].groupName", "is 'head', the name of the head's"),
])
def test_a_rayjob_admitter_cannot_account_for_is_named_by_its_field(change, field, says):
    job = rayjob(worker_group("gpu", 1, replicas=1))
    job["spec"].update(change)
    if job["spec"]["shutdownAfterJobFinishes"] is None:
        del job["spec"]["shutdownAfterJobFinishes"]
    ((named, why),) = RayJob().unsupported(job)
    assert named == field and why.startswith(says), why


def test_a_rayjob_that_makes_and_takes_down_its_own_fixed_cluster_is_supported():
    assert RayJob().unsupported(rayjob(worker_group("gpu", 8, replicas=2))) == []


def test_a_worker_group_that_asks_for_a_rack_of_its_own_is_pinned_there_and_the_head_is_not():
    kind = RayJob()
    group = worker_group("gpu", 8, replicas=2)
    group["template"]["metadata"] = {"annotations": {"admitter.dev/topology-required": "rack"}}
    job = rayjob(group)
    assert [s.annotations for s in kind.pod_sets(job)] == [
        {}, {"admitter.dev/topology-required": "rack"}]
    started = apply(job, kind.run_patch(job, "rayjob-tune-abcde", {}, {"gpu": RACK}))
    head = started["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    worker = started["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert "affinity" not in head
    (term,) = worker["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "topology.admitter.dev/rack", "operator": "In", "values": ["rack-2"]} in (
        term["matchExpressions"])
