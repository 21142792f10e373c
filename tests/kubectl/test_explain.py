"""What `kubectl admitter explain` says would let a Workload start, and where it stands, from
the status fields alone (no cluster needed)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from admitter.core.decisions import PendingReason
from admitter.core.model import GPU
from admitter.core.quota import QuotaBlock
from admitter.core.topology import HOSTNAME
from admitter.kube.objects import format_time
from admitter.kubectl.explain import (
    assumed_nodes,
    explain_workload,
    pod_nodes,
    render,
    where_it_runs,
    would_start,
)
from admitter.kubectl.queues import explain_queue, queue_rows, ranked_behind
from admitter.kubectl.state import QueueReading, job_kind, job_name
from admitter.kubectl.times import moment
from admitter.testing import RACK_LABEL

from builders.plugin_api import FakeKube

NOW = 1_796_000_000.0
NAMESPACE = "team-a"


def workload(name: str, queue: str = "q", *, created: float = NOW - 600, priority: int = 0,
             admitted_at: float | None = None, min_runtime: str = "30m",
             status: dict[str, Any] | None = None) -> dict[str, Any]:
    full = dict(status or {})
    if admitted_at is not None:
        full["admission"] = {"clusterQueue": "b", "admittedAt": format_time(admitted_at)}
    return {"metadata": {"name": f"job-{name}-00000", "namespace": NAMESPACE, "uid": name,
                         "creationTimestamp": format_time(created),
                         "ownerReferences": [{"kind": "Job", "name": name, "uid": "j" + name}]},
            "spec": {"queueName": queue, "priority": priority, "minRuntime": min_runtime,
                     "podSets": [{"name": "main", "count": 1,
                                  "requests": {"nvidia.com/gpu": "8"}}]},
            "status": full}


def waiting(reason: PendingReason, message: str = "held", **status: Any) -> dict[str, Any]:
    return {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": reason,
                            "message": message}], **status}


def cluster(*workloads: dict[str, Any]) -> QueueReading:
    queues = {
        "root": {"metadata": {"name": "root"}, "spec": {},
                 "status": {"fairShare": {"nvidia.com/gpu": "16"}, "rank": 1}},
        "a": {"metadata": {"name": "a"},
              "spec": {"parent": "root", "resources": {"nvidia.com/gpu": {
                  "quota": 4, "overQuotaWeight": 1}}},
              "status": {"deserved": {"nvidia.com/gpu": "4"}, "fairShare": {"nvidia.com/gpu": "8"},
                         "gpuBudget": 8, "owedGpuHoursInWindow": 1344, "rank": 1,
                         "gpuHoursInWindow": 12.5}},
        "b": {"metadata": {"name": "b"},
              "spec": {"parent": "root", "resources": {"nvidia.com/gpu": {
                  "quota": 4, "overQuotaWeight": 1, "limit": 8}}},
              "status": {"deserved": {"nvidia.com/gpu": "4"}, "fairShare": {"nvidia.com/gpu": "8"},
                         "allocated": {"nvidia.com/gpu": "8"}, "gpuBudget": 8,
                         "owedGpuHoursInWindow": 1344, "rank": 2, "gpuHoursInWindow": 100.0}},
    }
    local = {(NAMESPACE, "q"): {"metadata": {"name": "q", "namespace": NAMESPACE},
                                "spec": {"clusterQueue": "a"}}}
    return QueueReading(NOW, queues, local, list(workloads))


def test_waiting_for_a_protection_names_who_holds_it_and_when_it_ends() -> None:
    ends = NOW + 42 * 60
    blocked = workload("train", status=waiting(
        PendingReason.PROTECTED_VICTIMS, blockedUntil=format_time(ends),
        blockedBy=[f"{NAMESPACE}/job-sweep-00000"]))
    holder = workload("sweep", admitted_at=ends - 1800)
    other = workload("other", admitted_at=ends - 1800)  # as protected, but not in the way
    state = cluster(blocked, holder, other)
    assert would_start(state, blocked) == (
        f"when {NAMESPACE}/sweep's protection ends {moment(ends, NOW)}")
    assert moment(ends, NOW).endswith("(in 42m)")


def test_never_backoff_and_limits_read_as_what_would_change() -> None:
    backoff = workload("flaky", status=waiting(PendingReason.BACKOFF,
                                               requeueAt=format_time(NOW + 90)))
    never = workload("huge", status=waiting(
        PendingReason.NEVER_FITS, "no node offers 16 nvidia.com/gpu per pod"))
    state = cluster(backoff, never)
    assert would_start(state, backoff) == f"when its backoff ends {moment(NOW + 90, NOW)}"
    assert would_start(state, never) == "never: no node offers 16 nvidia.com/gpu per pod"


def test_a_limit_or_fair_share_names_the_queue_whose_bound_holds_it() -> None:
    """The parent `org` holds the workload back, not its own ClusterQueue `a`."""
    at_limit = workload("big", status=waiting(
        PendingReason.LIMIT_EXCEEDED, QuotaBlock("org", GPU, 16, 8, 16, "limit").message()))
    too_big = workload("huge", status=waiting(
        PendingReason.LIMIT_EXCEEDED, QuotaBlock("org", GPU, 0, 24, 16, "limit").message()))
    over_share = workload("steady", status=waiting(
        PendingReason.QUOTA_EXCEEDED, QuotaBlock("a", GPU, 8, 8, 12, "fair share").message()
        + " (non-preemptible work stays within its fair share)"))
    unread = workload("old", status=waiting(PendingReason.LIMIT_EXCEEDED, "capped"))
    state = cluster(at_limit, too_big, over_share, unread)
    assert would_start(state, at_limit) == (
        "when queue org holds at most 8 nvidia.com/gpu (it holds 16: work there ends or is "
        "preempted) or its limit grows")
    assert would_start(state, too_big) == (
        "only once queue org's limit grows to 24 nvidia.com/gpu: it asks for more than the 16 "
        "it allows")
    assert would_start(state, over_share).startswith(
        "when queue a holds at most 4 nvidia.com/gpu (it holds 8")
    assert would_start(state, unread).startswith("when what ClusterQueue a (or the queue above")
    assert all("named above" not in would_start(state, wl)
               for wl in (at_limit, too_big, over_share, unread))


def test_a_running_workload_names_its_nodes_and_the_domain_it_is_pinned_to() -> None:
    found = {"nodes": {"b0-r1-n1": 1, "b0-r1-n0": 2}, "nodesFrom": "pods",
             "topologyDomain": {RACK_LABEL: "r1"},
             "podSetDomains": {"workers": {RACK_LABEL: "r1", HOSTNAME: "b0-r1-n0"}}}
    assert where_it_runs(found) == (
        f"on b0-r1-n0 (2 pods), b0-r1-n1 (1 pod); pinned to {RACK_LABEL}=r1; pod set workers "
        f"pinned to {RACK_LABEL}=r1, {HOSTNAME}=b0-r1-n0")
    assumed = {**found, "nodesFrom": "admission", "topologyDomain": {}, "podSetDomains": {}}
    assert where_it_runs(assumed) == (
        "on b0-r1-n0 (2 pods), b0-r1-n1 (1 pod), as assumed at admission (its pods could not "
        "be read); not pinned to a topology domain")
    assert where_it_runs({**found, "nodes": {}}).startswith("no pod on a node yet; pinned")
    admission = {"nodeHints": [{"podSet": "main", "node": "n0", "count": 2},
                               {"podSet": "workers", "node": "n0", "count": 1}]}
    assert assumed_nodes(admission) == {"n0": 3}


async def test_explain_reads_the_pods_of_a_running_job_by_its_label() -> None:
    wl = workload("train", admitted_at=NOW - 60)
    wl["metadata"]["ownerReferences"] = [{"kind": "JobSet", "name": "train", "uid": "js"}]

    def pod(node: str | None, phase: str = "Running") -> dict[str, Any]:
        return {"spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}

    client = FakeKube(pods=[pod("n1"), pod("n1"), pod("n2"), pod(None, "Pending"),
                            pod("n3", "Succeeded")])
    assert await pod_nodes(client, wl) == {"n1": 2, "n2": 1}  # type: ignore[arg-type]
    assert client.queries == [("/api/v1/namespaces/team-a/pods",
                               {"labelSelector": "jobset.sigs.k8s.io/jobset-name=train"})]
    denied = FakeKube(forbidden=("pods",))
    assert await pod_nodes(denied, wl) is None  # type: ignore[arg-type]


def test_queue_order_is_the_cores_priority_then_submission() -> None:
    early = workload("early", created=NOW - 900)
    late = workload("late", created=NOW - 60)
    urgent = workload("urgent", created=NOW - 30, priority=10)
    state = cluster(late, early, urgent)
    assert [wl["metadata"]["uid"] for wl in state.queue_order("a")] == [
        "urgent", "early", "late"]
    assert state.leaf_order() == ["a", "b"]


def test_queue_rows_roll_leaf_hours_up_and_explain_a_queue_step_by_step() -> None:
    state = cluster()
    rows = {row["name"]: row for row in queue_rows(state)}
    assert rows["root"]["usedGpuHours"] == 112.5
    assert (rows["b"]["limit"], rows["b"]["held"], rows["b"]["rank"]) == (8, 8, 2)
    steps = explain_queue(state, "b")["steps"]
    assert steps[0].startswith("1. Deserved: min(quota 4, what its workloads request) = 4")
    assert "gives it 4 more" in steps[1]
    assert steps[2] == "3. Limit: 8 GPUs, reached: it gets no more."


def test_a_queue_ranked_behind_a_sibling_is_told_with_both_uses_of_budget() -> None:
    idle = cluster()
    assert ranked_behind(idle, "b") == [], "a sibling that wants nothing is in no one's way"
    state = cluster()
    state.cluster_queues["a"]["status"]["pendingWorkloads"] = 2
    assert ranked_behind(state, "a") == []
    assert ranked_behind(state, "b") == [
        "b (rank 2, 7.4% of its owed GPU-hours used) comes after a (rank 1, 0.93%)"]


def test_a_workload_names_the_kind_and_name_of_the_job_it_was_made_for() -> None:
    def made_for(*owners: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"name": "w", "namespace": "ns", "ownerReferences": list(owners),
                             "labels": {"admitter.dev/job-name": "train"}}}

    jobset = made_for({"kind": "JobSet", "name": "train", "uid": "u"})
    assert (job_kind(jobset), job_name(jobset)) == ("JobSet", "train")
    assert (job_kind(made_for()), job_name(made_for())) == ("job", "train")  # owner gone


async def test_a_maximum_run_time_is_told_while_running_and_once_it_stopped_the_job() -> None:
    running = workload("notebook", admitted_at=NOW - 600, min_runtime="10m",
                       status={"pastRunSeconds": 300.0})
    running["spec"]["maxRuntime"] = "30m"
    found = await explain_workload(FakeKube(), cluster(running), running)  # type: ignore[arg-type]
    text = _text(render(found, NOW))
    assert "min runtime 10m, max runtime 30m, resumable" in text
    assert f"Stops {moment(NOW + 900, NOW)}, at its maximum run time, for good" in text

    stopped = workload("notebook", min_runtime="10m", status={"conditions": [
        {"type": "Finished", "status": "True", "reason": "MaxRuntimeExceeded",
         "message": "ran 30m, its maximum run time"}]})
    stopped["spec"]["maxRuntime"] = "30m"
    found = await explain_workload(FakeKube(), cluster(stopped), stopped)  # type: ignore[arg-type]
    assert "Finished: MaxRuntimeExceeded: ran 30m, its maximum run time" in _text(
        render(found, NOW))


def _text(renderable: Any) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()
