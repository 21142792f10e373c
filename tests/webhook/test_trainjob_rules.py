"""The job webhooks on a TrainJob: created suspended, no unsuspend without an admission, no
resize of its own size fields (its pod sets live in a runtime the webhook does not read)
while admitted, queue moves only while pending; its JobSet, Trainer's child, left to it."""

from review_fixtures import (
    NAMESPACE,
    POLICY,
    admitted,
    changed,
    left_to_its_parent,
    queue_move_denial,
    request,
    standard_lookup,
    verdict,
)

from admitter.api.contract import QUEUE_LABEL
from admitter.webhook.jobs import SUSPEND_PATCH, mutate_job


def trainjob(nodes: int = 2, gpus: str = "1") -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "train", "namespace": NAMESPACE, "uid": "u-1",
                         "labels": {QUEUE_LABEL: "default"}},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": nodes,
                                 "resourcesPerNode": {"limits": {"nvidia.com/gpu": gpus}}}}}


async def test_a_queued_trainjob_is_created_suspended_without_its_runtime_being_read():
    made = await mutate_job(request(trainjob()), standard_lookup(), POLICY)
    assert made.allowed and made.patch[-len(SUSPEND_PATCH):] == SUSPEND_PATCH
    assert (await verdict(changed(trainjob(), suspend=True))).allowed


async def test_a_pending_trainjob_cannot_be_unsuspended_by_its_owner():
    pending = changed(trainjob(), suspend=True)
    denied = await verdict(changed(pending, suspend=False), pending)
    assert not denied.allowed
    assert "spec.suspend: alice may not unsuspend a TrainJob that admitter has not admitted" in (
        denied.message)


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


async def test_a_trainjob_may_change_queue_only_while_pending():
    denied = await queue_move_denial(trainjob())
    assert not denied.allowed and f"metadata.labels[{QUEUE_LABEL}]" in denied.message


async def test_the_jobset_trainer_makes_is_left_to_the_trainjob():
    child = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
             "metadata": {"name": "train", "namespace": NAMESPACE,
                          "labels": {QUEUE_LABEL: "default"},
                          "ownerReferences": [{"kind": "TrainJob", "name": "train",
                                               "uid": "u-1"}]},
             "spec": {"suspend": True, "replicatedJobs": []}}
    assert await left_to_its_parent(child, "trainer-controller")
