"""A fleet on three real control planes, for the fleet tests: the session's cluster is the
manager, `west` (2 nodes of 8 GPUs) and `east` (4 nodes of 8 GPUs) are workers, each with KWOK
GPU nodes, its Job controller and kube-scheduler; and what the tests read back from them."""

from __future__ import annotations

import base64
import secrets
from collections.abc import AsyncIterator, Iterator

import pytest
from admitter_world import apply_all, workloads
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.workercluster import CONDITION_REACHABLE
from admitter.fleet.worker import COPY_LABEL
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, condition
from admitter.testing import Binaries, GpuNodeLayout, LocalCluster

from builders.kube import leaf_queue

ADMITTER_NAMESPACE = "admitter-system"
WORKERS = {"west": GpuNodeLayout(nodes=2, name_prefix="west-node"),
           "east": GpuNodeLayout(nodes=4, name_prefix="east-node")}


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalCluster]]:
    """Two worker control planes, started one after the other (the machine is small)."""
    binaries = Binaries.locate().require()
    started: dict[str, LocalCluster] = {}
    try:
        for name, layout in WORKERS.items():
            started[name] = LocalCluster.start(tmp_path_factory.mktemp(name), layout, binaries)
        yield started
    finally:
        for cluster in started.values():
            cluster.stop()


async def secret(api: Kube, name: str, kubeconfig: bytes) -> None:
    """The Secret `name` in admitter's namespace holding `kubeconfig`, created or replaced."""
    body = {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ADMITTER_NAMESPACE},
            "data": {"kubeconfig": base64.b64encode(kubeconfig).decode()}}
    try:
        await api.create(kube.SECRETS, body)
    except ApiException as error:
        if not kube.is_conflict(error):
            raise
        await api.replace(kube.SECRETS, body)


def worker_cluster(name: str, secret_name: str) -> Obj:
    return {"apiVersion": "admitter.dev/v1alpha1", "kind": "WorkerCluster",
            "metadata": {"name": name},
            "spec": {"kubeconfig": {"name": secret_name},
                     "labels": {"example.com/cost": name}}}


@pytest.fixture
async def fleet(api: Kube, workers: dict[str, LocalCluster]) -> AsyncIterator[dict[str, Kube]]:
    """The workers registered on the manager (Secret + WorkerCluster), and a client of each;
    unregistered afterwards, so later tests see a single cluster again."""
    try:
        await api.create(kube.Kind("v1", "namespaces", False),
                         {"metadata": {"name": ADMITTER_NAMESPACE}})
    except ApiException as error:
        if not kube.is_conflict(error):
            raise
    clients = {}
    for name, cluster in workers.items():
        await secret(api, f"{name}-kubeconfig", cluster.kubeconfig_path.read_bytes())
        await api.create(kube.WORKER_CLUSTERS, worker_cluster(name, f"{name}-kubeconfig"))
        clients[name] = await Kube.from_kubeconfig(str(cluster.kubeconfig_path))
    try:
        yield clients
    finally:
        for wc in (await api.list(kube.WORKER_CLUSTERS))["items"]:
            await api.delete(kube.WORKER_CLUSTERS, wc["metadata"]["name"])
        for client in clients.values():
            await client.close()


@pytest.fixture
async def fleet_namespace(api: Kube, namespace: str,
                          fleet: dict[str, Kube]) -> AsyncIterator[str]:
    """The test's namespace made in every worker too (a copy lands in its job's namespace);
    its Jobs deleted everywhere afterwards."""
    for client in fleet.values():
        await client.create(kube.Kind("v1", "namespaces", False), {"metadata": {"name": namespace}})
    yield namespace
    # one collection delete per cluster: deleting Jobs listed a moment earlier races the
    # garbage collector, which may already have taken a deleted JobSet's own Jobs
    for client in (api, *fleet.values()):
        await client.request("DELETE", kube.JOBS.path(namespace),
                             {"propagationPolicy": "Background"})


@pytest.fixture
async def team(api: Kube, fleet_namespace: str) -> str:
    """A LocalQueue `default` in the test's namespace over 64 GPUs of quota."""
    name = f"fleet-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 64, namespace=fleet_namespace))
    return name


async def reachable(api: Kube, name: str) -> Obj | None:
    """The WorkerCluster, once its Reachable condition is True."""
    wc = await api.get(kube.WORKER_CLUSTERS, name)
    found = condition(wc, CONDITION_REACHABLE) or {}
    return wc if found.get("status") == "True" else None


async def job_copies(clients: dict[str, Kube], namespace: str) -> dict[str, list[tuple[str, Obj]]]:
    """Job name → the workers running a copy of it, with the copy."""
    found: dict[str, list[tuple[str, Obj]]] = {}
    for worker, client in clients.items():
        listed = await client.request("GET", kube.JOBS.path(namespace),
                                      query={"labelSelector": COPY_LABEL})
        for job in listed["items"]:
            found.setdefault(job["metadata"]["name"], []).append((worker, job))
    return found


async def pods_on(client: Kube, namespace: str, job: str) -> list[Obj]:
    """The Job's running pods in the cluster `client` reads."""
    listed = await client.request("GET", kube.PODS.path(namespace), query={
        "labelSelector": f"batch.kubernetes.io/job-name={job}"})
    return [p for p in listed["items"] if (p.get("status") or {}).get("phase") == "Running"]


async def admitted_gpus(api: Kube, namespace: str) -> dict[str, int]:
    """Per worker, the GPUs the manager's admissions hint onto its nodes."""
    found: dict[str, int] = {}
    for wl in await workloads(api, namespace):
        gpus = int(wl["spec"]["podSets"][0]["requests"].get("nvidia.com/gpu", 0))
        for hint in ((wl.get("status") or {}).get("admission") or {}).get("nodeHints", []):
            worker = hint["node"].split("-node-")[0]
            found[worker] = found.get(worker, 0) + gpus * hint["count"]
    return found


def over_capacity(admitted: dict[str, int]) -> bool:
    """Whether any worker has more GPUs admitted onto it than its nodes hold."""
    return any(gpus > WORKERS[name].nodes * WORKERS[name].gpus_per_node
               for name, gpus in admitted.items())
