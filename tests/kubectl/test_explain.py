"""What `kubectl admitter explain` says would let a Workload start, and where it stands, from
the status fields alone (no cluster needed)."""

from __future__ import annotations

from typing import Any

from admitter.core.decisions import PendingReason
from admitter.kube.objects import format_time
from admitter.kubectl.explain import would_start
from admitter.kubectl.queues import explain_queue, queue_rows, ranked_behind
from admitter.kubectl.state import QueueReading, job_kind, job_name
from admitter.kubectl.times import moment

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


def waiting(reason: PendingReason, **status: Any) -> dict[str, Any]:
    return {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": reason,
                            "message": "held"}], **status}


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
    assert would_start(state, blocked, None) == (
        f"when {NAMESPACE}/sweep's protection ends {moment(ends, NOW)}")
    assert moment(ends, NOW).endswith("(in 42m)")


def test_never_backoff_and_limits_read_as_what_would_change() -> None:
    backoff = workload("flaky", status=waiting(PendingReason.BACKOFF,
                                               requeueAt=format_time(NOW + 90)))
    capped = workload("big", status=waiting(PendingReason.LIMIT_EXCEEDED))
    state = cluster(backoff, capped)
    assert would_start(state, backoff, None) == f"when its backoff ends {moment(NOW + 90, NOW)}"
    assert would_start(state, capped, None).startswith(
        "when what the queue named above holds falls below its limit by 8 GPUs")
    assert would_start(state, capped, "no rack has 24 free GPUs") == (
        "never: no rack has 24 free GPUs, even with nothing else running")


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
