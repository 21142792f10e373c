"""What the controller's caches keep of a job (`JobProjection`) reads exactly as the whole job
does, for every kind: its pod sets and what they charge and require, its contract and the
Workload built for it, and the patches that suspend, start and restore it; and what they keep
of a Pod (`PodProjection`) as the whole Pod."""

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from kind_objects import GPU

from admitter.api.contract import (
    ORIGINAL_AFFINITY_ANNOTATION,
    QUEUE_LABEL,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from admitter.controller.converge import equivalent
from admitter.jobs.claims import DeviceClaims
from admitter.jobs.interface import ClearsStartTime, RefusesSpecs, ShowsProgress
from admitter.jobs.projection import JobProjection, PodProjection, project_pod_spec
from admitter.jobs.registry import KINDS, JobKinds
from admitter.jobs.workloads import job_contract, priority_class_of, workload_for
from admitter.kube.objects import (
    PLACEMENT_GATE,
    is_gated,
    pinned_host,
    placement_constraints,
    pod_requests,
    without_gate,
)

LEVELS = ["topology.admitter.dev/rack", "kubernetes.io/hostname"]
names = st.sampled_from(["a", "b", "gpu", "main", "node"])
quantities = st.sampled_from(["1", "2", "8", "500m", "1Gi"])
resources = st.dictionaries(st.sampled_from([GPU, "cpu"]), quantities, min_size=1, max_size=2)
unread = st.fixed_dictionaries({}, optional={
    "image": st.just("registry.invalid/train"),
    "command": st.lists(st.sampled_from(["torchrun", "train.py", "--fast"]), max_size=3),
    "env": st.lists(st.fixed_dictionaries({"name": names, "value": names}), max_size=2),
    "volumeMounts": st.just([{"name": "data", "mountPath": "/data"}])})


@st.composite
def containers(draw: st.DrawFn, init: bool = False) -> list[dict]:
    found = []
    for name in draw(st.lists(names, min_size=0 if init else 1, max_size=2, unique=True)):
        container = {"name": name, **draw(unread), "resources": draw(st.fixed_dictionaries(
            {"requests": resources}, optional={"limits": resources}))}
        if init and draw(st.booleans()):
            container["restartPolicy"] = "Always"
        found.append(container)
    return found


requirement = st.fixed_dictionaries({"key": st.sampled_from(LEVELS),
                                     "operator": st.sampled_from(["In", "Exists"])},
                                    optional={"values": st.lists(names, max_size=2)})
affinity = st.fixed_dictionaries({"nodeAffinity": st.fixed_dictionaries({
    "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries({
        "nodeSelectorTerms": st.lists(st.fixed_dictionaries(
            {"matchExpressions": st.lists(requirement, min_size=1, max_size=2)}),
            min_size=1, max_size=2)})})})


@st.composite
def pod_specs(draw: st.DrawFn) -> dict:
    spec = {"containers": draw(containers()),
            **draw(st.fixed_dictionaries({}, optional={
                "initContainers": containers(init=True),
                "overhead": resources,
                "affinity": affinity,
                "nodeSelector": st.dictionaries(st.sampled_from(LEVELS), names, max_size=1),
                "tolerations": st.lists(st.fixed_dictionaries(
                    {"key": names, "operator": st.just("Exists")},
                    optional={"effect": st.just("NoSchedule")}), max_size=2),
                "priorityClassName": st.sampled_from(["high", "low"]),
                "schedulingGates": st.just([{"name": "example.com/gate"}]),
                "resourceClaims": st.lists(st.fixed_dictionaries(
                    {"name": names, "resourceClaimTemplateName": st.just("two-gpus")}),
                    max_size=1),
                "volumes": st.just([{"name": "data", "emptyDir": {}}]),
                "dnsPolicy": st.just("ClusterFirst"),
                "terminationGracePeriodSeconds": st.just(30),
                "restartPolicy": st.just("Never")}))}
    return spec


@st.composite
def templates(draw: st.DrawFn) -> dict:
    template: dict = {"spec": draw(pod_specs())}
    metadata = draw(st.fixed_dictionaries({}, optional={
        "labels": st.dictionaries(st.sampled_from(["job-name", "app"]), names, max_size=2),
        "annotations": st.dictionaries(st.just(TOPOLOGY_REQUIRED_ANNOTATION),
                                       st.sampled_from(LEVELS), max_size=1)}))
    if metadata or draw(st.booleans()):
        template["metadata"] = metadata
    return template


def metadata(name: str, draw: st.DrawFn) -> dict:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "7",
            "labels": {QUEUE_LABEL: "default"}}
    if draw(st.booleans()):  # admitted once: the user's own pin kept aside
        meta["annotations"] = {ORIGINAL_AFFINITY_ANNOTATION: "__OWN__"}
    return meta


@st.composite
def batch_jobs(draw: st.DrawFn) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata("train", draw),
            "spec": {"suspend": draw(st.booleans()),
                     "parallelism": draw(st.integers(1, 4)),
                     "selector": {"matchLabels": {"controller-uid": "uid-train"}},
                     "template": draw(templates())},
            "status": draw(st.sampled_from([{}, {"startTime": "2026-01-01T00:00:00Z"},
                                            {"active": 1, "ready": 1}]))}


@st.composite
def jobsets(draw: st.DrawFn) -> dict:
    replicated = [{"name": name, "replicas": draw(st.integers(1, 3)),
                   "template": {"spec": {"parallelism": draw(st.integers(1, 3)),
                                         "template": draw(templates())}}}
                  for name in draw(st.lists(names, min_size=1, max_size=3, unique=True))]
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": metadata("sweep", draw),
            "spec": {"suspend": True, "replicatedJobs": replicated},
            "status": {"replicatedJobsStatus": [{"name": replicated[0]["name"], "ready": 1}]}}


@st.composite
def rayjobs(draw: st.DrawFn) -> dict:
    groups = [{"groupName": name, "replicas": draw(st.integers(0, 3)), "rayStartParams": {},
               "template": draw(templates())}
              for name in draw(st.lists(names, max_size=2, unique=True))]
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata("tune", draw),
            "spec": {"suspend": True, "shutdownAfterJobFinishes": draw(st.booleans()),
                     "entrypoint": "python tune.py",
                     "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {},
                                                          "template": draw(templates())},
                                        "workerGroupSpecs": groups},
                     **draw(st.fixed_dictionaries({}, optional={
                         "submissionMode": st.sampled_from(
                             ["K8sJobMode", "SidecarMode", "HTTPMode", "InteractiveMode"]),
                         "submitterPodTemplate": templates()}))}}


TRAINER_JOB = {"name": "node", "template": {
    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
    "spec": {"template": {"spec": {"containers": [
        {"name": "node", "image": "pytorch", "resources": {"limits": {GPU: "8"}}}]}}}}}
RUNTIME = {"kind": "ClusterTrainingRuntime", "metadata": {"name": "torch"}, "spec": {
    "mlPolicy": {"numNodes": 2, "torch": {}},
    "template": {"spec": {"replicatedJobs": [TRAINER_JOB]}}}}


@st.composite
def trainjobs(draw: st.DrawFn) -> dict:
    trainer = draw(st.fixed_dictionaries({}, optional={
        "numNodes": st.integers(1, 4), "image": st.just("pytorch"),
        "resourcesPerNode": st.fixed_dictionaries({"limits": resources})}))
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": metadata("fine-tune", draw),
            "spec": {"suspend": True, "runtimeRef": {"name": "torch"}, "trainer": trainer,
                     "podSpecOverrides": [{"targetJobs": [{"name": "node"}],
                                           "nodeSelector": {LEVELS[0]: "r1"}}]}}


@st.composite
def pods(draw: st.DrawFn) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata("notebook", draw),
            "spec": draw(pod_specs()), "status": {"phase": "Pending"}}


def with_own_pins(job: dict, kinds: JobKinds) -> dict:
    """The marked jobs' annotation holds the pin fields their templates carry."""
    annotations = job["metadata"].get("annotations") or {}
    if annotations.get(ORIGINAL_AFFINITY_ANNOTATION) == "__OWN__":
        del annotations[ORIGINAL_AFFINITY_ANNOTATION]
        kind = kinds.suspendable.get(job["kind"])
        if kind is None:
            return job
        if hasattr(kind, "encode_affinities"):
            own = kind.user_affinities(job)
            annotations[ORIGINAL_AFFINITY_ANNOTATION] = kind.encode_affinities(own)
        else:
            annotations[ORIGINAL_AFFINITY_ANNOTATION] = json.dumps([])
    return job


def read(job: dict, kinds: JobKinds) -> dict:
    """Everything admitter derives from a job, as comparable values."""
    reader = kinds.reader_of(job)
    found: dict = {"finished": reader.finished(job)}
    pod_sets = reader.pod_sets(job)
    found["pod sets"] = [
        (p.name, p.count, p.path, p.size_field, dict(p.annotations),
         kinds.pod_demand_and_classes("ns", p.pod_spec),
         placement_constraints(p.pod_spec, p.pod_spec.get("affinity")),
         p.pod_spec.get("priorityClassName"), p.pod_spec.get("schedulingGates"))
        for p in pod_sets]
    contract = job_contract(job, max_min_runtime=86400, topology_levels=LEVELS, kinds=kinds)
    found["contract"] = contract
    found["priority class"] = priority_class_of(job, kinds)
    workload = workload_for(job, contract, 0, kinds)
    found["workload"] = workload
    found["equivalent"] = equivalent(job, workload, kinds)
    if reader.kind in kinds.suspendable:
        kind = kinds.job_of(job)
        found["suspended"] = kind.is_suspended(job)
        found["suspend"] = (kind.suspend_ops(job), kind.suspend_patch(job))
        found["ready"] = kind.pods_ready(job)
        found["run"] = [kind.run_patch(job, "wl", {LEVELS[0]: "r1"}, narrower, place)
                        for narrower in ({}, {pod_sets[0].name: {LEVELS[1]: "n1"}})
                        for place in (False, True)]
        found["restore"] = kind.restore_patch(job)
        for protocol, method in ((ClearsStartTime, "start_time_patch"),
                                 (ShowsProgress, "progress"), (RefusesSpecs, "unsupported")):
            if isinstance(kind, protocol):
                found[method] = getattr(kind, method)(job)
    return found


CLAIM_TEMPLATE = {"spec": {"spec": {"devices": {"requests": [
    {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}]}}}}
KINDS_READING_RUNTIMES = JobKinds(lambda kind, namespace, name: RUNTIME,
                                  DeviceClaims({"gpu.example.com": GPU},
                                               lambda namespace, name: CLAIM_TEMPLATE))


@settings(max_examples=150, deadline=None)
@given(st.one_of(batch_jobs(), jobsets(), rayjobs(), trainjobs(), pods()))
def test_a_projected_job_reads_as_the_whole_job(job):
    kinds = KINDS_READING_RUNTIMES
    job = with_own_pins(job, kinds)
    whole = copy.deepcopy(job)
    projected = JobProjection(kinds)(job)
    assert job == whole  # the object given is not changed
    assert read(projected, kinds) == read(whole, kinds)


@st.composite
def bound_pods(draw: st.DrawFn) -> dict:
    pod = draw(pods())
    if draw(st.booleans()):
        pod["spec"]["nodeName"] = "n1"
    pod["status"] = draw(st.fixed_dictionaries({"phase": st.sampled_from(
        ["Pending", "Running", "Succeeded"])}, optional={
        "conditions": st.just([{"type": "Ready", "status": "True"}]),
        "containerStatuses": st.just([{"name": "a", "imageID": "sha256:1", "ready": True}])}))
    return pod


@settings(max_examples=100, deadline=None)
@given(bound_pods())
def test_a_projected_pod_reads_as_the_whole_pod(pod):
    whole = copy.deepcopy(pod)
    projected = PodProjection()(pod)
    assert pod == whole
    assert read(projected, KINDS_READING_RUNTIMES) == read(whole, KINDS_READING_RUNTIMES)
    for obj in (projected, whole):
        obj["status"].pop("containerStatuses", None)
    assert projected["status"] == whole["status"] and projected["metadata"] == whole["metadata"]
    for reads in (is_gated, pinned_host, lambda p: without_gate(p, "example.com/gate"),
                  lambda p: pod_requests(p["spec"]), lambda p: p["spec"].get("nodeName")):
        assert reads(projected) == reads(whole)


@settings(max_examples=50, deadline=None)
@given(st.one_of(batch_jobs(), jobsets(), rayjobs()))
def test_a_projection_keeps_of_each_pod_spec_only_what_is_read(job):
    projected = JobProjection(KINDS)(with_own_pins(job, KINDS))
    for pod_set in KINDS.reader_of(projected).pod_sets(projected):
        spec = pod_set.pod_spec
        assert not {"volumes", "dnsPolicy", "restartPolicy"} & set(spec)
        for container in [*spec["containers"], *spec.get("initContainers", ())]:
            assert set(container) <= {"name", "resources", "restartPolicy"}
    assert "selector" not in projected["spec"]
    assert JobProjection(KINDS)(projected) == projected


def test_jobs_of_one_shape_share_their_pod_specs_labels_and_status():
    projection = JobProjection(KINDS)
    spec = {"containers": [{"name": "main", "image": "x", "resources": {"limits": {GPU: "8"}}}]}
    first, second = (projection(json.loads(json.dumps({
        "kind": "JobSet", "metadata": {"name": name, "namespace": "ns",
                                       "labels": {QUEUE_LABEL: "default"}},
        "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {
            "metadata": {"annotations": {TOPOLOGY_REQUIRED_ANNOTATION: LEVELS[0]}},
            "spec": spec}}}}]},
        "status": {"replicatedJobsStatus": [{"name": "w", "active": 0}]}})))
        for name in ("a", "b"))
    for path in (("spec", "replicatedJobs", 0, "template", "spec", "template", "spec"),
                 ("spec", "replicatedJobs", 0, "template", "spec", "template", "metadata",
                  "annotations"), ("metadata", "labels"), ("status",)):
        assert nested(first, path) is nested(second, path)
    assert nested(first, ("spec", "replicatedJobs", 0, "template", "spec", "template",
                          "spec")) == project_pod_spec(spec)
    assert (first["metadata"]["name"], second["metadata"]["name"]) == ("a", "b")


def nested(obj, path):
    for step in path:
        obj = obj[step]
    return obj


def test_a_job_whose_templates_cannot_be_found_is_kept_whole():
    broken = {"kind": "RayJob", "metadata": {"name": "r", "namespace": "ns"},
              "spec": {"entrypoint": "python x.py"}}
    assert JobProjection(KINDS)(broken) is broken
    template = {"spec": {"containers": [{"name": "m", "image": "i"}]}}
    endless = {"kind": "JobSet", "metadata": {"name": "s", "namespace": "ns"}, "spec": {
        "replicatedJobs": [{"name": "w", "replicas": float("inf"),
                            "template": {"spec": {"template": template}}}]}}
    assert JobProjection(KINDS)(endless) is endless


def test_a_projected_job_is_pinned_and_gated_as_the_whole_one():
    job = {"kind": "Job", "metadata": {"name": "j", "namespace": "ns", "resourceVersion": "3"},
           "spec": {"suspend": True, "template": {
               "metadata": {"labels": {"app": "x"}},
               "spec": {"containers": [{"name": "m", "image": "i", "command": ["run"]}],
                        "nodeSelector": {"pool": "a"}, "volumes": []}}}}
    projected = JobProjection(KINDS)(job)
    ops = KINDS.job_of(projected).run_patch(projected, "wl", {"rack": "r1"}, place_pods=True)
    assert ops == KINDS.job_of(job).run_patch(job, "wl", {"rack": "r1"}, place_pods=True)
    assert {"op": "add", "path": "/spec/template/metadata/labels/admitter.dev~1pod-set",
            "value": "main"} in ops
    assert PLACEMENT_GATE not in json.dumps(ops)  # the webhook gates the labelled pods
