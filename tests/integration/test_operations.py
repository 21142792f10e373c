"""What operators look at: `kubectl get cq`, `/metrics`, and leader election between two
replicas, on the real control plane."""

from __future__ import annotations

import secrets
from pathlib import Path

import aiohttp
import pytest
from admitter_world import ControllerProcess, apply_all, in_process_controller, jobs, running
from prometheus_client.parser import text_string_to_metric_families

from admitter.api.workload import Reason
from admitter.controller.server import health_app, serve
from admitter.kube.client import LEASES, Kube
from admitter.testing import LocalCluster
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration


async def _one_team(api: Kube, namespace: str, quota: int = 24) -> str:
    name = f"ops-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, quota, limit=quota, namespace=namespace))
    return name


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return values


async def test_metrics_and_kubectl_get_cq_after_a_small_run(
        api: Kube, namespace: str, kubeconfig: Path, local_cluster: LocalCluster) -> None:
    team = await _one_team(api, namespace)
    await apply_all(api, *(JobWrapper(f"m-{i}", namespace).runtime("600s").obj() for i in range(4)))
    async with in_process_controller(kubeconfig) as reconciler:
        runner = await serve(health_app(reconciler.metrics.registry, reconciler.caches.synced),
                             "127.0.0.1", 0)
        port = runner.addresses[0][1]
        try:
            async def three_running() -> bool:
                return sum(running(j) for j in (await jobs(api, namespace)).values()) == 3

            await eventually(three_running, "three of four jobs admitted (limit 24 GPUs)",
                             timeout=45)
            async with aiohttp.ClientSession() as session:
                for path in ("/healthz", "/readyz"):
                    async with session.get(f"http://127.0.0.1:{port}{path}") as response:
                        assert response.status == 200
                async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                    values = _samples(await response.text())

            async def status_shown() -> list[str] | None:
                table = local_cluster.kubectl("get", "cq", team).stdout.splitlines()
                return table if table[1].split()[:6] == [team, "24", "24", "24", "1", "3"] else None

            table = await eventually(status_shown, "kubectl get cq to show the status")
        finally:
            await runner.cleanup()
    cq = (("cluster_queue", team),)
    gpu = (("cluster_queue", team), ("resource", "nvidia.com/gpu"))
    assert values["admitter_admitted_workloads_total", cq] == 3
    assert values["admitter_cluster_queue_resource_usage", gpu] == 24
    assert values["admitter_cluster_queue_fair_share", gpu] == 24
    assert values["admitter_pending_workloads", cq] == 1
    assert values["admitter_admission_wait_time_seconds_count", cq] == 3
    assert values["admitter_admission_cycle_duration_seconds_count", ()] >= 1
    assert table[0].split() == ["NAME", "PARENT", "GPU", "QUOTA", "GPU", "ALLOCATED", "GPU",
                                "FAIR", "SHARE", "PENDING", "ADMITTED", "AGE"]


async def _holder(api: Kube, namespace: str, name: str) -> str | None:
    try:
        lease = await api.get(LEASES, name, namespace)
    except Exception:
        return None
    holder: str | None = lease.get("spec", {}).get("holderIdentity")
    return holder


async def _admitted_by(api: Kube, namespace: str) -> dict[str, str]:
    listed = await api.request("GET", f"/api/v1/namespaces/{namespace}/events")
    return {e["involvedObject"]["name"]: e.get("reportingInstance", "")
            for e in listed["items"]
            if e["reason"] == Reason.ADMITTED and e["involvedObject"]["kind"] == "Job"}


async def test_only_the_leader_decides_and_a_follower_takes_over(
        api: Kube, namespace: str, kubeconfig: Path, tmp_path: Path) -> None:
    await _one_team(api, namespace, quota=64)
    lease = f"admitter-{secrets.token_hex(3)}"
    election = ("--leader-elect", "--lease-namespace", namespace, "--lease-name", lease)
    first = ControllerProcess(kubeconfig, tmp_path / "one.log", *election, "--identity", "one")
    second = None
    try:
        async def first_leads() -> bool:
            return await _holder(api, namespace, lease) == "one"

        await eventually(first_leads, "replica one to hold the lease", timeout=30)
        second = ControllerProcess(kubeconfig, tmp_path / "two.log", *election,
                                   "--identity", "two")
        await apply_all(api, JobWrapper("before", namespace).runtime("600s").obj())

        async def admitted_before() -> dict[str, str] | None:
            found = await _admitted_by(api, namespace)
            return found if "before" in found else None

        assert (await eventually(admitted_before, "the leader to admit"))["before"] == "one"
        first.kill()

        async def second_leads() -> bool:
            return await _holder(api, namespace, lease) == "two"

        await eventually(second_leads, "replica two to take over within the lease time",
                         timeout=30)
        await apply_all(api, JobWrapper("after", namespace).runtime("600s").obj())

        async def admitted_after() -> dict[str, str] | None:
            found = await _admitted_by(api, namespace)
            return found if "after" in found else None

        by = await eventually(admitted_after, "the new leader to admit")
        assert by == {"before": "one", "after": "two"}, "only the leader ever writes"
    finally:
        first.kill()
        if second is not None:
            second.kill()

