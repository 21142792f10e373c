"""TrainJob behind the job interface: pod sets derived from the training runtime it names, as
Trainer resolves them, and the podSpecOverrides that pin it and are taken back."""

import copy
import json
from pathlib import Path

import pytest
import yaml
from kind_objects import GPU, RACK, apply, pod_template

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION, ORIGINAL_AFFINITY_ANNOTATION
from admitter.jobs.trainjob import ANCESTOR_LABEL, MissingRuntime, TrainJob
from admitter.kube.objects import PLACEMENT_GATE, pod_requests


def replicated(name: str, ancestor: str | None, container: str, **job_spec: int) -> dict:
    template = pod_template(0)
    template["spec"]["containers"][0]["name"] = container
    labels = {ANCESTOR_LABEL: ancestor} if ancestor else {}
    return {"name": name, "template": {"metadata": {"labels": labels},
                                       "spec": {**job_spec, "template": template}}}


def runtime(*jobs: dict, **policy: object) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "torch"},
            "spec": {"mlPolicy": {"numNodes": 1, **policy},
                     "template": {"spec": {"replicatedJobs": list(jobs)}}}}


TORCH = runtime(replicated("dataset-initializer", "dataset-initializer", "dataset-initializer"),
                replicated("node", "trainer", "node"), torch={"numProcPerNode": "auto"})


def trainjob(**spec: object) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "llm", "namespace": "ns", "resourceVersion": "3"},
            "spec": {"suspend": True, "runtimeRef": {"name": "torch"}, **spec}}


def kind_for(found: dict | None) -> TrainJob:
    return TrainJob(lambda kind, namespace, name: found if (kind, name) == (
        "ClusterTrainingRuntime", "torch") else None)


def test_the_trainer_job_runs_num_nodes_pods_with_the_resources_per_node():
    job = trainjob(trainer={"numNodes": 4, "resourcesPerNode": {"limits": {GPU: "8"}}},
                   podSpecOverrides=[{"targetJobs": [{"name": "node"}],
                                      "nodeSelector": {"pool": "h100"}}])
    initializer, node = kind_for(TORCH).pod_sets(job)
    assert (initializer.name, initializer.count, node.name, node.count) == (
        "dataset-initializer", 1, "node", 4)
    assert node.pod_spec["containers"][0]["resources"] == {"limits": {GPU: "8"}}
    assert node.pod_spec["nodeSelector"] == {"pool": "h100"}
    assert "nodeSelector" not in initializer.pod_spec
    # Without numNodes, the runtime's; other jobs: replicas × parallelism.
    wide = runtime(replicated("prep", None, "prep", parallelism=3),
                   replicated("node", "trainer", "node"), numNodes=2)
    assert [s.count for s in kind_for(wide).pod_sets(trainjob())] == [3, 2]


SHIPPED = {runtime["metadata"]["name"]: runtime for runtime in yaml.safe_load_all(
    (Path(__file__).parents[1] / "data" / "trainer_runtimes.yaml").read_text())}
"""Trainer's own runtimes, one of each shape (tests/data/trainer_runtimes.yaml)."""


def shipped(name: str) -> TrainJob:
    return TrainJob(lambda kind, namespace, wanted: SHIPPED.get(wanted))


def shape(kind: TrainJob, job: dict) -> list[tuple[str, int, int]]:
    """(pod set, pods, GPUs per pod) as the Workload would be charged."""
    return [(s.name, s.count, int(pod_requests(s.pod_spec).get(GPU, 0)))
            for s in kind.pod_sets(job)]


FOUR_GPUS = {"limits": {GPU: "4"}}


@pytest.mark.parametrize(("runtime_name", "trainer", "pod_sets"), [
    # torch and JAX: the trainer job runs numNodes pods, each with resourcesPerNode.
    ("torch-distributed", {"numNodes": 3, "resourcesPerNode": FOUR_GPUS}, [("node", 3, 4)]),
    ("torch-distributed", {}, [("node", 1, 0)]),
    ("jax-distributed", {"numNodes": 2, "resourcesPerNode": FOUR_GPUS}, [("node", 2, 4)]),
    # MPI with its launcher as a node: the launcher (the trainer job) is one pod with
    # resourcesPerNode; the other numNodes - 1 are the `node` job's, as the runtime has them.
    ("mpi-distributed", {"numNodes": 3, "resourcesPerNode": FOUR_GPUS},
     [("launcher", 1, 4), ("node", 2, 0)]),
    ("mpi-distributed", {"resourcesPerNode": FOUR_GPUS}, [("launcher", 1, 4), ("node", 1, 0)]),
    # torchtune: two initializers of one pod, held with the trainer as one gang.
    ("torchtune-llama3.2-1b", {"numNodes": 1},
     [("dataset-initializer", 1, 0), ("model-initializer", 1, 0), ("node", 1, 2)]),
])
def test_each_shipped_runtime_shape_gives_the_pod_sets_trainer_runs(runtime_name, trainer,
                                                                    pod_sets):
    job = trainjob(runtimeRef={"name": runtime_name}, trainer=trainer)
    assert shape(shipped(runtime_name), job) == pod_sets


def test_mpi_without_a_launcher_node_runs_num_nodes_node_pods_and_numnodes_sizes_only_them():
    mpi = copy.deepcopy(SHIPPED["mpi-distributed"])
    mpi["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    job = trainjob(trainer={"numNodes": 3})
    assert [(s.name, s.count) for s in kind_for(mpi).pod_sets(job)] == [
        ("launcher", 1), ("node", 3)]
    # The runtime's own numNodes sizes the launcher, as Trainer reads it.
    mpi["spec"]["mlPolicy"]["numNodes"] = 2
    assert [s.count for s in kind_for(mpi).pod_sets(trainjob())] == [2, 1]


def test_a_job_other_than_trainer_and_initializers_runs_its_replicas_times_parallelism():
    wide = runtime(replicated("prep", None, "prep", parallelism=3),
                   replicated("node", "trainer", "node", parallelism=5), numNodes=2)
    wide["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2
    wide["spec"]["template"]["spec"]["replicatedJobs"][1]["replicas"] = 4
    assert [s.count for s in kind_for(wide).pod_sets(trainjob())] == [6, 2]
    without_policy = copy.deepcopy(wide)
    del without_policy["spec"]["mlPolicy"]
    # No ML policy: the trainer job keeps its parallelism unless the TrainJob sizes it.
    assert [s.count for s in kind_for(without_policy).pod_sets(trainjob())] == [6, 5]
    assert [s.count for s in kind_for(without_policy).pod_sets(
        trainjob(trainer={"numNodes": 7}))] == [6, 7]


def test_a_missing_runtime_or_a_bad_size_is_named():
    with pytest.raises(MissingRuntime,
                       match=r"spec\.runtimeRef: no ClusterTrainingRuntime .torch.; the TrainJob"):
        kind_for(None).pod_sets(trainjob())
    with pytest.raises(ValueError, match=r"spec\.runtimeRef\.kind must be one of"):
        kind_for(TORCH).pod_sets(trainjob(runtimeRef={"name": "torch", "kind": "Job"}))
    with pytest.raises(ValueError, match=r"spec\.trainer\.numNodes .* not 0"):
        kind_for(TORCH).pod_sets(trainjob(trainer={"numNodes": 0}))
    bad = copy.deepcopy(TORCH)
    bad["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = "2"
    with pytest.raises(ValueError, match=r"runtime's spec\.template\.spec\.replicatedJobs\[0\]"
                                         r"\.template\.spec\.parallelism must be .* not '2'"):
        kind_for(bad).pod_sets(trainjob())


def test_starting_pins_every_job_through_overrides_and_restoring_gives_back_the_users_own():
    kind = kind_for(TORCH)
    own = [{"targetJobs": [{"name": "node"}], "nodeSelector": {"pool": "h100"}}]
    job = trainjob(podSpecOverrides=own)
    started = apply(job, kind.run_patch(job, "trainjob-llm-abcde", RACK))
    assert started["spec"]["suspend"] is False
    assert started["metadata"]["annotations"][ADMITTED_WORKLOAD_ANNOTATION] == "trainjob-llm-abcde"
    assert started["spec"]["podSpecOverrides"] == [*own, *(
        {"targetJobs": [{"name": name}], "nodeSelector": RACK}
        for name in ("dataset-initializer", "node"))]
    # Read while admitted, the pod sets are the user's own.
    assert [s.pod_spec.get("nodeSelector") for s in kind.pod_sets(started)] == [
        None, {"pool": "h100"}]
    assert json.loads(started["metadata"]["annotations"][ORIGINAL_AFFINITY_ANNOTATION]) == own

    suspended = apply(started, [{"op": "add", "path": "/spec/suspend", "value": True}])
    restored = apply(suspended, kind.restore_patch(suspended))
    assert restored["spec"] == job["spec"]
    assert restored["metadata"]["annotations"] == {}
    bare = trainjob()
    again = apply(bare, kind.run_patch(bare, "trainjob-llm-abcde", RACK))
    assert apply(again, kind.restore_patch(again))["spec"] == {**bare["spec"], "suspend": False}


@pytest.mark.parametrize(("conditions", "ended"), [
    ([], None),
    ([{"type": "Complete", "status": "True"}], (True, "the TrainJob completed")),
    ([{"type": "Failed", "status": "True"}], (False, "the TrainJob failed")),
])
def test_a_trainjob_has_finished_when_its_conditions_say_so(conditions, ended):
    assert TrainJob().finished({**trainjob(), "status": {"conditions": conditions}}) == ended


def test_ready_pods_are_its_ready_or_done_child_jobs_times_their_pods():
    wide = runtime(replicated("prep", None, "prep", parallelism=3),
                   replicated("node", "trainer", "node"))
    job = trainjob(trainer={"numNodes": 4})
    job["status"] = {"jobsStatus": [{"name": "prep", "succeeded": 1},
                                    {"name": "node", "ready": 1}]}
    assert kind_for(wide).pods_ready(job) == 3 + 4
    job["status"]["jobsStatus"][1] = {"name": "node", "active": 1}
    assert kind_for(wide).pods_ready(job) == 3
    # Its runtime deleted while it runs: nothing to count by (its pods on nodes tell).
    assert kind_for(None).pods_ready(job) == 0


def test_a_runtime_job_that_asks_for_a_rack_of_its_own_is_pinned_there_alone():
    node = replicated("node", "trainer", "node")
    node["template"]["spec"]["template"]["metadata"] = {
        "annotations": {"admitter.dev/topology-required": "rack"}}
    kind = kind_for(runtime(replicated("dataset-initializer", "dataset-initializer", "init"),
                            node))
    job = trainjob()
    assert [s.annotations for s in kind.pod_sets(job)] == [
        {}, {"admitter.dev/topology-required": "rack"}]
    started = apply(job, kind.run_patch(job, "trainjob-llm-abcde", {}, {"node": RACK}))
    assert started["spec"]["podSpecOverrides"] == [
        {"targetJobs": [{"name": "node"}], "nodeSelector": RACK}]


def test_placing_pods_gates_each_job_through_its_override():
    """Trainer cannot label a TrainJob's pods for the placement webhook: each replicated
    job's override carries the placement gate, with the domain's pin or alone."""
    kind = kind_for(TORCH)
    job = trainjob()
    started = apply(job, kind.run_patch(job, "trainjob-llm-abcde", RACK, place_pods=True))
    gate = [{"name": PLACEMENT_GATE}]
    assert started["spec"]["podSpecOverrides"] == [
        {"targetJobs": [{"name": name}], "nodeSelector": RACK, "schedulingGates": gate}
        for name in ("dataset-initializer", "node")]
    anywhere = apply(job, kind.run_patch(job, "trainjob-llm-abcde", {}, place_pods=True))
    assert [o.get("nodeSelector") for o in anywhere["spec"]["podSpecOverrides"]] == [None] * 2
    restored = apply(started, kind.restore_patch(started))
    assert restored["spec"] == {**job["spec"], "suspend": False}
