"""The manager's view of a worker: its nodes labelled with the cluster, the usage of its own
pods, its copies found by Workload uid, and which admissions run outside the manager."""

import asyncio
import base64

import pytest
from fleet_builders import fleet_of
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.core.topology import CLUSTER
from admitter.fleet.fleet import _kubeconfig
from admitter.fleet.worker import (
    COPY_LABEL,
    Health,
    KubeconfigError,
    Worker,
    client_from_kubeconfig,
)
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.informer import Informer

CA = base64.b64encode(b"not checked before a request").decode()


def _node(name: str, gpus: int = 8, labels: dict | None = None) -> dict:
    return {"kind": "Node", "metadata": {"name": name, "resourceVersion": "1",
                                         "labels": labels or {}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "96"}}}


def _pod(name: str, node: str, gpus: int, labels: dict | None = None,
         phase: str = "Running") -> dict:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ml", "resourceVersion": "1",
                                        "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [
                {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": phase}}


def _worker(name: str = "east") -> Worker:
    return Worker(name, Kube(client.ApiClient(client.Configuration())),
                  {"example.com/cost": "spot"}, lambda event, obj: None)


async def test_its_nodes_carry_the_cluster_and_its_labels_in_the_managers_model():
    worker = _worker()
    worker.nodes.observe(_node("e-n1", labels={"example.com/cost": "own", "rack": "r1"}))
    (node,) = worker.model_nodes()
    assert node["metadata"]["labels"] == {CLUSTER: "east", "example.com/cost": "spot",
                                          "rack": "r1"}
    assert worker.nodes.get("", "e-n1")["metadata"]["labels"] == {
        "example.com/cost": "own", "rack": "r1"}  # the worker's own object is left alone


async def test_only_its_own_running_pods_count_as_foreign_usage():
    worker = _worker()
    worker.pods.observe(_pod("theirs", "e-n1", 2))
    worker.pods.observe(_pod("done", "e-n1", 4, phase="Succeeded"))
    worker.pods.observe(_pod("copy-pod", "e-n1", 8, labels={COPY_LABEL: "uid-1"}))
    worker.pods.observe(_pod("pending", "", 8))
    assert worker.foreign_usage({"uid-1"}) == {"e-n1": {"nvidia.com/gpu": 2}}


async def test_a_copy_whose_workload_holds_no_admission_counts_as_the_workers_own():
    worker = _worker()
    worker.pods.observe(_pod("copy-pod", "e-n1", 8, labels={COPY_LABEL: "uid-1"}))
    assert worker.foreign_usage(set()) == {"e-n1": {"nvidia.com/gpu": 8}}


async def test_a_copy_is_found_by_its_workloads_uid_until_it_and_its_pods_are_gone():
    worker = _worker()
    copy = {"kind": "Job", "metadata": {"name": "train", "namespace": "ml", "uid": "c1",
                                        "resourceVersion": "5", "labels": {COPY_LABEL: "w1"}}}
    pod = _pod("train-x", "e-n1", 8, labels={COPY_LABEL: "w1"})
    worker.copies["Job"].observe(copy)
    worker.pods.observe(pod)
    assert worker.copy_of("w1") is copy and worker.runs_copy("w1")
    assert worker.copy_of("w2") is None and not worker.runs_copy("w2")
    worker.copies["Job"].forget(copy)
    assert worker.copy_of("w1") is None and worker.runs_copy("w1")  # its pod still runs
    worker.pods.forget(pod)
    assert not worker.runs_copy("w1")


def _admitted(domain: dict, *nodes: str) -> dict:
    return {"metadata": {"name": "w", "namespace": "ml", "uid": "w1"},
            "status": {"admission": {"topologyDomain": domain, "nodeHints": [
                {"podSet": "main", "node": node, "count": 1} for node in nodes]}}}


async def test_without_worker_clusters_the_managers_nodes_are_all_it_offers():
    fleet = fleet_of()
    own = [_node("m-n1"), _node("m-n2", labels={CLUSTER: "here"})]
    assert not fleet.active and fleet.own_nodes(own) == own and fleet.nodes() == []
    own_nodes = Informer(fleet.kube, kube.NODES, lambda event, obj: None)
    assert not fleet.runs_elsewhere(_admitted({}, "anything"), own_nodes)


async def test_an_admission_onto_a_worker_no_longer_registered_is_never_started_here():
    fleet = fleet_of()
    own_nodes = Informer(fleet.kube, kube.NODES, lambda event, obj: None)
    own_nodes.observe(_node("m-n1", labels={CLUSTER: "here"}))
    assert fleet.runs_elsewhere(_admitted({CLUSTER: "east"}, "e-n1"), own_nodes)
    assert not fleet.runs_elsewhere(_admitted({CLUSTER: "here"}, "m-n1"), own_nodes)


async def test_in_a_fleet_the_manager_offers_only_its_nodes_that_name_a_cluster():
    fleet = fleet_of("east")
    own = [_node("m-n1"), _node("m-n2", labels={CLUSTER: "here"})]
    assert [n["metadata"]["name"] for n in fleet.own_nodes(own)] == ["m-n2"]


async def test_an_admission_runs_elsewhere_when_it_names_a_worker_or_nodes_not_the_managers():
    fleet = fleet_of("east", "west")
    own_nodes = Informer(fleet.kube, kube.NODES, lambda event, obj: None)
    own_nodes.observe(_node("m-n1", labels={CLUSTER: "here"}))
    assert fleet.runs_elsewhere(_admitted({CLUSTER: "east"}, "e-n1"), own_nodes)
    # one worker alone has no cluster level: its nodes tell
    assert fleet.runs_elsewhere(_admitted({}, "e-n1"), own_nodes)
    assert not fleet.runs_elsewhere(_admitted({CLUSTER: "here"}, "m-n1"), own_nodes)


async def test_the_worker_of_an_admission_is_found_by_cluster_or_by_its_nodes():
    fleet = fleet_of("east", "west")
    east, west = _worker("east"), _worker("west")
    west.nodes.observe(_node("w-n1"))
    fleet.workers.update(east=east, west=west)
    assert fleet.worker_of(_admitted({CLUSTER: "east"}, "e-n1")) is east
    assert fleet.worker_of(_admitted({}, "w-n1")) is west
    assert fleet.worker_of(_admitted({}, "elsewhere")) is None


async def test_only_workers_that_answer_offer_their_nodes():
    fleet = fleet_of("east")
    east = _worker("east")
    east.nodes.observe(_node("e-n1"))
    fleet.workers["east"] = east
    assert fleet.nodes() == []
    east.health = Health(True, "Connected", "")
    assert [n["metadata"]["name"] for n in fleet.nodes()] == ["e-n1"]


@pytest.mark.parametrize("field", ["certificate-authority", "tokenFile", "exec"])
async def test_a_kubeconfig_that_points_at_files_or_programs_is_refused(field):
    kubeconfig = {
        "clusters": [{"name": "w", "cluster": {"server": "https://w:6443",
                                               "certificate-authority-data": CA}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "u"}}],
        "current-context": "w"}
    section = "cluster" if field == "certificate-authority" else "user"
    kubeconfig[f"{section}s"][0][section][field] = "/etc/admitter/secret"
    with pytest.raises(KubeconfigError, match=f"uses {field}: only inline credentials"):
        await client_from_kubeconfig(kubeconfig)


@pytest.mark.parametrize("text, why", [
    ("not base64!", "not a kubeconfig"),
    (base64.b64encode(b"{this is: [not yaml").decode(), "not a kubeconfig"),
    (base64.b64encode(b"apiVersion: v1\nkind: Config\n").decode(), "it names no clusters"),
])
def test_a_secret_that_holds_no_kubeconfig_says_so(text, why):
    with pytest.raises(KubeconfigError, match=why):
        _kubeconfig(text)


async def test_a_worker_silent_for_its_grace_period_is_lost_then_returns_before_it_is_offered():
    worker = _worker()
    worker.grace = 60.0
    silent, answers = Health(False, "Unreachable", "refused"), Health(True, "Connected", "")
    worker.observed(silent, 1000.0)
    worker.observed(silent, 1059.0)
    assert not worker.lost
    worker.observed(silent, 1060.0)
    assert worker.lost and not worker.offered
    worker.health = answers
    worker.observed(answers, 1100.0)
    assert not worker.lost and worker.returning and not worker.offered
    worker.returning = False  # once its moved copies are gone (Dispatch.settle_workers)
    assert worker.offered


async def test_a_short_silence_is_forgotten_once_the_worker_answers():
    worker = _worker()
    worker.grace = 60.0
    worker.observed(Health(False, "Unreachable", ""), 1000.0)
    worker.observed(Health(True, "Connected", ""), 1030.0)
    worker.observed(Health(False, "Unreachable", ""), 1070.0)
    assert not worker.lost and not worker.returning


async def test_a_jobsets_copy_is_found_by_its_workloads_uid_beside_the_jobs():
    worker = _worker()
    jobset = {"kind": "JobSet", "metadata": {"name": "train", "namespace": "ml", "uid": "c2",
                                             "resourceVersion": "5", "labels": {COPY_LABEL: "w2"}}}
    job = {"kind": "Job", "metadata": {"name": "train", "namespace": "ml", "uid": "c1",
                                       "resourceVersion": "5", "labels": {COPY_LABEL: "w1"}}}
    worker.copies["JobSet"].observe(jobset)
    worker.copies["Job"].observe(job)
    assert worker.copy_of("w2") is jobset and worker.copy_of("w1") is job
    assert worker.copy_uids() == {"w1", "w2"}


async def _without_the_jobset_crd(worker: Worker) -> None:
    """Run the worker's JobSet informer against an API server that serves no JobSets."""
    async def absent(kind: kube.Kind, query: dict | None = None) -> dict:
        if kind == kube.JOBSETS:
            raise ApiException(status=404, reason="Not Found")
        return {"items": [], "metadata": {"resourceVersion": "1"}}

    worker.kube.list = absent  # type: ignore[method-assign]
    informer = worker.copies["JobSet"]
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 5)
    task.cancel()


async def test_a_worker_without_the_jobset_crd_takes_no_jobset_and_every_job():
    fleet = fleet_of("east", "west", "south")
    east, west = _worker("east"), _worker("west")
    fleet.workers.update(east=east, west=west)  # south is not connected: it offers no nodes
    await _without_the_jobset_crd(west)
    assert east.serves("JobSet") and not west.serves("JobSet") and west.serves("Job")
    assert west.unserved() == ["JobSet"]
    assert fleet.refusing("JobSet") == ["west"]
    assert fleet.refusing("Job") == []
    assert fleet.refusing("RayJob") == []  # both serve KubeRay's CRD
    assert sorted(fleet.refusing("TrainJob")) == ["east", "south", "west"]
