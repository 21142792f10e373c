"""The job webhooks on a RayJob: the settings admitter cannot account for refused when a
request sets them, and a resize, a pod set added or the submission mode changed while admitted
named by its field (what every queued kind shares is in test_queued_kinds.py)."""

import copy
from collections.abc import Callable
from typing import Any

import pytest
from review_fixtures import NAMESPACE, changed, verdict

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION, QUEUE_LABEL
from admitter.api.workload import MAX_POD_SETS
from admitter.jobs.rayjob import MADE_TEMPLATE_ANNOTATION, POD_LABEL, submitter_container


def rayjob(**spec: object) -> dict:
    """A head and 2 one-GPU workers, as a user writes it, with `spec` on top."""
    def template(gpus: int) -> dict:
        return {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray", "resources": {
            "limits": {"nvidia.com/gpu": str(gpus)}}}]}}

    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "tune", "namespace": NAMESPACE, "uid": "u-1",
                         "labels": {QUEUE_LABEL: "default"}},
            "spec": {"entrypoint": "python tune.py", "shutdownAfterJobFinishes": True,
                     "rayClusterSpec": {
                         "headGroupSpec": {"rayStartParams": {}, "template": template(0)},
                         "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2,
                                               "rayStartParams": {},
                                               "template": template(1)}]},
                     **spec}}



async def test_a_rayjob_keeping_its_cluster_or_autoscaling_is_refused_naming_each_field():
    job = rayjob(suspend=True, shutdownAfterJobFinishes=False)
    job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    denied = await verdict(job)
    assert not denied.allowed
    assert "spec.shutdownAfterJobFinishes: is false: the Ray cluster would hold its quota " \
           "after the job ends; set it to true" in denied.message
    assert "spec.rayClusterSpec.enableInTreeAutoscaling: is true" in denied.message


async def test_a_rayjob_on_an_existing_cluster_is_refused():
    job = rayjob(suspend=True, clusterSelector={"ray.io/cluster": "shared"})
    del job["spec"]["rayClusterSpec"]
    denied = await verdict(job)
    assert not denied.allowed
    assert 'spec.clusterSelector: is {"ray.io/cluster": "shared"}' in denied.message


async def test_a_setting_made_before_the_webhook_does_not_block_later_updates_but_a_new_one_does():
    old = rayjob(suspend=True, shutdownAfterJobFinishes=False)
    assert (await verdict(changed(old, annotations={"note": "x"}), old)).allowed
    autoscaled = changed(old, annotations={"note": "x"})
    autoscaled["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    denied = await verdict(autoscaled, old)
    assert "enableInTreeAutoscaling" in denied.message
    assert "shutdownAfterJobFinishes" not in denied.message


def admitted_rayjob() -> dict[str, Any]:
    """The fixture's RayJob as the controller leaves it once admitted: unsuspended, marked,
    with the submitter template it writes, labelled with the RayJob."""
    job = changed(rayjob(), suspend=False,
                  annotations={ADMITTED_WORKLOAD_ANNOTATION: "rayjob-tune-abcde"})
    job["spec"]["submitterPodTemplate"] = {
        "metadata": {"labels": {POD_LABEL: "tune"},
                     "annotations": {MADE_TEMPLATE_ANNOTATION: "true"}},
        "spec": {"containers": [submitter_container()], "restartPolicy": "Never"}}
    return job


def grown_group(job: dict[str, Any]) -> None:
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = 4


def other_mode(job: dict[str, Any]) -> None:
    job["spec"]["submissionMode"] = "HTTPMode"


def one_more_group(job: dict[str, Any]) -> None:
    groups = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    groups.append({**copy.deepcopy(groups[0]), "groupName": "more"})


@pytest.mark.parametrize(("edit", "refusal"), [
    (grown_group, "spec.rayClusterSpec.workerGroupSpecs[0]: the RayJob is admitted with 2 pods "
                  "in pod set 'gpu'; it cannot change to 4 while admitted"),
    (other_mode, "spec.submissionMode: the RayJob is admitted with pod sets head, gpu, "
                 "submitter; they cannot change to head, gpu while admitted"),
    (one_more_group, "spec.rayClusterSpec.workerGroupSpecs[1]: the RayJob is admitted with pod "
                     "sets head, gpu, submitter; they cannot change to head, gpu, more, "
                     "submitter while admitted"),
])
async def test_an_admitted_rayjob_keeps_its_pod_sets_and_sizes_naming_the_field(
        edit: Callable[[dict[str, Any]], None], refusal: str) -> None:
    running = admitted_rayjob()
    edited = copy.deepcopy(running)
    edit(edited)
    denied = await verdict(edited, running)
    assert not denied.allowed
    assert refusal in denied.message
    # The same change while suspended and not admitted is the user's to make.
    waiting = changed(edited, suspend=True, annotations={ADMITTED_WORKLOAD_ANNOTATION: None})
    assert (await verdict(waiting, rayjob(suspend=True))).allowed


async def test_a_rayjob_of_more_pod_sets_than_a_workload_holds_is_refused_naming_count_and_limit():
    job = rayjob(suspend=True)
    groups = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    groups[:] = [{**copy.deepcopy(groups[0]), "groupName": f"g{index}"}
                 for index in range(1, MAX_POD_SETS - 1)]
    assert (await verdict(job)).allowed  # the head, 6 groups and the submitter: 8 pod sets
    groups.append({**copy.deepcopy(groups[0]), "groupName": f"g{MAX_POD_SETS - 1}"})
    denied = await verdict(job)
    assert not denied.allowed
    assert (f"spec: {MAX_POD_SETS + 1} pod sets (head, g1, g2, g3, g4, g5, g6, g7, submitter) "
            f"are more than a Workload holds ({MAX_POD_SETS})") in denied.message
    # Submitted over HTTP, it runs no submitter pod: the head and 7 groups.
    assert (await verdict({**job, "spec": {**job["spec"], "submissionMode": "HTTPMode"}})
            ).allowed
    # A group of no pods is no pod set.
    groups[-1]["replicas"] = 0
    assert (await verdict(job)).allowed
