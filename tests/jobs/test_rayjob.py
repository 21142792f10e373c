"""RayJob behind the job interface: its head and worker groups as pod sets sized as KubeRay
sizes them, and the submitter KubeRay runs in each submission mode; the patches that start it
pinned and take the pin back, and when it has ended."""

import copy
import json

import pytest
from kind_objects import OWN, RACK, apply, pod_template

from admitter.api.contract import (
    ADMITTED_WORKLOAD_ANNOTATION,
    ORIGINAL_AFFINITY_ANNOTATION,
    QUEUE_LABEL,
    JobContract,
)
from admitter.controller.converge import equivalent
from admitter.controller.snapshot import _pods_ready
from admitter.jobs.rayjob import MADE_TEMPLATE_ANNOTATION, POD_LABEL, RayJob, worker_pods
from admitter.jobs.registry import job_of
from admitter.jobs.workloads import workload_for
from admitter.kube.objects import POD_SET_LABEL, pod_requests

HEAD_IMAGE = "rayproject/ray:2.46.0"
DEFAULT_SUBMITTER = {"name": "ray-job-submitter", "resources": {
    "limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}}
"""KubeRay's default submitter container, less the head's image it runs."""


def worker_group(name: str, gpus: int, **sizes: int) -> dict:
    return {"groupName": name, "rayStartParams": {}, **sizes,
            "template": pod_template(gpus, OWN)}


def rayjob(*groups: dict, **spec: object) -> dict:
    """A head and the given worker groups, suspended as admitter's webhook leaves it, with
    `spec` on top."""
    head = pod_template(0)
    head["spec"]["containers"][0]["image"] = HEAD_IMAGE
    return {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": "ns", "uid": "u-2", "resourceVersion": "7",
                     "labels": {QUEUE_LABEL: "team-a"}},
        "spec": {"suspend": True, "shutdownAfterJobFinishes": True, "entrypoint": "python t.py",
                 "rayClusterSpec": {
                     "headGroupSpec": {"rayStartParams": {}, "template": head},
                     "workerGroupSpecs": list(groups)},
                 **spec},
    }


def test_the_head_each_worker_group_and_the_submitter_are_pod_sets():
    job = rayjob(worker_group("gpu", 8, replicas=2, numOfHosts=2),
                 worker_group("cpu", 0, replicas=3))
    assert [(s.name, s.count) for s in RayJob().pod_sets(job)] == [
        ("head", 1), ("gpu", 4), ("cpu", 3), ("submitter", 1)]
    assert job_of(job).kind == "RayJob"


@pytest.mark.parametrize("mode", [None, "K8sJobMode"])
def test_a_rayjob_submitted_by_a_kubernetes_job_charges_kuberays_default_submitter(mode):
    """No mode is KubeRay's CRD default, K8sJobMode: the last pod set is the one pod of the
    submitter Job, of KubeRay's default container when the RayJob gives no template."""
    job = rayjob(worker_group("gpu", 8, replicas=2),
                 **({} if mode is None else {"submissionMode": mode}))
    *ray, submitter = RayJob().pod_sets(job)
    assert [s.name for s in ray] == ["head", "gpu"]
    assert (submitter.name, submitter.count) == ("submitter", 1)
    assert submitter.pod_spec["containers"] == [DEFAULT_SUBMITTER]
    assert pod_requests(submitter.pod_spec) == {"cpu": 0.5, "memory": 200 * 2**20}
    assert submitter.size_field == "spec.submissionMode"


def test_a_users_submitter_template_is_what_the_submitter_pod_set_charges():
    template = {"metadata": {"annotations": {"admitter.dev/topology-required": "host"}},
                "spec": {"containers": [{"name": "submit", "image": "mine",
                                         "resources": {"requests": {"cpu": "2"}}}],
                         "restartPolicy": "Never"}}
    job = rayjob(worker_group("gpu", 8, replicas=2), submitterPodTemplate=template)
    submitter = RayJob().pod_sets(job)[-1]
    assert submitter.name == "submitter"
    assert pod_requests(submitter.pod_spec) == {"cpu": 2}
    assert submitter.annotations == {"admitter.dev/topology-required": "host"}


def test_a_sidecar_submitter_is_charged_to_the_head_and_other_modes_run_no_submitter():
    """SidecarMode: KubeRay adds its default submitter container to the head pod (whatever
    submitterPodTemplate says); HTTPMode and InteractiveMode run no submitter pod."""
    plain = RayJob().pod_sets(rayjob(worker_group("gpu", 8, replicas=2),
                                     submissionMode="HTTPMode"))
    assert [s.name for s in plain] == ["head", "gpu"]
    sidecar = RayJob().pod_sets(rayjob(worker_group("gpu", 8, replicas=2),
                                       submissionMode="SidecarMode"))
    assert [s.name for s in sidecar] == ["head", "gpu"]
    assert sidecar[0].pod_spec["containers"] == [
        *plain[0].pod_spec["containers"], DEFAULT_SUBMITTER]
    assert pod_requests(sidecar[0].pod_spec)["cpu"] == pod_requests(plain[0].pod_spec)["cpu"] + (
        pod_requests({"containers": [DEFAULT_SUBMITTER]})["cpu"])
    assert sidecar[1] == plain[1]
    interactive = rayjob(worker_group("gpu", 8, replicas=2), submissionMode="InteractiveMode")
    assert RayJob().pod_sets(interactive) == plain


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
    assert [s.name for s in RayJob().pod_sets(job)] == ["head", "w", "submitter"]
    with pytest.raises(ValueError, match=r"workerGroupSpecs\[w\]\.replicas .* not -1"):
        worker_pods(worker_group("w", 1, replicas=-1))
    with pytest.raises(ValueError, match=r"spec\.rayClusterSpec is required"):
        RayJob().pod_sets({**rayjob(), "spec": {"clusterSelector": {"ray.io/cluster": "c"}}})


def test_a_rayjobs_workload_holds_all_its_pods_and_a_resize_is_not_what_was_admitted():
    job = rayjob(worker_group("gpu", 8, replicas=2))
    made = workload_for(job, JobContract(3600.0, True, "rack", None), priority=0)
    assert made["metadata"]["name"].startswith("rayjob-tune-")
    assert made["metadata"]["ownerReferences"][0]["apiVersion"] == "ray.io/v1"
    assert [(p["name"], p["count"]) for p in made["spec"]["podSets"]] == [
        ("head", 1), ("gpu", 2), ("submitter", 1)]
    assert made["spec"]["podSets"][-1]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    assert equivalent(job, made)
    assert not equivalent(rayjob(worker_group("gpu", 8, replicas=3)), made)
    # Started, its submitter template is admitter's: still what was admitted.
    started = apply(job, RayJob().run_patch(job, "rayjob-tune-abcde", RACK, place_pods=True))
    assert equivalent(started, made)
    # Submitted over HTTP, it would run no submitter: not what was admitted.
    assert not equivalent(rayjob(worker_group("gpu", 8, replicas=2), submissionMode="HTTPMode"),
                          made)


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
    assert [s.pod_spec.get("affinity") for s in kind.pod_sets(started)] == [None, OWN, None]
    # Every template names the RayJob, so KubeRay's pods do.
    templates = [started["spec"]["rayClusterSpec"]["headGroupSpec"]["template"],
                 started["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"],
                 started["spec"]["submitterPodTemplate"]]
    assert [t["metadata"]["labels"] for t in templates] == [{POD_LABEL: "tune"}] * 3

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
    assert [s.annotations for s in kind.pod_sets(job)][:2] == [
        {}, {"admitter.dev/topology-required": "rack"}]
    started = apply(job, kind.run_patch(job, "rayjob-tune-abcde", {}, {"gpu": RACK}))
    head = started["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    worker = started["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert "affinity" not in head
    (term,) = worker["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "topology.admitter.dev/rack", "operator": "In", "values": ["rack-2"]} in (
        term["matchExpressions"])


def test_a_rayjob_without_a_submitter_template_gets_kuberays_default_and_loses_it_at_restore():
    """The template KubeRay would make (its command KubeRay fills in, as for any template
    without one), of the head's image, pinned and labelled like the Ray pods' templates, so
    the submitter pod counts as the RayJob's and goes where its admission put it."""
    kind = RayJob()
    job = rayjob(worker_group("gpu", 8, replicas=2))
    started = apply(job, kind.run_patch(job, "rayjob-tune-abcde", RACK, place_pods=True))
    template = started["spec"]["submitterPodTemplate"]
    assert template["metadata"] == {
        "annotations": {MADE_TEMPLATE_ANNOTATION: "true"},
        "labels": {POD_SET_LABEL: "submitter", POD_LABEL: "tune"}}
    assert template["spec"]["containers"] == [{**DEFAULT_SUBMITTER, "image": HEAD_IMAGE}]
    assert template["spec"]["restartPolicy"] == "Never"
    (term,) = template["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": "topology.admitter.dev/rack", "operator": "In", "values": ["rack-2"]}]
    assert kind.pod_sets(started)[-1].pod_spec["containers"] == template["spec"]["containers"]

    suspended = apply(started, [{"op": "add", "path": "/spec/suspend", "value": True}])
    restored = apply(suspended, kind.restore_patch(suspended))
    assert restored["spec"] == job["spec"]
    # Started again (admitted anew before the restore), the template stays admitter's.
    again = apply(suspended, kind.run_patch(suspended, "rayjob-tune-abcde", RACK))
    assert again["spec"]["submitterPodTemplate"]["metadata"]["annotations"] == {
        MADE_TEMPLATE_ANNOTATION: "true"}
    again = apply(again, [{"op": "add", "path": "/spec/suspend", "value": True}])
    assert apply(again, kind.restore_patch(again))["spec"] == job["spec"]


def test_a_users_submitter_template_is_pinned_and_labelled_and_restored_as_it_was():
    kind = RayJob()
    template = {"metadata": {"labels": {"team": "a"}},
                "spec": {"containers": [{"name": "submit", "image": "mine",
                                         "resources": {"requests": {"cpu": "2"}}}],
                         "affinity": copy.deepcopy(OWN), "restartPolicy": "Never"}}
    job = rayjob(worker_group("gpu", 8, replicas=2), submitterPodTemplate=template)
    started = apply(job, kind.run_patch(job, "rayjob-tune-abcde", RACK, place_pods=True))
    written = started["spec"]["submitterPodTemplate"]
    assert written["metadata"] == {"labels": {
        "team": "a", POD_SET_LABEL: "submitter", POD_LABEL: "tune"}}
    assert written["spec"]["containers"] == template["spec"]["containers"]
    (term,) = written["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(term["matchExpressions"]) == 2   # the user's own term, narrowed
    assert kind.pod_sets(started)[-1].pod_spec["affinity"] == OWN
    suspended = apply(started, [{"op": "add", "path": "/spec/suspend", "value": True}])
    assert apply(suspended, kind.restore_patch(suspended))["spec"] == job["spec"]


@pytest.mark.parametrize("users_template", [None, {"spec": {"containers": [
    {"name": "submit", "image": "mine", "resources": {"requests": {"cpu": "2"}}}]}}])
def test_a_rayjob_started_before_its_submitter_was_a_pod_set_is_read_as_admitted(
        users_template):
    """Started by an admitter that charged no submitter (marked, its submitter template
    without the RayJob's label, or none): read as its Workload has it, so an upgrade evicts
    no running RayJob; once restored, it is charged its submitter like any other."""
    kind = RayJob()
    spec = {} if users_template is None else {"submitterPodTemplate": users_template}
    job = rayjob(worker_group("gpu", 8, replicas=2), **spec)
    before = workload_for(job, JobContract(3600.0, True, "rack", None), priority=0)
    started = apply(job, kind.run_patch(job, "rayjob-tune-abcde", RACK))
    running = copy.deepcopy(job)
    running["spec"]["suspend"] = False
    running["metadata"]["annotations"] = {
        ADMITTED_WORKLOAD_ANNOTATION: "rayjob-tune-abcde",
        ORIGINAL_AFFINITY_ANNOTATION: json.dumps([None, OWN])}
    assert [s.name for s in kind.pod_sets(running)] == ["head", "gpu"]
    assert [s.name for s in kind.pod_sets(started)] == ["head", "gpu", "submitter"]
    legacy = {**before, "spec": {**before["spec"], "podSets": before["spec"]["podSets"][:-1]}}
    assert equivalent(running, legacy)
    assert not equivalent(started, legacy)
    suspended = apply(running, [{"op": "add", "path": "/spec/suspend", "value": True}])
    restored = apply(suspended, kind.restore_patch(suspended))
    assert restored["spec"] == job["spec"]
    assert [s.name for s in kind.pod_sets(restored)] == ["head", "gpu", "submitter"]


@pytest.mark.parametrize(("mode", "submitter"), [("K8sJobMode", 1), ("HTTPMode", 0)])
def test_the_submitter_counts_as_ready_once_the_ray_cluster_is(mode, submitter):
    """KubeRay makes the submitter only once the cluster is up and counts it nowhere: a
    pods-ready deadline holds the gang to its Ray cluster."""
    job = rayjob(worker_group("gpu", 8, replicas=2), submissionMode=mode)
    head_ready = [{"type": "HeadPodReady", "status": "True"}]
    made = workload_for(job, JobContract(3600.0, True, "rack", None), priority=0)
    admitted = {**made, "status": {"admission": {"clusterQueue": "team-a"}}}
    expected = sum(p["count"] for p in made["spec"]["podSets"])   # as the controller counts
    for status, ready in [({}, 0),
                          ({"readyWorkerReplicas": 2}, 2),
                          ({"readyWorkerReplicas": 1, "conditions": head_ready}, 2),
                          ({"readyWorkerReplicas": 2, "conditions": head_ready},
                           3 + submitter)]:
        job["status"] = {"rayClusterStatus": status}
        assert RayJob().pods_ready(job) == ready
        assert _pods_ready(admitted, job, expected, {}) is (ready == expected)
    assert RayJob().pods_ready(job) == expected


def test_a_worker_group_named_as_the_submitter_is_refused_when_there_is_one():
    job = rayjob(worker_group("submitter", 1, replicas=1))
    ((field, why),) = RayJob().unsupported(job)
    assert field == "spec.rayClusterSpec.workerGroupSpecs[0].groupName"
    assert why.startswith("is 'submitter', the name of the submitter's pod set")
    assert RayJob().unsupported({**job, "spec": {**job["spec"], "submissionMode": "HTTPMode"}}
                                ) == []
