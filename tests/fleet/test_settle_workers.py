"""What the manager does with its workers' copies on every pass: a copy whose Workload is gone
is deleted, a Workload admitted onto a deleted WorkerCluster or a lost worker is requeued, and
nothing of a worker no longer registered is touched."""

import pytest
from fleet_builders import fleet_of
from kubernetes_asyncio import client

from admitter.controller import dispatching
from admitter.controller.dispatching import WORKER_LOST, WORKER_REMOVED, Dispatch
from admitter.core.topology import CLUSTER
from admitter.fleet.fleet import Fleet
from admitter.fleet.worker import COPY_LABEL, Health, Worker
from admitter.jobs.registry import KINDS
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.informer import Informer


def _informer(resource: kube.Kind) -> Informer:
    return Informer(Kube(client.ApiClient(client.Configuration())), resource,
                    lambda event, obj: None)


def _worker(fleet: Fleet, name: str, *copies: str) -> Worker:
    """A connected worker holding a copy for each Workload uid in `copies`."""
    worker = Worker(name, Kube(client.ApiClient(client.Configuration())), {},
                    lambda event, obj: None)
    worker.health = Health(True, "Connected", "")
    for uid in copies:
        worker.copies["Job"].observe({"kind": "Job", "metadata": {
            "name": f"job-{uid}", "namespace": "ml", "uid": f"copy-{uid}",
            "resourceVersion": "1", "labels": {COPY_LABEL: uid}}})
    fleet.workers[name] = worker
    return worker


def _workload(uid: str, cluster: str | None = None) -> dict:
    status = {"admission": {"topologyDomain": {CLUSTER: cluster}}} if cluster else {}
    return {"kind": "Workload", "metadata": {"name": f"wl-{uid}", "namespace": "ml",
                                             "uid": uid, "resourceVersion": "1"},
            "status": status}


class _Settled:
    """A Dispatch over `fleet` whose copy deletions and requeues are recorded, not sent."""

    def __init__(self, fleet: Fleet, monkeypatch: pytest.MonkeyPatch, *workloads: dict,
                 own_clusters: tuple[str, ...] = ()) -> None:
        self.workloads = _informer(kube.WORKLOADS)
        for wl in workloads:
            self.workloads.observe(wl)
        own = _informer(kube.NODES)
        for i, name in enumerate(own_clusters):
            own.observe({"kind": "Node", "metadata": {"name": f"m-n{i}", "resourceVersion": "1",
                                                      "labels": {CLUSTER: name}}})
        self.dispatch = Dispatch(fleet, None, KINDS, self.workloads, own)  # type: ignore[arg-type]
        self.deleted: list[tuple[str, str]] = []
        self.requeued: list[tuple[str, str]] = []

        async def delete(worker: Worker, job: dict) -> None:
            self.deleted.append((worker.name, job["metadata"]["name"]))

        monkeypatch.setattr(dispatching, "delete_copy", delete)

    async def settle(self) -> None:
        async def requeue(wl: dict, reason: str, message: str) -> None:
            self.requeued.append((wl["metadata"]["uid"], reason))

        await self.dispatch.settle_workers(self.workloads.items(), requeue)


async def test_a_copy_whose_workload_is_gone_is_deleted_and_the_others_are_kept(monkeypatch):
    fleet = fleet_of("east")
    _worker(fleet, "east", "kept", "orphan")
    settled = _Settled(fleet, monkeypatch, _workload("kept", "east"))
    await settled.settle()
    assert settled.deleted == [("east", "job-orphan")]
    assert settled.requeued == []


async def test_a_worker_that_does_not_answer_has_nothing_deleted_until_it_does(monkeypatch):
    fleet = fleet_of("east")
    east = _worker(fleet, "east", "orphan")
    east.health = Health(False, "Unreachable", "refused")
    settled = _Settled(fleet, monkeypatch)
    await settled.settle()
    assert settled.deleted == []
    east.health = Health(True, "Connected", "")
    await settled.settle()
    assert settled.deleted == [("east", "job-orphan")]


async def test_work_on_a_deleted_worker_cluster_is_requeued_and_its_copies_left_alone(
        monkeypatch):
    fleet = fleet_of("west")  # east's WorkerCluster is deleted; its worker not dropped yet
    east = _worker(fleet, "east", "moved", "orphan")
    _worker(fleet, "west", "stays")
    settled = _Settled(fleet, monkeypatch, _workload("moved", "east"),
                       _workload("stays", "west"), _workload("here", "hq"),
                       own_clusters=("hq",))
    await settled.settle()
    assert settled.requeued == [("moved", WORKER_REMOVED)]
    assert settled.deleted == []  # the manager no longer looks after east's copies
    assert fleet.copies(_workload("moved", "east")) == []
    east.nodes.observe({"kind": "Node", "metadata": {"name": "e-n1", "resourceVersion": "1"}})
    assert fleet.nodes() == []  # nor offers its nodes
    assert east not in fleet.managed()


async def test_work_on_a_lost_worker_is_requeued(monkeypatch):
    fleet = fleet_of("east")
    east = _worker(fleet, "east", "there")
    east.lost = True
    settled = _Settled(fleet, monkeypatch, _workload("there", "east"))
    await settled.settle()
    assert settled.requeued == [("there", WORKER_LOST)]
    assert settled.deleted == []


async def test_the_clusters_an_admission_may_name_are_the_workers_and_the_managers_own():
    fleet = fleet_of("east", "west")
    own = _informer(kube.NODES)
    own.observe({"kind": "Node", "metadata": {"name": "m-n1", "resourceVersion": "1",
                                              "labels": {CLUSTER: "hq"}}})
    own.observe({"kind": "Node", "metadata": {"name": "m-n2", "resourceVersion": "1"}})
    assert fleet.clusters_known(own) == {"east", "west", "hq"}


async def test_a_worker_not_connected_for_its_grace_period_is_lost(monkeypatch):
    fleet = fleet_of("east")  # its Secret or kubeconfig is wrong: no worker is connected
    now = [1000.0]
    fleet.clock = lambda: now[0]
    fleet._unconnected["east"] = now[0]
    settled = _Settled(fleet, monkeypatch, _workload("there", "east"))
    await settled.settle()
    assert settled.requeued == []  # within the default grace period of 5 minutes
    now[0] += 300
    assert fleet.lost_unconnected() == {"east"}
    await settled.settle()
    assert settled.requeued == [("there", WORKER_LOST)]


async def test_a_returning_worker_offers_its_nodes_once_its_moved_copies_are_listed_and_gone(
        monkeypatch):
    fleet = fleet_of("east")
    east = _worker(fleet, "east", "moved")
    east.returning = True
    east.health = Health(False, "Syncing", "not listed yet")
    settled = _Settled(fleet, monkeypatch, _workload("moved", "west"))
    await settled.settle()
    assert settled.deleted == [] and east.returning  # nothing decided before it answers
    east.health = Health(True, "Connected", "")
    await settled.settle()
    assert settled.deleted == [("east", "job-moved")] and east.returning
    east.copies["Job"].forget(east.copy_of("moved"))
    await settled.settle()
    assert not east.returning and east.offered
