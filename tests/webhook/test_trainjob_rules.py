"""The job webhooks on a TrainJob: created suspended, no unsuspend without an admission, no
resize of its own size fields (its pod sets live in a runtime the webhook does not read)
while admitted, queue moves only while pending; its JobSet, Trainer's child, left to it."""

from review_fixtures import (
    NAMESPACE,
    admitted,
    changed,
    left_to_its_parent,
    verdict,
)

from admitter.api.contract import QUEUE_LABEL


def trainjob(nodes: int = 2, gpus: str = "1") -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "train", "namespace": NAMESPACE, "uid": "u-1",
                         "labels": {QUEUE_LABEL: "default"}},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": nodes,
                                 "resourcesPerNode": {"limits": {"nvidia.com/gpu": gpus}}}}}


async def test_a_trainjob_is_validated_without_its_runtime_being_read():
    """Suspended on create and not unsuspended before admission: `test_queued_kinds`."""
    assert (await verdict(changed(trainjob(), suspend=True))).allowed


async def test_an_admitted_trainjob_cannot_change_its_nodes_or_their_resources():
    running = admitted(trainjob())
    more_nodes = await verdict(admitted(trainjob(nodes=4)), running)
    assert not more_nodes.allowed
    assert ("spec.trainer.numNodes: the TrainJob is admitted with spec.trainer.numNodes 2; it "
            "cannot change to 4 while admitted") in more_nodes.message
    bigger = await verdict(admitted(trainjob(gpus="8")), running)
    assert not bigger.allowed
    assert ("spec.trainer.resourcesPerNode: the TrainJob is admitted with "
            "spec.trainer.resourcesPerNode {'limits': {'nvidia.com/gpu': '1'}}; it cannot "
            "change to {'limits': {'nvidia.com/gpu': '8'}}") in bigger.message
    pending = changed(trainjob(), suspend=True)
    assert (await verdict(changed(trainjob(nodes=4), suspend=True), pending)).allowed


async def test_the_jobset_trainer_makes_is_left_to_the_trainjob():
    child = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
             "metadata": {"name": "train", "namespace": NAMESPACE,
                          "labels": {QUEUE_LABEL: "default"},
                          "ownerReferences": [{"kind": "TrainJob", "name": "train",
                                               "uid": "u-1"}]},
             "spec": {"suspend": True, "replicatedJobs": []}}
    assert await left_to_its_parent(child, "trainer-controller")
