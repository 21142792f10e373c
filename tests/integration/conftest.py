"""Fixtures for tests against the real local control plane (see admitter.testing.cluster).

One control plane serves the whole session (starting it costs seconds); every test gets its own
namespace. When a test fails, the tails of all component logs are attached to its report.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import admitter_world
import pytest
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.testing import Binaries, GpuNodeLayout, LocalCluster
from admitter.testing.waiting import eventually, wait_for

# 8 nodes x 8 GPUs: racks rack-0..rack-3 of 2 nodes, blocks block-0 and block-1.
TEST_LAYOUT = GpuNodeLayout(nodes=8, gpus_per_node=8, nodes_per_rack=2, racks_per_block=2)
_CLUSTER = pytest.StashKey[LocalCluster]()
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="session")
def local_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """The session's control plane; fails (never skips) when the binaries are not built."""
    binaries = Binaries.locate()
    message = binaries.missing_message()
    if message is not None:
        pytest.fail(message, pytrace=False)
    with LocalCluster.start(tmp_path_factory.mktemp("cluster"), TEST_LAYOUT, binaries) as cluster:
        request.config.stash[_CLUSTER] = cluster
        yield cluster


@pytest.fixture(scope="session")
def kubeconfig(local_cluster: LocalCluster) -> Path:
    """Path of a cluster-admin kubeconfig for the session's control plane."""
    return local_cluster.kubeconfig_path


@pytest.fixture
async def kube_client(kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    """A kubernetes_asyncio ApiClient bound to the test's event loop."""
    api = await config.new_client_from_config(config_file=str(kubeconfig))
    async with api:
        yield api


@pytest.fixture
async def namespace(
    kube_client: client.ApiClient, request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    """A fresh namespace, usable for pods once its default service account exists."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    name = f"{slug}-{secrets.token_hex(3)}"
    core = client.CoreV1Api(kube_client)
    await core.create_namespace({"metadata": {"name": name}})

    async def default_service_account() -> bool:
        try:
            await core.read_namespaced_service_account("default", name)
        except ApiException as err:
            if err.status != 404:
                raise
            return False
        return True

    # kube-controller-manager makes it; after a fault test restarted etcd, it may take a
    # while to catch up
    await eventually(default_service_account, f"service account default in {name}", 90)
    yield name
    await core.delete_namespace(name)


@pytest.fixture(scope="session")
def admitter_crds(local_cluster: LocalCluster) -> None:
    """admitter's CRDs installed and established (once per session)."""
    local_cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    local_cluster.wait_established()
    # Established is not yet servable: the API server answers 429 while the new kinds' storage
    # initialises, so wait until every kind can be listed.
    kinds = "clusterqueues,localqueues,workloads,topologies"
    wait_for(lambda: local_cluster.kubectl("get", kinds, "-A", check=False).returncode == 0,
             30, "admitter's kinds to be servable")


@pytest.fixture
async def api(kubeconfig: Path, admitter_crds: None) -> AsyncIterator[Kube]:
    """admitter's own JSON client, as the controller uses it."""
    client = await Kube.from_kubeconfig(str(kubeconfig))
    yield client
    await client.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach component log tails to failed integration tests."""
    report: pytest.TestReport = yield
    cluster = item.config.stash.get(_CLUSTER, None)
    if report.failed and cluster is not None and item.get_closest_marker("integration"):
        report.sections.append(("control-plane logs (tails)", cluster.log_tails(40)))
    return report


@pytest.fixture
async def idle_cluster(api: Kube, namespace: str) -> AsyncIterator[None]:
    """An idle cluster to start from (earlier tests' pods gone), its Topology, and the test's
    Jobs removed afterwards."""
    await admitter_world.cluster_topology(api)

    await eventually(lambda: admitter_world.earlier_work_gone(api),
                     "the cluster to be free of earlier tests' pods and admissions", 60)
    yield
    for job in (await admitter_world.jobs(api, namespace)).values():
        await api.request("DELETE", kube.JOBS.path(namespace, job["metadata"]["name"]),
                          {"propagationPolicy": "Background"})
