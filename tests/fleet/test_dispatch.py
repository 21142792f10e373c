"""The copy of an admitted Job, JobSet or RayJob a worker runs: the manager's job as it would
start in place, without the manager's own marks."""

import pytest

from admitter.api.contract import QUEUE_LABEL
from admitter.controller.dispatching import copy_job_key
from admitter.core.model import Node, Workload
from admitter.core.topology import CLUSTER
from admitter.fleet.dispatch import copy_manifest, kept_off_workers, progress
from admitter.fleet.worker import COPY_LABEL
from admitter.jobs.rayjob import POD_LABEL as RAYJOB_POD_LABEL
from admitter.kube.core_values import core_node, core_workload
from admitter.testing import BLOCK_LABEL

from builders.kube import JobWrapper

UID = "3f9c-workload-uid"


def _as_stored(job: dict) -> dict:
    """The Job as the manager's API server and Job controller leave it."""
    job["metadata"].update(uid="job-uid", resourceVersion="41")
    job["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid"}}
    job["spec"]["manualSelector"] = False
    job["spec"]["template"]["metadata"]["labels"] = {
        "batch.kubernetes.io/controller-uid": "job-uid", "controller-uid": "job-uid",
        "batch.kubernetes.io/job-name": "train", "job-name": "train", "team": "vision"}
    job["status"] = {"conditions": [{"type": "Suspended", "status": "True"}]}
    return job


def _admitted(domain: dict[str, str]) -> dict:
    return {"metadata": {"name": "job-train-1a2b3", "namespace": "ml", "uid": UID},
            "status": {"admission": {"clusterQueue": "team", "topologyDomain": domain,
                                     "nodeHints": [{"podSet": "main", "node": "e-n1",
                                                    "count": 2}]}}}


def test_the_copy_is_the_job_started_in_place_without_the_managers_marks():
    job = _as_stored(JobWrapper("train", "ml").pods(2).label("team", "vision").obj())
    copy = copy_manifest(job, _admitted({CLUSTER: "east", BLOCK_LABEL: "block-1"}))

    assert copy["metadata"]["name"] == "train" and copy["metadata"]["namespace"] == "ml"
    assert copy["metadata"]["labels"] == {"team": "vision", COPY_LABEL: UID}
    assert QUEUE_LABEL not in copy["metadata"]["labels"]
    assert "uid" not in copy["metadata"] and "resourceVersion" not in copy["metadata"]
    assert "status" not in copy
    spec = copy["spec"]
    assert spec["suspend"] is False
    assert "selector" not in spec and "manualSelector" not in spec
    assert spec["template"]["metadata"]["labels"] == {"team": "vision", COPY_LABEL: UID}
    (term,) = spec["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    # pinned to the block; the cluster label is the manager's, the worker's nodes lack it
    assert term["matchExpressions"] == [
        {"key": BLOCK_LABEL, "operator": "In", "values": ["block-1"]}]
    assert job["spec"]["suspend"] is True  # the manager's own job is left as it was


def test_a_gang_placed_only_by_cluster_may_go_anywhere_in_its_worker():
    job = _as_stored(JobWrapper("train", "ml").pods(3).obj())
    copy = copy_manifest(job, _admitted({CLUSTER: "east"}))
    assert "affinity" not in copy["spec"]["template"]["spec"]


def _jobset() -> dict:
    """A JobSet of two replicated jobs as the manager's API server stores it."""
    def replicated(name: str, gpus: str) -> dict:
        return {"name": name, "replicas": 2, "template": {
            "metadata": {"labels": {"role": name}},
            "spec": {"parallelism": 1, "completions": 1, "template": {
                "metadata": {"labels": {"team": "vision"}},
                "spec": {"containers": [{"name": "c", "image": "x",
                                         "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
                         "nodeSelector": {"pool": "a100"}}}}}}

    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ml", "uid": "js-uid",
                         "resourceVersion": "7", "labels": {QUEUE_LABEL: "default"}},
            "spec": {"suspend": True, "replicatedJobs": [replicated("workers", "8"),
                                                          replicated("driver", "1")]},
            "status": {"conditions": [{"type": "Suspended", "status": "True"}]}}


def test_a_jobsets_copy_is_unsuspended_pinned_and_labelled_on_its_pods_not_its_child_jobs():
    copy = copy_manifest(_jobset(), _admitted({CLUSTER: "east", BLOCK_LABEL: "block-1"}))

    assert copy["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and copy["kind"] == "JobSet"
    assert copy["metadata"]["labels"] == {COPY_LABEL: UID}
    assert "status" not in copy and "uid" not in copy["metadata"]
    assert copy["spec"]["suspend"] is False
    for replicated in copy["spec"]["replicatedJobs"]:
        # the child Jobs carry the replicated job's labels: no copy label, or they would
        # count as copies of their own
        assert COPY_LABEL not in replicated["template"]["metadata"]["labels"]
        pod = replicated["template"]["spec"]["template"]
        assert pod["metadata"]["labels"] == {"team": "vision", COPY_LABEL: UID}
        # pinned through the nodeSelector (JobSet's webhook), beside the user's own
        assert pod["spec"]["nodeSelector"] == {"pool": "a100", BLOCK_LABEL: "block-1"}


def _rayjob() -> dict:
    """A RayJob of a CPU head and two 8-GPU workers as the manager's API server stores it."""
    def template(limits: dict[str, str]) -> dict:
        return {"metadata": {"labels": {"team": "vision"}},
                "spec": {"containers": [{"name": "ray", "image": "rayproject/ray",
                                         "resources": {"limits": limits}}]}}

    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "tune", "namespace": "ml", "uid": "ray-uid",
                         "resourceVersion": "9", "labels": {QUEUE_LABEL: "default"}},
            "spec": {"suspend": True, "shutdownAfterJobFinishes": True,
                     "entrypoint": "python t.py",
                     "rayClusterSpec": {
                         "headGroupSpec": {"rayStartParams": {},
                                           "template": template({"cpu": "1"})},
                         "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2,
                                               "rayStartParams": {},
                                               "template": template({"nvidia.com/gpu": "8"})}]}},
            "status": {"jobDeploymentStatus": "Suspended"}}


def test_a_rayjobs_copy_is_unsuspended_pinned_and_its_ray_pods_name_it_and_the_workload():
    copy = copy_manifest(_rayjob(), _admitted({CLUSTER: "east", BLOCK_LABEL: "block-1"}))

    assert copy["apiVersion"] == "ray.io/v1" and copy["kind"] == "RayJob"
    assert copy["metadata"]["name"] == "tune" and copy["metadata"]["namespace"] == "ml"
    assert copy["metadata"]["labels"] == {COPY_LABEL: UID}
    assert "status" not in copy and copy["spec"]["suspend"] is False
    assert copy["spec"]["entrypoint"] == "python t.py"
    cluster = copy["spec"]["rayClusterSpec"]
    submitter = copy["spec"]["submitterPodTemplate"]  # KubeRay's default, of the head's image
    assert [(c["name"], c["image"]) for c in submitter["spec"]["containers"]] == [
        ("ray-job-submitter", "rayproject/ray")]
    ours = {COPY_LABEL: UID, RAYJOB_POD_LABEL: "tune"}
    for template, own in ((cluster["headGroupSpec"]["template"], {"team": "vision"}),
                          (cluster["workerGroupSpecs"][0]["template"], {"team": "vision"}),
                          (submitter, {})):
        labels = template["metadata"]["labels"]
        assert labels == {**own, **ours}
        (term,) = template["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        # pinned to the block, not the cluster: the worker's nodes carry no cluster label
        assert term["matchExpressions"] == [
            {"key": BLOCK_LABEL, "operator": "In", "values": ["block-1"]}]
        pod = {"kind": "Pod", "metadata": {"namespace": "ml", "labels": labels}}
        assert copy_job_key(pod) == ("RayJob", "ml", "tune")  # its pods lead to the RayJob
    assert copy_job_key(copy) == ("RayJob", "ml", "tune")


def test_a_rayjob_whose_head_names_no_image_is_not_copied_naming_the_field():
    """KubeRay's default submitter runs the head's image: without one it could not run."""
    job = _rayjob()
    del job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0][
        "image"]
    with pytest.raises(ValueError, match="nothing at /spec/rayClusterSpec/headGroupSpec/"
                                         "template/spec/containers/0/image"):
        copy_manifest(job, _admitted({CLUSTER: "east"}))


def test_a_job_of_a_kind_not_dispatched_is_refused_by_name():
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "t", "namespace": "ml", "resourceVersion": "1"},
                "spec": {"suspend": True}}
    with pytest.raises(ValueError, match="a TrainJob is not created in worker clusters; only "
                                         "Job, JobSet, RayJob"):
        copy_manifest(trainjob, _admitted({CLUSTER: "east"}))


def test_progress_counts_the_copys_pods():
    assert progress({"kind": "Job", "apiVersion": "batch/v1",
                     "status": {"active": 3, "ready": 2}}) == (
        "3 active, 2 ready, 0 succeeded, 0 failed")


def test_a_jobsets_progress_counts_its_jobs_per_replicated_job():
    jobset = {**_jobset(), "status": {"replicatedJobsStatus": [
        {"name": "workers", "active": 2, "ready": 2},
        {"name": "driver", "ready": 0, "succeeded": 1}]}}
    assert progress(jobset) == ("workers: 2 active, 2 ready, 0 succeeded, 0 failed Jobs; "
                                "driver: 0 active, 0 ready, 1 succeeded, 0 failed Jobs")
    assert progress({**_jobset(), "status": {}}) == "no Jobs yet"


def test_a_rayjobs_progress_is_kuberays_statuses_and_its_ray_cluster():
    running = {**_rayjob(), "status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING",
                                       "rayClusterName": "tune-x7k2p"}}
    assert progress(running) == "Running: Ray cluster tune-x7k2p, Ray job RUNNING"
    assert progress({**_rayjob(), "status": {}}) == (
        "Initializing: Ray cluster not made yet, Ray job not submitted")


def _core(pod_set: dict) -> Workload:
    return core_workload({"metadata": {"name": "js", "namespace": "ml"}, "spec": {
        "queueName": "q", "podSets": [{"name": "main", "count": 2,
                                       "requests": {"nvidia.com/gpu": "8"}, **pod_set}]}},
        "team", True)


def _node(name: str, labels: dict) -> Node:
    return core_node({"metadata": {"name": name, "labels": labels},
                      "status": {"allocatable": {"nvidia.com/gpu": "8"}}}, {})


def test_a_kind_not_dispatched_is_placed_on_no_workers_node():
    kept = kept_off_workers(_core({}), ["east", "west"])
    (pod_set,) = kept.pod_sets
    assert not pod_set.admits(_node("e-n1", {CLUSTER: "east"}))
    assert pod_set.admits(_node("m-n1", {CLUSTER: "here"}))
    assert pod_set.admits(_node("m-n2", {}))


def test_its_own_node_affinity_still_holds_in_every_term():
    terms = [{"matchExpressions": [{"key": "pool", "operator": "In", "values": [name]}]}
             for name in ("a", "b")]
    kept = kept_off_workers(_core({"nodeSelectorTerms": terms}), ["east"])
    (pod_set,) = kept.pod_sets
    assert pod_set.admits(_node("m-a", {"pool": "a"}))
    assert pod_set.admits(_node("m-b", {"pool": "b"}))
    assert not pod_set.admits(_node("m-c", {"pool": "c"}))
    assert not pod_set.admits(_node("e-a", {"pool": "a", CLUSTER: "east"}))


def test_a_copys_pods_and_the_copy_lead_to_the_managers_job_of_their_kind():
    def pod(labels: dict) -> dict:
        return {"kind": "Pod", "metadata": {"name": "p", "namespace": "ml",
                                            "labels": {COPY_LABEL: UID, **labels}}}

    jobset_pod = pod({"jobset.sigs.k8s.io/jobset-name": "train",
                      "batch.kubernetes.io/job-name": "train-workers-0"})
    assert copy_job_key(jobset_pod) == ("JobSet", "ml", "train")
    assert copy_job_key(pod({"batch.kubernetes.io/job-name": "train"})) == ("Job", "ml", "train")
    assert copy_job_key({**_jobset(), "metadata": {"name": "train", "namespace": "ml",
                                                   "labels": {COPY_LABEL: UID}}}) == (
        "JobSet", "ml", "train")
    assert copy_job_key(pod({})) is None
    assert copy_job_key({"kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}}) is None
