"""The copy of an admitted Job a worker runs: the manager's Job as it would start in place,
without the manager's own marks."""

import pytest

from admitter.api.contract import QUEUE_LABEL
from admitter.core.model import Node, Workload
from admitter.core.topology import CLUSTER
from admitter.fleet.dispatch import copy_manifest, kept_off_workers, progress
from admitter.fleet.worker import COPY_LABEL
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


def test_a_job_of_a_kind_not_dispatched_is_refused_by_name():
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "js", "namespace": "ml", "resourceVersion": "1"},
              "spec": {"suspend": True, "replicatedJobs": [{"name": "w", "replicas": 1,
                       "template": {"spec": {"parallelism": 1, "template": {"spec": {
                           "containers": [{"name": "c", "image": "x"}]}}}}}]}}
    with pytest.raises(ValueError, match="a JobSet is not created in worker clusters"):
        copy_manifest(jobset, _admitted({CLUSTER: "east"}))


def test_progress_counts_the_copys_pods():
    assert progress({"status": {"active": 3, "ready": 2}}) == (
        "3 active, 2 ready, 0 succeeded, 0 failed")


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
