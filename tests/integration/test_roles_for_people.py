"""Roles for people on the real control plane: a tenant bound only to the built-in `edit` role
in their namespace submits a queued Job and sees its Workload and LocalQueue (through the
aggregation of deploy/user-roles.yaml), but cannot touch ClusterQueues or Workload status.
Every request is the tenant's own, made with kubectl's impersonation. A researcher's account
bound to `edit` runs `kubectl admitter`: without admitter-clusterqueue-viewer it sees no
ClusterQueue; with it, `queues`, `explain` and `top -A` show the whole cluster's queues and
work, and whether a Job could ever fit."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from admitter_world import apply_all, in_process_controller, jobs, running, workloads
from test_helm_chart_on_cluster import service_account_kubeconfig
from test_kubectl_plugin import as_json, kubectl_admitter

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


async def test_the_clusterqueue_viewer_lets_a_researcher_with_edit_run_every_plugin_command(
        local_cluster: LocalCluster, api: Kube, namespace: str, kubeconfig: Path,
        user_roles: None, tmp_path: Path) -> None:
    token = secrets.token_hex(3)
    queue, elsewhere = f"shared-{token}", f"{namespace[:50]}-other"
    local_cluster.kubectl("create", "namespace", elsewhere)
    await apply_all(api, *leaf_queue(queue, 16, namespace=namespace, local_name="team"),
                    leaf_queue(queue, 16, namespace=elsewhere, local_name="team")[1])
    local_cluster.kubectl("create", "serviceaccount", "researcher", "-n", namespace)
    local_cluster.kubectl("create", "rolebinding", "researcher-edit", "-n", namespace,
                          "--clusterrole=edit", f"--serviceaccount={namespace}:researcher")
    user = str(service_account_kubeconfig(local_cluster, namespace,
                                          tmp_path / "researcher.kubeconfig", "researcher"))
    # A Job of another team runs; one of the researcher's asks 16 GPUs in one pod on
    # 8-GPU nodes, and can never fit.
    await apply_all(api, JobWrapper("theirs", elsewhere).queue("team").gpus(8).obj(),
                    JobWrapper("whole", namespace).queue("team").gpus(16).obj())
    viewer = f"admitter-clusterqueue-viewer-{token}"
    try:
        async with in_process_controller(kubeconfig):
            async def theirs_running_and_whole_explained() -> bool:
                waiting = [wl for wl in await workloads(api, namespace)
                           if (wl.get("status") or {}).get("conditions")]
                return running((await jobs(api, elsewhere))["theirs"]) and bool(waiting)

            await eventually(theirs_running_and_whole_explained,
                             "the other team's Job running and the whole-node Job explained")

            def reading(*args: str) -> Any:
                return as_json(local_cluster, *args, "-n", namespace, "--kubeconfig", user)

            # Without the role: no ClusterQueue (and the plugin may say which role it lacks).
            alone = kubectl_admitter(local_cluster, "queues", "-o", "json", "-n", namespace,
                                     "--kubeconfig", user, check=False)
            assert ("admitter-clusterqueue-viewer" in alone.stderr if alone.returncode
                    else json.loads(alone.stdout)["queues"] == []), alone
            local_cluster.kubectl("create", "clusterrolebinding", viewer,
                                  "--clusterrole=admitter-clusterqueue-viewer",
                                  f"--serviceaccount={namespace}:researcher")

            async def every_command_reads_the_cluster() -> tuple[Any, ...] | None:
                listed = reading("queues")
                explained = reading("explain", "whole")
                everywhere = reading("top", "-A")
                names = {row["name"] for row in listed["queues"]}
                running_in = {row["namespace"] for row in everywhere["running"]}
                if queue in names and elsewhere in running_in:
                    return listed, explained, everywhere
                return None

            _, explained, _ = await eventually(every_command_reads_the_cluster,
                                               "the plugin to read the cluster's queues")
            assert explained["clusterQueue"] == queue
            assert explained["queueOrder"] is not None
            assert explained["never"], explained
    finally:
        local_cluster.kubectl("delete", "clusterrolebinding", viewer, "--ignore-not-found")
        local_cluster.kubectl("delete", "namespace", elsewhere, "--wait=false")
