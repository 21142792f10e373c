"""The job webhooks on a JobSet: the same rules as a Job's, read through its pod sets, and
the child Jobs its controller makes left to the JobSet."""

import copy

from review_fixtures import (
    NAMESPACE,
    admitted,
    changed,
    left_to_its_parent,
    verdict,
)

from admitter.api.contract import QUEUE_LABEL
from admitter.api.workload import MAX_POD_SETS


def jobset(workers: int = 4, gpus: int = 1) -> dict:
    """1 leader + 2 replicas of `workers` workers, as a user writes it."""
    def replicated(name: str, replicas: int, pods: int) -> dict:
        return {"name": name, "replicas": replicas, "template": {"spec": {
            "parallelism": pods, "completions": pods, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "trainer",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}}

    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": NAMESPACE, "uid": "u-1",
                         "labels": {QUEUE_LABEL: "default"}},
            "spec": {"replicatedJobs": [replicated("leader", 1, 1),
                                        replicated("workers", 2, workers)]}}


async def test_an_admitted_jobset_cannot_grow_a_replicated_job_or_its_pods():
    running = admitted(jobset())
    more_workers = await verdict(admitted(jobset(workers=8)), running)
    assert not more_workers.allowed
    assert ("spec.replicatedJobs[1]: the JobSet is admitted with 8 pods in pod set 'workers'; "
            "it cannot change to 16 while admitted") in more_workers.message
    bigger = await verdict(admitted(jobset(gpus=8)), running)
    assert "spec.replicatedJobs[0].template.spec.template.spec: the JobSet is admitted for " \
           "pods requesting {'nvidia.com/gpu': '1'}" in bigger.message
    pending = changed(jobset(), suspend=True)
    assert (await verdict(changed(jobset(workers=8), suspend=True), pending)).allowed


async def test_the_child_jobs_a_jobsets_controller_makes_are_left_to_the_jobset():
    child = {"apiVersion": "batch/v1", "kind": "Job",
             "metadata": {"name": "train-workers-0", "namespace": NAMESPACE,
                          "labels": {QUEUE_LABEL: "default"},
                          "ownerReferences": [{"kind": "JobSet", "name": "train", "uid": "u-1"}]},
             "spec": {"suspend": True, "template": jobset()["spec"]["replicatedJobs"][0][
                 "template"]["spec"]["template"]}}
    assert await left_to_its_parent(child, "jobset-controller")


async def test_a_replicated_jobs_topology_names_a_level_or_is_denied_naming_its_template():
    wanted = jobset()
    template = wanted["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    template["metadata"] = {"annotations": {"admitter.dev/topology-required": "rackk"}}
    denied = await verdict(changed(wanted, suspend=True))
    assert not denied.allowed
    assert ("spec.replicatedJobs[1].template.spec.template.metadata.annotations: annotation "
            "admitter.dev/topology-required='rackk' is not a topology level") in denied.message
    template["metadata"]["annotations"]["admitter.dev/topology-required"] = (
        "topology.admitter.dev/rack")
    assert (await verdict(changed(wanted, suspend=True))).allowed


async def test_a_jobset_of_more_replicated_jobs_than_a_workload_holds_is_refused():
    wide = changed(jobset(), suspend=True)
    leader = wide["spec"]["replicatedJobs"][0]
    wide["spec"]["replicatedJobs"] = [{**copy.deepcopy(leader), "name": f"part-{index}"}
                                      for index in range(MAX_POD_SETS + 1)]
    denied = await verdict(wide)
    assert not denied.allowed
    assert (f"spec.replicatedJobs: {MAX_POD_SETS + 1} pod sets (part-0, part-1, part-2, "
            f"part-3, part-4, part-5, part-6, part-7, part-8) are more than a Workload holds "
            f"({MAX_POD_SETS})") in denied.message
    # One made before the webhook refused it stays manageable: what it had is not refused.
    relabelled = changed(wide, annotations={"note": "x"})
    assert (await verdict(relabelled, wide)).allowed
