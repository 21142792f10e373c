"""`kubectl admitter` found by kubectl on PATH and run against the real control plane: its
queues, explain and top agree with the ClusterQueue and Workload status the controller wrote,
a Job that can never fit is told so, and a Job waiting for a protection names who and when."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from admitter_world import (
    apply_all,
    in_process_controller,
    jobs,
    pods,
    priority_class,
    running,
    workloads,
)
from team_tree import two_teams

from admitter.api.quantity import parse_quantity
from admitter.api.workload import CONDITION_QUOTA_RESERVED
from admitter.core.decisions import PendingReason
from admitter.core.model import GPU
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, condition, parse_time
from admitter.kubectl.state import CLUSTER_QUEUE_VIEWER, CLUSTER_QUEUES_UNREAD
from admitter.testing import RACK_LABEL, LocalCluster
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration


def kubectl_admitter(cluster: LocalCluster, *args: str, check: bool = True,
                     columns: int = 200) -> subprocess.CompletedProcess[str]:
    """`kubectl admitter ARGS` in a terminal `columns` wide: kubectl finds the console script
    next to this Python."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "KUBECONFIG": str(cluster.kubeconfig_path), "COLUMNS": str(columns)}
    return subprocess.run([str(cluster.binaries.kubectl), "admitter", *args],
                          capture_output=True, text=True, check=check, timeout=60, env=env)


def as_json(cluster: LocalCluster, *args: str) -> Any:
    return json.loads(kubectl_admitter(cluster, *args, "-o", "json").stdout)


def gpus(amounts: dict[str, Any] | None) -> float:
    return float(parse_quantity((amounts or {}).get(GPU, 0)))


async def waiting(api: Kube, namespace: str, job: str) -> Obj | None:
    """The Job's Workload once the controller wrote why it waits."""
    for wl in await workloads(api, namespace):
        owner = (wl["metadata"].get("ownerReferences") or [{}])[0].get("name")
        reserved = condition(wl, CONDITION_QUOTA_RESERVED) or {}
        if owner == job and reserved.get("status") == "False":
            return wl
    return None


RESEARCHER_RBAC = """
apiVersion: v1
kind: ServiceAccount
metadata: {{name: researcher, namespace: {namespace}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: researcher, namespace: {namespace}}}
rules:
- apiGroups: [admitter.dev]
  resources: [workloads, localqueues]
  verbs: [get, list]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list]
- apiGroups: [""]
  resources: [events]
  verbs: [list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: researcher, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: researcher}}
subjects: [{{kind: ServiceAccount, name: researcher, namespace: {namespace}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {namespace}-queues}}
rules:
- apiGroups: [admitter.dev]
  resources: [clusterqueues]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {namespace}-queues}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {namespace}-queues}}
subjects: [{{kind: ServiceAccount, name: researcher, namespace: {namespace}}}]
"""


def account_kubeconfig(cluster: LocalCluster, namespace: str, account: str,
                       directory: Path) -> Path:
    """A kubeconfig with a token of the ServiceAccount `account` of `namespace`, its context
    in that namespace."""
    token = cluster.kubectl("create", "token", account, "-n", namespace).stdout.strip()
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": account,
        "clusters": [{"name": "local", "cluster": {
            "server": cluster.server, "certificate-authority": str(cluster.ca_path)}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {
            "cluster": "local", "user": account, "namespace": namespace}}],
    }
    path = directory / f"{account}.kubeconfig"
    path.write_text(json.dumps(config))
    return path


def researcher_kubeconfig(cluster: LocalCluster, namespace: str, directory: Path) -> Path:
    """A kubeconfig with a ServiceAccount token that may read its namespace's Workloads,
    LocalQueues, Jobs and Events and the ClusterQueues, nothing else."""
    cluster.kubectl("apply", "-f", "-", input=RESEARCHER_RBAC.format(namespace=namespace))
    return account_kubeconfig(cluster, namespace, "researcher", directory)


def editor_kubeconfig(cluster: LocalCluster, namespace: str, directory: Path) -> Path:
    """A kubeconfig of a person bound to the built-in `edit` role in `namespace`, and to
    nothing else."""
    cluster.kubectl("create", "serviceaccount", "editor", "-n", namespace)
    cluster.kubectl("create", "rolebinding", "editor", "-n", namespace, "--clusterrole=edit",
                    f"--serviceaccount={namespace}:editor")
    return account_kubeconfig(cluster, namespace, "editor", directory)
USER_ROLES = Path(__file__).parents[2] / "deploy" / "user-roles.yaml"
CLUSTER_QUEUE_VIEWER_ROLE = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {CLUSTER_QUEUE_VIEWER}}}
rules:
- apiGroups: [admitter.dev]
  resources: [clusterqueues, clusterqueues/status]
  verbs: [get, list, watch]
"""
"""The role the plugin names, made here where deploy/user-roles.yaml does not have it."""


async def test_queues_explain_and_top_tell_what_the_status_says(
        api: Kube, namespace: str, kubeconfig: Path, local_cluster: LocalCluster,
        tmp_path: Path) -> None:
    async with two_teams(api, namespace, "org") as (root, team_a, team_b):
        # team b fills 7 of the 8 nodes with protected work (beyond its deserved 32 GPUs it leaves
        # room for short jobs), team a the eighth (within its deserved GPUs)
        protected = [JobWrapper(f"b-{i}", namespace).queue("b").min_runtime("30m").runtime("1h")
                     .obj() for i in range(7)]
        await apply_all(api, *protected)
        async with in_process_controller(kubeconfig):
            async def all_running(count: int) -> bool:
                return sum(running(j) for j in (await jobs(api, namespace)).values()) == count

            await eventually(lambda: all_running(7), "team b's protected work to run", timeout=60)
            await apply_all(api, JobWrapper("a-fill", namespace).queue("a").min_runtime("30m")
                            .runtime("1h").obj())
            await eventually(lambda: all_running(8), "team a's first job to run", timeout=60)
            await apply_all(api, JobWrapper("a-train", namespace).queue("a").min_runtime("1h")
                            .obj())
            blocked = await eventually(lambda: waiting(api, namespace, "a-train"),
                                       "why a-train waits", timeout=45)
            # three whole nodes in one rack (a rack has two), submitted after: second in the queue
            await apply_all(api, JobWrapper("a-huge", namespace).queue("a").pods(3)
                            .required(RACK_LABEL).obj())
            await eventually(lambda: waiting(api, namespace, "a-huge"), "why a-huge waits",
                             timeout=45)

            shown = ("fairShare", "deserved", "allocated", "gpuBudget", "owedGpuHoursInWindow",
                     "rank")

            async def queue_statuses() -> dict[str, dict[str, Any]] | None:
                """Our queues' status fields the plugin shows, once all three have a rank."""
                listed = await api.request("GET", "/apis/admitter.dev/v1alpha1/clusterqueues")
                ours = {cq["metadata"]["name"]: {field: (cq.get("status") or {}).get(field)
                                                 for field in shown}
                        for cq in listed["items"] if cq["metadata"]["name"].startswith(root)}
                ranked = len(ours) == 3 and all(status["rank"] for status in ours.values())
                return ours if ranked else None

            async def beside_steady_status(*args: str) -> tuple[dict[str, Any], Any] | None:
                """The plugin's answer, given while the queues' status stayed the same: the
                controller rewrites fair shares as a-huge's demand reaches them."""
                before = await queue_statuses()
                if before is None:
                    return None
                answer = as_json(local_cluster, *args)
                return (before, answer) if await queue_statuses() == before else None

            statuses, listed = await eventually(lambda: beside_steady_status("queues"),
                                                "the queues' budgets and ranks", timeout=30)
            rows = {row["name"]: row for row in listed["queues"]}
            for name in (root, team_a, team_b):
                status, row = statuses[name], rows[name]
                assert row["fairShare"] == gpus(status["fairShare"])
                assert row["deserved"] == gpus(status["deserved"])
                assert row["held"] == gpus(status["allocated"])
                assert row["budget"] == status["gpuBudget"]
                assert row["owedGpuHours"] == status["owedGpuHoursInWindow"]
                assert row["rank"] == status["rank"]
            assert rows[team_b]["held"] == 56 and rows[team_a]["held"] == 8
            assert rows[team_a]["budget"] == rows[team_b]["budget"] == 32
            assert rows[team_a]["rank"] == 1, "the team that used none of its budget comes first"
            tree = kubectl_admitter(local_cluster, "queues").stdout
            assert team_a in tree and "budget 32 GPUs" in tree
            wide = kubectl_admitter(local_cluster, "queues", "-o", "wide", columns=120).stdout
            lines = wide.splitlines()
            assert lines[0].split() == ["NAME", "QUOTA", "WEIGHT", "LIMIT", "BUDGET",
                                        "DESERVED", "FAIR", "HELD", "USED-H", "OWED-H", "USED%",
                                        "RANK", "PENDING", "ADMITTED"], wide
            assert all(len(line.rstrip()) <= 120 for line in lines) and "…" not in wide, wide

            # waiting for a protection: the workload that holds it and when it ends
            train = as_json(local_cluster, "explain", "a-train", "-n", namespace)
            reason = condition(blocked, CONDITION_QUOTA_RESERVED)
            assert train["reason"] == reason["reason"] == PendingReason.PROTECTED_VICTIMS
            assert train["message"] == reason["message"]
            assert train["blockedUntil"] == blocked["status"]["blockedUntil"]
            holders = blocked["status"]["blockedBy"]
            assert holders and all(key.startswith(f"{namespace}/job-b-") for key in holders)
            assert train["position"] == 1 and train["queueLength"] == 2
            until = parse_time(train["blockedUntil"])
            assert until is not None
            start = train["wouldStart"]
            assert start.startswith(f"when {namespace}/b-") and "'s protection ends at " in start
            assert start.endswith(("m)", "s)")) and "(in 2" in start, "29 of the 30 minutes left"
            text = kubectl_admitter(local_cluster, "explain", "a-train", "-n", namespace).stdout
            assert "Would start: when " in text and "Position: 1 of 2 in ClusterQueue" in text
            anywhere = as_json(local_cluster, "explain", "a-train", "-A")
            assert anywhere["workload"] == train["workload"], "-A looks in every namespace"

            # a Job that can never fit says so, naming the level, whatever else is protected
            huge = as_json(local_cluster, "explain", "a-huge", "-n", namespace)
            assert huge["reason"] == PendingReason.NEVER_FITS and huge["never"]
            assert huge["wouldStart"].startswith("never")
            assert "rack" in huge["never"] and "protect" not in huge["never"]
            huge_text = kubectl_admitter(local_cluster, "explain", "a-huge", "-n", namespace).stdout
            assert "Would start: never" in huge_text

            # a running Job: its node as its pod is bound, the domain it is pinned to
            fill = as_json(local_cluster, "explain", "a-fill", "-n", namespace)
            bound = {pod["spec"]["nodeName"] for pod in await pods(api, namespace, "a-fill")}
            assert fill["nodesFrom"] == "pods" and set(fill["nodes"]) == bound, (fill, bound)
            fill_text = kubectl_admitter(local_cluster, "explain", "a-fill", "-n", namespace)
            assert f"Where: on {bound.pop()} (1 pod); " in fill_text.stdout

            # top: the admitted workloads, most GPUs first, with their protection left
            running_now = {wl["metadata"]["name"]: wl for wl in await workloads(api, namespace)
                           if (wl.get("status") or {}).get("admission")}
            top = as_json(local_cluster, "top", "-n", namespace)["running"]
            assert {row["workload"] for row in top} == set(running_now)
            for row in top:
                wl = running_now[row["workload"]]
                assert row["gpus"] == 8
                assert row["clusterQueue"] == wl["status"]["admission"]["clusterQueue"]
                assert row["admittedAt"] == wl["status"]["admission"]["admittedAt"]
                assert 0 < row["protectionLeftSeconds"] <= 1800 and row["funded"]
            everywhere = as_json(local_cluster, "top", "-A")["running"]
            assert {row["workload"] for row in top} <= {row["workload"] for row in everywhere}

            # explain QUEUE: step by step, from the same status
            now, why = await eventually(lambda: beside_steady_status("explain", team_b),
                                        "team b's queue explained", timeout=30)
            assert why["queue"]["fairShare"] == gpus(now[team_b]["fairShare"])
            assert [step[:2] for step in why["steps"][:3]] == ["1.", "2.", "3."]

            # a researcher's RBAC: their namespace's Workloads and queues, the ClusterQueues
            user = researcher_kubeconfig(local_cluster, namespace, tmp_path)
            theirs = as_json(local_cluster, "explain", "a-train", "-n", namespace,
                             "--kubeconfig", str(user))
            assert (theirs["reason"], theirs["position"]) == (train["reason"], 1)
            huge_theirs = as_json(local_cluster, "explain", "a-huge", "-n", namespace,
                                  "--kubeconfig", str(user))
            assert huge_theirs["never"] == huge["never"], "the core's verdict, nodes unread"
            assert {r["name"] for r in as_json(local_cluster, "queues", "--kubeconfig",
                                               str(user))["queues"]} >= {root, team_a, team_b}

            # kubectl manners: not found is exit status 1
            missing = kubectl_admitter(local_cluster, "explain", "nothing-here", "-n", namespace,
                                       check=False)
            assert missing.returncode == 1 and "nothing-here" in missing.stderr


async def test_a_person_bound_to_edit_is_told_what_they_cannot_read_and_the_role_for_it(
        api: Kube, namespace: str, kubeconfig: Path, local_cluster: LocalCluster,
        tmp_path: Path) -> None:
    """`edit` in a namespace reads its Workloads and LocalQueues (deploy/user-roles.yaml
    aggregates them), never ClusterQueues: `explain` says so and names the ClusterRole that
    reads them, `queues` fails saying the same; bound to that role, both answer in full."""
    local_cluster.kubectl("apply", "-f", str(USER_ROLES))
    cluster_queue_name = f"edit-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(cluster_queue_name, 8, namespace=namespace,
                                     local_name="team"),
                    JobWrapper("huge", namespace).queue("team").gpus(16).obj())
    user = editor_kubeconfig(local_cluster, namespace, tmp_path)
    async with in_process_controller(kubeconfig):
        await eventually(lambda: waiting(api, namespace, "huge"), "why huge waits", timeout=45)

    def as_editor(*args: str) -> subprocess.CompletedProcess[str]:
        return kubectl_admitter(local_cluster, *args, "--kubeconfig", str(user), check=False)

    async def explained() -> subprocess.CompletedProcess[str] | None:
        done = as_editor("explain", "huge")  # once `edit` aggregates reading Workloads
        return done if done.returncode == 0 else None

    done = await eventually(explained, "the editor's explain", timeout=30)
    text = " ".join(done.stdout.split())
    assert "None" not in text and " of 0 " not in text, done.stdout
    assert f"Queue order: not shown: {CLUSTER_QUEUES_UNREAD}" in text, done.stdout
    assert "Waiting: NeverFits" in text and "Would start: never" in text, done.stdout
    assert f"Position: 1 of 1 in ClusterQueue {cluster_queue_name}" in text, done.stdout
    assert f"Warning: {CLUSTER_QUEUES_UNREAD}" in " ".join(done.stderr.split())
    listed = as_editor("queues")
    assert listed.returncode == 1 and listed.stdout == "", listed
    assert f"Error: {CLUSTER_QUEUES_UNREAD}" in " ".join(listed.stderr.split()), listed.stderr

    made = local_cluster.kubectl("get", "clusterrole", CLUSTER_QUEUE_VIEWER,
                                 check=False).returncode != 0
    if made:
        local_cluster.kubectl("apply", "-f", "-", input=CLUSTER_QUEUE_VIEWER_ROLE)
    binding = f"{namespace}-editor-queues"
    local_cluster.kubectl("create", "clusterrolebinding", binding,
                          f"--clusterrole={CLUSTER_QUEUE_VIEWER}",
                          f"--serviceaccount={namespace}:editor")
    try:
        async def queues_listed() -> subprocess.CompletedProcess[str] | None:
            done = as_editor("queues")
            return done if done.returncode == 0 else None

        granted = await eventually(queues_listed, "the queues, once granted", timeout=30)
        assert cluster_queue_name in granted.stdout
        assert "ClusterQueues" not in granted.stderr, granted.stderr
        full = " ".join(as_editor("explain", "huge").stdout.split())
        assert "which is offered capacity " in full and "Queue order: not shown" not in full
    finally:
        local_cluster.kubectl("delete", "clusterrolebinding", binding)
        if made:
            local_cluster.kubectl("delete", "clusterrole", CLUSTER_QUEUE_VIEWER)


async def test_a_gang_that_no_protection_ending_would_place_is_promised_nothing(
        api: Kube, namespace: str, kubeconfig: Path, local_cluster: LocalCluster) -> None:
    """Every rack keeps a 4-GPU non-preemptible Job of team b; team a's own lower-priority,
    resumable Job runs protected for 30 minutes. Evicting it would empty no rack, so team a's
    gang of 2 × 8 GPUs in one rack waits with NoFit: it names no one and promises no time, and
    `explain` says so."""
    await priority_class(api, "reasons-keeper", 100)
    await priority_class(api, "reasons-gang", 10)
    nodes = (await api.request("GET", "/api/v1/nodes"))["items"]
    racks = sorted({n["metadata"]["labels"][RACK_LABEL] for n in nodes
                    if RACK_LABEL in n["metadata"]["labels"]})
    async with two_teams(api, namespace, "rooms"):
        keepers = [JobWrapper(f"keep-{rack}", namespace).queue("b").gpus(4).min_runtime("1h")
                   .node_selector(RACK_LABEL, rack).priority_class("reasons-keeper").obj()
                   for rack in racks]
        await apply_all(api, *keepers, JobWrapper("a-low", namespace).queue("a")
                        .min_runtime("30m").resumable().obj())
        async with in_process_controller(kubeconfig):
            async def all_running() -> bool:
                listed = await jobs(api, namespace)
                return sum(running(job) for job in listed.values()) == len(racks) + 1

            await eventually(all_running, "the keepers and a-low to run", timeout=60)
            await apply_all(api, JobWrapper("a-gang", namespace).queue("a").pods(2)
                            .required(RACK_LABEL).priority_class("reasons-gang").obj())
            blocked = await eventually(lambda: waiting(api, namespace, "a-gang"),
                                       "why a-gang waits", timeout=45)
            reason = condition(blocked, CONDITION_QUOTA_RESERVED)
            assert reason["reason"] == PendingReason.NO_FIT, reason
            assert "a-low" not in reason["message"] and "protect" not in reason["message"]
            status = blocked["status"]
            assert not status.get("blockedBy") and not status.get("blockedUntil"), status
            gang = as_json(local_cluster, "explain", "a-gang", "-n", namespace)
            assert gang["reason"] == PendingReason.NO_FIT
            assert gang["wouldStart"].startswith("when running work ends or is preempted"), gang
