"""Roles for people on the real control plane: a tenant bound only to the built-in `edit` role
in their namespace submits a queued Job and sees its Workload and LocalQueue (through the
aggregation of deploy/user-roles.yaml), but cannot touch ClusterQueues or Workload status.
Every request is the tenant's own, made with kubectl's impersonation."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from admitter_world import apply_all, in_process_controller, workloads

from admitter.kube.client import Kube
from admitter.testing import LocalCluster
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration
ROLES = Path(__file__).parents[2] / "deploy" / "user-roles.yaml"
TENANT = "researcher@example.com"


@pytest.fixture(scope="module")
def user_roles(local_cluster: LocalCluster, admitter_crds: None) -> None:
    local_cluster.kubectl("apply", "-f", str(ROLES))


def as_tenant(cluster: LocalCluster, namespace: str, *args: str, input: str | None = None,
              ) -> tuple[int, str]:
    """kubectl as the tenant: its exit code and what it printed."""
    done = cluster.kubectl("--as", TENANT, "-n", namespace, *args, check=False, input=input)
    return done.returncode, done.stdout + done.stderr


async def test_a_tenant_with_edit_submits_and_reads_but_cannot_write_queues_or_status(
        local_cluster: LocalCluster, api: Kube, namespace: str, kubeconfig: Path,
        user_roles: None) -> None:
    cluster_queue_name = f"team-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(cluster_queue_name, 8, namespace=namespace,
                                     local_name="team"))
    local_cluster.kubectl("create", "rolebinding", "tenant-edit", "-n", namespace,
                          "--clusterrole=edit", f"--user={TENANT}")

    async def reads_local_queues() -> str | None:
        code, out = as_tenant(local_cluster, namespace, "get", "localqueues", "-o", "name")
        return out if code == 0 else None

    # The aggregation controller copies the viewer rules into `edit` shortly after they exist.
    assert "localqueue.admitter.dev/team" in await eventually(
        reads_local_queues, "edit to include reading LocalQueues")

    job = JobWrapper("train", namespace).queue("team").gpus(1).obj()
    code, out = as_tenant(local_cluster, namespace, "create", "-f", "-", input=json.dumps(job))
    assert code == 0, out

    async def the_workload() -> dict | None:
        found = await workloads(api, namespace)
        return found[0] if found else None

    async with in_process_controller(kubeconfig):
        workload = await eventually(the_workload, "the Job's Workload")
    name = workload["metadata"]["name"]
    code, out = as_tenant(local_cluster, namespace, "get", "workload", name, "-o", "json")
    assert code == 0, out
    assert json.loads(out)["metadata"]["name"] == name

    denied = [
        ("patch", "clusterqueue", cluster_queue_name, "--type=merge",
         "-p", '{"metadata":{"labels":{"tenant":"was-here"}}}'),
        ("delete", "clusterqueue", cluster_queue_name),
        ("patch", "workload", name, "--subresource=status", "--type=merge",
         "-p", '{"status":{"conditions":[]}}'),
        ("patch", "workload", name, "--type=merge",
         "-p", '{"metadata":{"labels":{"tenant":"was-here"}}}'),
    ]
    for command in denied:
        code, out = as_tenant(local_cluster, namespace, *command)
        assert code != 0 and "forbidden" in out.lower(), (command, out)
