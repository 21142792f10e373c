"""Plain Pods admitter queued: which Pods are its, what each pass writes for one, and how its
admission reaches the Pod."""

from __future__ import annotations

import pytest
from fake_api import CLOCK, FakeApi, add, reconciler, settled_pass, team

from admitter.api.contract import JobContract
from admitter.api.workload import CONDITION_FINISHED, Reason
from admitter.controller.plain_pods import (
    PodStep,
    is_queued_pod,
    pod_step,
    started_pod_patch,
)
from admitter.core.model import GPU
from admitter.jobs.workloads import workload_for
from admitter.kube import client as kube
from admitter.kube.objects import ADMISSION_GATE, is_true, pinned_host

GATE = {"name": ADMISSION_GATE}
QUEUE = "admitter.dev/queue-name"
MARK = "admitter.dev/admitted-workload"


def pod(gated: bool = True, phase: str = "Pending", mark: bool = False, owner: str | None = None,
        labelled: bool = True, node: str | None = None, **spec) -> dict:
    meta: dict = {"name": "nb", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7",
                  "labels": {QUEUE: "default"} if labelled else {}, "annotations": {}}
    if mark:
        meta["annotations"][MARK] = "pod-nb-x"
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "uid": "u"}]
    body = {"containers": [{"name": "c", "resources": {"limits": {GPU: "2"}}}], **spec}
    if gated:
        body.setdefault("schedulingGates", [GATE])
    if node:
        body["nodeName"] = node
    return {"kind": "Pod", "metadata": meta, "spec": body, "status": {"phase": phase}}


def workload(admitted: bool = False, finished: bool = False) -> dict:
    status: dict = {"conditions": []}
    if admitted:
        status["admission"] = {"clusterQueue": "cq", "topologyDomain": {"rack": "r1"},
                               "nodeHints": [{"podSet": "main", "node": "gpu-3", "count": 1}]}
    if finished:
        status["conditions"].append({"type": CONDITION_FINISHED, "status": "True"})
    return {"metadata": {"name": "pod-nb-x", "namespace": "ns"}, "status": status}


def test_only_pods_admitter_gated_or_started_are_queued():
    assert is_queued_pod(pod())
    assert is_queued_pod(pod(gated=False, mark=True))
    assert not is_queued_pod(pod(gated=False)), "a queue label alone queues nothing"
    assert not is_queued_pod(pod(labelled=False))
    assert not is_queued_pod(pod(owner="Job")), "Job pods are queued through their Job"


@pytest.mark.parametrize("given, wl, step", [
    (pod(), workload(), PodStep.NONE),  # waiting
    (pod(), workload(admitted=True), PodStep.START),
    (pod(gated=False, mark=True, phase="Running"), workload(admitted=True), PodStep.NONE),
    (pod(gated=False, mark=True, phase="Running"), workload(), PodStep.STOP),  # evicted
    (pod(gated=False, mark=True, phase="Succeeded"), workload(admitted=True), PodStep.FINISH),
    (pod(gated=False, mark=True, phase="Failed"), workload(finished=True), PodStep.NONE),
])
def test_each_pass_takes_the_one_step_that_brings_pod_and_workload_together(given, wl, step):
    assert pod_step(given, wl) is step


def test_starting_lifts_only_admitters_gate_and_pins_the_pod_where_it_was_counted():
    other = {"name": "example.com/other"}
    term = {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}
    given = pod(schedulingGates=[other, GATE], affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}})
    patch = started_pod_patch(given, workload(admitted=True))
    assert patch["metadata"] == {"resourceVersion": "7", "annotations": {MARK: "pod-nb-x"}}
    assert patch["spec"]["schedulingGates"] == [other]
    (pinned,) = patch["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    # Only additions to the user's term: what Kubernetes allows on a gated Pod. The domain,
    # and the node its admission counted it on, as Jobs' pods are placed too.
    assert pinned == {
        "matchExpressions": [{"key": "gpu", "operator": "Exists"},
                             {"key": "rack", "operator": "In", "values": ["r1"]}],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-3"]}]}
    # With `podPlacement: Domain`, the domain only: Jobs' pods are not placed then, and
    # bound on that node first would leave the Pod Pending.
    (domain_only,) = started_pod_patch(given, workload(admitted=True), place_pods=False)[
        "spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert "matchFields" not in domain_only


def test_a_pods_workload_is_the_job_translation_with_one_pod_owned_by_the_pod():
    contract = JobContract(3600.0, True, None, None)
    made = workload_for(pod(), contract, priority=5)
    assert made["metadata"]["name"].startswith("pod-nb-")
    assert made["metadata"]["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "Pod", "name": "nb", "uid": "uid-1", "controller": True,
        "blockOwnerDeletion": True}]
    as_job = {"metadata": {**pod()["metadata"], "name": "nb"},
              "spec": {"parallelism": 1, "template": {"spec": pod()["spec"]}}}
    assert made["spec"] == workload_for(as_job, contract, priority=5)["spec"]
    assert made["spec"]["podSets"][0]["count"] == 1


def test_a_started_plain_pod_is_foreign_usage_unless_its_workload_is_admitted():
    """Counted once: through the admission while there is one; else (evicted and still
    running, or a mark forged on a Pod admitter never queued) where it runs."""
    api = FakeApi()
    caches = reconciler(api).caches
    started = pod(gated=False, mark=True, phase="Running", node="n1")
    add(api, caches.pods, kube.PODS, started)
    assert caches.foreign_usage() == {"n1": {GPU: 2}}, "a mark alone hides no Pod"
    owned = {"metadata": {"name": "pod-nb-x", "namespace": "ns",
                          "ownerReferences": [{"kind": "Pod", "name": "nb", "uid": "uid-1"}]},
             "spec": {}}
    add(api, caches.workloads, kube.WORKLOADS, {**owned, **workload(admitted=True),
                                                "metadata": owned["metadata"]})
    assert caches.foreign_usage() == {}
    add(api, caches.workloads, kube.WORKLOADS, {**owned, **workload(),
                                                "metadata": owned["metadata"]})
    assert caches.foreign_usage() == {"n1": {GPU: 2}}, "evicted, it runs until deleted"


# The controller's passes on an in-memory API --------------------------------------------

def queued_pod() -> dict:
    """As the Pod webhook leaves it: labelled, gated, not yet scheduled."""
    return pod(phase="Pending")


async def admitted_world():
    now = [CLOCK]
    api = FakeApi()
    controller = reconciler(api, lambda: now[0])
    team(api, controller, quota=8, n0=8)
    given = queued_pod()
    given["metadata"]["namespace"] = "ns"
    add(api, controller.caches.pods, kube.PODS, given)
    await settled_pass(controller)  # its Workload is made
    await settled_pass(controller)  # and admitted
    return api, controller, now, kube.PODS.path("ns", "nb")


async def test_an_admitted_pod_is_ungated_and_pinned_to_the_node_it_was_counted_on():
    api, _, _, path = await admitted_world()
    started = api.objects[path]
    assert started["spec"]["schedulingGates"] == []
    assert started["metadata"]["annotations"][MARK].startswith("pod-nb-")
    assert pinned_host(started) == "n0", "Jobs' pods are placed on their nodes too"
    told = [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"])
            for e in api.events()]
    assert ("Pod", "nb", Reason.ADMITTED) in told, "kubectl describe pod says it was admitted"


async def test_a_pod_that_never_runs_is_evicted_by_deleting_it():
    api, controller, now, path = await admitted_world()
    controller.caches.pods.observe(api.objects[path])  # still Pending, never ran
    now[0] += controller.settings.pods_ready_timeout + 1
    await settled_pass(controller)
    assert ("DELETE", path, {"preconditions": {"uid": "uid-1"}}) in api.writes
    assert path not in api.objects


async def test_a_pod_that_ended_releases_its_quota():
    api, controller, _, path = await admitted_world()
    done = {**api.objects[path], "status": {"phase": "Succeeded"}}
    controller.caches.pods.observe(api.put(kube.PODS, done))
    await settled_pass(controller)
    (wl,) = [obj for key, obj in api.objects.items() if "/workloads/" in key]
    assert is_true(wl, CONDITION_FINISHED) and not wl["status"].get("admission")
