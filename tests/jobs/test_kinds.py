"""Each kind behind the one job interface: its pod sets, and the patches that start it pinned
to a domain and take the pin back, applied to the object as the API server would."""

import json

import pytest
from kind_objects import GPU, OWN, RACK, apply, pod_template

from admitter.api.contract import (
    ADMITTED_WORKLOAD_ANNOTATION,
    ORIGINAL_AFFINITY_ANNOTATION,
    QUEUE_LABEL,
    JobContract,
)
from admitter.api.quantity import kube_base_units
from admitter.controller.converge import equivalent
from admitter.jobs.batch_job import BatchJob
from admitter.jobs.interface import ClearsStartTime
from admitter.jobs.jobset import JobSet
from admitter.jobs.registry import job_of, reader_of
from admitter.jobs.workloads import JOB_NAME_LABEL, workload_for
from admitter.kube.objects import POD_SET_LABEL, pod_requests


def with_selector(template: dict, selector: dict) -> dict:
    template["spec"]["nodeSelector"] = selector
    return template


def jobset() -> dict:
    """1 leader + 2 replicas of 4 workers, the workers with an affinity of their own."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "ns", "uid": "u-1", "resourceVersion": "5",
                     "labels": {QUEUE_LABEL: "team-a"}},
        "spec": {"suspend": True, "replicatedJobs": [
            {"name": "leader", "template": {"spec": {"template": pod_template(1)}}},
            {"name": "workers", "replicas": 2, "template": {"spec": {
                "parallelism": 4, "completions": 4, "template": with_selector(
                    pod_template(8, OWN), {"pool": "a100"})}}},
        ]},
    }


def test_a_jobset_has_one_pod_set_per_replicated_job_of_replicas_times_parallelism():
    sets = JobSet().pod_sets(jobset())
    assert [(s.name, s.count) for s in sets] == [("leader", 1), ("workers", 8)]
    # Requests as kube-scheduler counts them: the native sidecar runs beside the container.
    assert pod_requests(sets[1].pod_spec) == pod_requests(
        {"containers": [{"resources": {"requests": {GPU: "8", "cpu": "1"}}}]})


def test_a_jobsets_workload_holds_every_pod_set_and_is_owned_by_the_jobset():
    made = workload_for(jobset(), JobContract(3600.0, True, "rack", None), priority=0)
    assert made["metadata"]["name"].startswith("jobset-train-")
    assert made["metadata"]["labels"] == {JOB_NAME_LABEL: "train"}  # found if orphaned
    assert made["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    assert made["metadata"]["ownerReferences"][0]["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    leader, workers = made["spec"]["podSets"]
    assert (leader["count"], workers["count"]) == (1, 8)
    assert kube_base_units(GPU, workers["requests"][GPU]) == 8
    assert workers["nodeSelectorTerms"] and "nodeSelectorTerms" not in leader
    # The topology request holds for the whole JobSet, leader and workers together.
    assert made["spec"]["topology"] == {"required": "rack"}
    assert equivalent(jobset(), made)


def test_a_resized_jobset_is_no_longer_what_was_admitted():
    made = workload_for(jobset(), JobContract(3600.0, True, None, None), priority=0)
    grown = jobset()
    grown["spec"]["replicatedJobs"][1]["replicas"] = 3
    assert not equivalent(grown, made)


def test_starting_a_jobset_pins_every_pod_set_and_restoring_gives_back_the_users_own():
    kind = JobSet()
    started = apply(jobset(), kind.run_patch(jobset(), "jobset-train-abcde", RACK))
    assert started["spec"]["suspend"] is False
    assert started["metadata"]["resourceVersion"] == "5"
    assert started["metadata"]["annotations"][ADMITTED_WORKLOAD_ANNOTATION] == "jobset-train-abcde"
    # Through nodeSelector, the one placement field JobSet lets a suspended JobSet change;
    # the user's own selector and affinity are kept.
    leader, workers = (r["template"]["spec"]["template"]["spec"]
                       for r in started["spec"]["replicatedJobs"])
    assert leader["nodeSelector"] == RACK
    assert workers["nodeSelector"] == {"pool": "a100", **RACK}
    assert workers["affinity"] == OWN
    # Read while admitted, the pod sets are still the user's own.
    assert [s.pod_spec.get("nodeSelector") for s in kind.pod_sets(started)] == [
        None, {"pool": "a100"}]
    suspended = apply(started, [])
    suspended["spec"]["suspend"] = True
    restored = apply(suspended, kind.restore_patch(suspended))
    assert restored["spec"] == {**jobset()["spec"]}
    assert ORIGINAL_AFFINITY_ANNOTATION not in restored["metadata"]["annotations"]


def test_a_replicated_job_pinned_to_a_rack_of_its_own_gets_that_rack_and_its_template_asks():
    kind = JobSet()
    asking = jobset()
    workers = asking["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    workers["metadata"] = {"annotations": {"admitter.dev/topology-required": "rack"}}
    assert [s.annotations for s in kind.pod_sets(asking)] == [
        {}, {"admitter.dev/topology-required": "rack"}]
    own = {"topology.admitter.dev/rack": "rack-5"}
    started = apply(asking, kind.run_patch(asking, "jobset-train-abcde", {}, {"workers": own}))
    leader, pinned = (r["template"]["spec"]["template"]["spec"]
                      for r in started["spec"]["replicatedJobs"])
    assert "nodeSelector" not in leader
    assert pinned["nodeSelector"] == {"pool": "a100", **own}
    contract = JobContract(min_runtime=0, resumable=True, topology_required=None,
                           topology_preferred=None, pod_set_topology=((None, None), ("rack", None)))
    made = workload_for(asking, contract, 0)["spec"]["podSets"]
    assert "topology" not in made[0] and made[1]["topology"] == {"required": "rack"}


def test_a_jobs_original_affinity_annotation_keeps_the_one_templates_affinity():
    job = {"kind": "Job", "metadata": {"name": "j", "resourceVersion": "1", "annotations": {}},
           "spec": {"suspend": True, "parallelism": 2,
                    "template": pod_template(1, OWN)}}
    ops = BatchJob().run_patch(job, "job-j-1", RACK)
    started = apply(job, ops)
    assert json.loads(started["metadata"]["annotations"][ORIGINAL_AFFINITY_ANNOTATION]) == OWN


@pytest.mark.parametrize(("conditions", "ended"), [
    ([], None),
    ([{"type": "Completed", "status": "True"}], (True, "the JobSet completed")),
    ([{"type": "Failed", "status": "True"}], (False, "the JobSet failed")),
    ([{"type": "Completed", "status": "False"}], None),
])
def test_a_jobset_has_finished_when_its_conditions_say_so(conditions, ended):
    assert JobSet().finished({**jobset(), "status": {"conditions": conditions}}) == ended


def test_only_a_job_clears_its_start_time_and_kinds_are_found_by_their_kind():
    assert isinstance(job_of({"kind": "Job"}), ClearsStartTime)
    assert not isinstance(job_of(jobset()), ClearsStartTime)
    assert reader_of({"kind": "Pod"}).workload_prefix == "pod"
    assert job_of({}).kind == "Job"


def test_a_jobsets_ready_pods_are_its_ready_or_done_jobs_times_their_pods():
    js = jobset()
    js["status"] = {"replicatedJobsStatus": [
        {"name": "leader", "ready": 1, "succeeded": 0},
        {"name": "workers", "ready": 1, "succeeded": 1},
    ]}
    assert JobSet().pods_ready(js) == 1 + 2 * 4
    assert BatchJob().pods_ready({"status": {"ready": 2, "succeeded": 1}}) == 3


def templates_of(obj: dict) -> list[dict]:
    """Every pod template of a Job, JobSet or RayJob."""
    spec = obj["spec"]
    if "replicatedJobs" in spec:
        return [r["template"]["spec"]["template"] for r in spec["replicatedJobs"]]
    if "rayClusterSpec" in spec:
        cluster = spec["rayClusterSpec"]
        submitter = [spec["submitterPodTemplate"]] if "submitterPodTemplate" in spec else []
        return [cluster["headGroupSpec"]["template"],
                *(group["template"] for group in cluster["workerGroupSpecs"]), *submitter]
    return [spec["template"]]


def rayjob_of_two_groups() -> dict:
    worker = {"groupName": "gpu", "replicas": 2,
              "template": {"metadata": {"labels": {"team": "a"}}, **pod_template(8)}}
    head = pod_template(0)
    head["spec"]["containers"][0]["image"] = "rayproject/ray"
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "tune", "namespace": "ns", "uid": "u", "resourceVersion": "3"},
            "spec": {"suspend": True, "shutdownAfterJobFinishes": True, "rayClusterSpec": {
                "headGroupSpec": {"template": head}, "workerGroupSpecs": [worker]}}}


@pytest.mark.parametrize("job", [
    jobset(),
    {"kind": "Job", "metadata": {"name": "j", "resourceVersion": "1"},
     "spec": {"suspend": True, "parallelism": 2, "template": pod_template(1)}},
    rayjob_of_two_groups(),
], ids=["jobset", "job", "rayjob"])
def test_placing_pods_labels_each_template_with_its_pod_set_and_restoring_takes_it_off(job):
    """The placement webhook gates the pods whose template names their pod set; the user's
    own labels stay, and a restored job's templates are the user's again."""
    kind = job_of(job)
    started = apply(job, kind.run_patch(job, "w", RACK, place_pods=True))
    names = [pod_set.name for pod_set in kind.pod_sets(job)]
    labels = [t["metadata"]["labels"] for t in templates_of(started)]
    assert [label[POD_SET_LABEL] for label in labels] == names
    unplaced = apply(job, kind.run_patch(job, "w", RACK))
    assert all(POD_SET_LABEL not in (t.get("metadata") or {}).get("labels", {})
               for t in templates_of(unplaced))
    suspended = apply(started, [{"op": "add", "path": "/spec/suspend", "value": True}])
    restored = apply(suspended, kind.restore_patch(suspended))
    assert restored["spec"] == job["spec"]
