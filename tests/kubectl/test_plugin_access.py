"""The plugin for a person who may read only their namespace: it says what it could not read
and which role would grant it; `-A` finds a name in any namespace it may read; `queues -o
wide` fits 120 columns."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from admitter.kube.objects import format_time
from admitter.kubectl import main as plugin
from admitter.kubectl.explain import explain_workload, render
from admitter.kubectl.queues import WIDE_COLUMNS, queue_rows, render_table
from admitter.kubectl.state import (
    CLUSTER_QUEUE_VIEWER,
    CLUSTER_QUEUES_UNREAD,
    QUEUE_VIEWER,
    Ambiguous,
    QueueReading,
    find_workload,
    read_state,
)

from builders.plugin_api import FakeKube

NOW = 1_796_000_000.0


def workload(name: str, namespace: str, *, job: str | None = None) -> dict[str, Any]:
    owners = [{"kind": "Job", "name": job, "uid": f"u-{job}"}] if job else []
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}/{name}",
                         "creationTimestamp": format_time(NOW - 60),
                         "ownerReferences": owners},
            "spec": {"queueName": "team", "priority": 0, "minRuntime": "1h",
                     "podSets": [{"name": "main", "count": 1,
                                  "requests": {"nvidia.com/gpu": "8"}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False",
                                       "reason": "NoFit", "message": "no room"}]}}


def local_queue(namespace: str, target: str) -> dict[str, Any]:
    return {"metadata": {"name": "team", "namespace": namespace},
            "spec": {"clusterQueue": target}}


def cluster_queue(name: str, parent: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"parent": parent, "resources": {"nvidia.com/gpu": {"quota": 64}}},
            "status": {"deserved": {"nvidia.com/gpu": "64"}, "fairShare": {"nvidia.com/gpu": "96"},
                       "allocated": {"nvidia.com/gpu": "1024"}, "gpuBudget": 1024.5,
                       "owedGpuHoursInWindow": 172_032, "gpuHoursInWindow": 123_456.7,
                       "rank": 12, "pendingWorkloads": 1234, "admittedWorkloads": 5678}}


def restricted(namespace: str = "team-a") -> FakeKube:
    """Bound to `edit` in `namespace`: its LocalQueues and Workloads, no ClusterQueues."""
    return FakeKube(namespace=namespace, forbidden=("clusterqueues",),
                    cluster_forbidden=("localqueues", "workloads"),
                    objects={"workloads": [workload("job-train-1", namespace, job="train"),
                                           workload("job-other-1", "team-b", job="other")],
                             "localqueues": [local_queue(namespace, "research-a")],
                             "jobs": [{"metadata": {"name": "train", "namespace": namespace,
                                                    "uid": "u-train"}}],
                             "events": []})


async def test_reading_what_it_may_not_says_what_and_which_role_would_grant_it() -> None:
    state = await read_state(restricted(), "team-a")  # type: ignore[arg-type]
    assert [wl["metadata"]["namespace"] for wl in state.workloads] == ["team-a"]
    assert state.cluster_queues == {}
    assert state.unread[0] == CLUSTER_QUEUES_UNREAD
    assert CLUSTER_QUEUE_VIEWER in str(state.unread[0])
    assert "ClusterQueues at cluster scope" in str(state.unread[0])
    assert [str(u) for u in state.unread[1:]] == [
        f"could not read {what} of every namespace, only those of namespace team-a are shown "
        f"(forbidden); a ClusterRoleBinding to the ClusterRole {QUEUE_VIEWER} grants it"
        for what in ("LocalQueues", "Workloads")]


async def test_explain_without_cluster_queues_gives_no_empty_order_and_names_the_role() -> None:
    client = restricted()
    state = await read_state(client, "team-a")  # type: ignore[arg-type]
    wl = await find_workload(client, state, "team-a", "job-train-1")  # type: ignore[arg-type]
    assert wl is not None
    found = await explain_workload(client, state, wl)  # type: ignore[arg-type]
    console = Console(width=200, record=True)
    console.print(render(found, state.now))
    text = console.export_text()
    assert "Position: 1 of 1 in ClusterQueue research-a\n" in text
    assert "None" not in text and "of 0" not in text
    assert f"Queue order: not shown: {CLUSTER_QUEUES_UNREAD}" in " ".join(text.split())


def test_queues_without_cluster_queues_fails_naming_the_role(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    async def connect(*_: object) -> tuple[FakeKube, str]:
        return restricted(), "team-a"

    monkeypatch.setattr(plugin, "connect", connect)
    assert plugin.main(["queues"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert CLUSTER_QUEUE_VIEWER in captured.err and "ClusterQueues at cluster scope" in (
        captured.err)


def test_explain_warns_on_stderr_of_what_it_could_not_read(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    async def connect(*_: object) -> tuple[FakeKube, str]:
        return restricted(), "team-a"

    monkeypatch.setattr(plugin, "connect", connect)
    assert plugin.main(["explain", "train", "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert f"Warning: {CLUSTER_QUEUES_UNREAD}" in captured.err
    assert '"workload": "team-a/job-train-1"' in captured.out


def reading(*workloads: dict[str, Any], local: dict[tuple[str, str], Any] | None = None,
            ) -> QueueReading:
    return QueueReading(NOW, {}, local or {}, list(workloads))


async def test_all_namespaces_finds_a_job_or_workload_wherever_it_is() -> None:
    state = reading(workload("job-train-1", "team-a", job="train"),
                    workload("job-other-1", "team-b", job="other"),
                    workload("job-train-9", "team-c", job="train"))
    client = FakeKube()
    found = await find_workload(client, state, None, "other")  # type: ignore[arg-type]
    assert found is not None and found["metadata"]["namespace"] == "team-b"
    found = await find_workload(client, state, None, "job-train-9")  # type: ignore[arg-type]
    assert found is not None and found["metadata"]["namespace"] == "team-c"
    assert await find_workload(client, state, "default", "other") is None  # type: ignore[arg-type]
    with pytest.raises(Ambiguous, match=r"several namespaces \(team-a, team-c\)"):
        await find_workload(client, state, None, "train")  # type: ignore[arg-type]


def test_explain_name_with_all_namespaces_is_not_looked_for_in_default(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeKube(namespace="default", objects={
        "workloads": [workload("job-other-1", "team-b", job="other")],
        "localqueues": [local_queue("team-b", "research-b")],
        "clusterqueues": [cluster_queue("research-b")], "events": []})

    async def connect(*_: object) -> tuple[FakeKube, str]:
        return client, "default"

    monkeypatch.setattr(plugin, "connect", connect)
    assert plugin.main(["explain", "other", "-A", "-o", "json"]) == 0
    assert '"workload": "team-b/job-other-1"' in capsys.readouterr().out
    assert plugin.main(["explain", "other", "-o", "json"]) == 1
    assert 'namespace "default"' in capsys.readouterr().err
    assert plugin.main(["explain", "team", "-A", "-o", "json"]) == 0  # the LocalQueue's target
    assert '"name": "research-b"' in capsys.readouterr().out


def test_queues_wide_fits_120_columns_with_every_header_whole() -> None:
    queues = {"research": cluster_queue("research")}
    for team in ("vision-pretraining", "language-models-eval", "robotics"):
        queues[team] = cluster_queue(team, parent="research")
    state = QueueReading(NOW, queues, {}, [])
    console = Console(width=120, record=True)
    console.print(render_table(queue_rows(state)))
    lines = console.export_text().splitlines()
    assert all(len(line.rstrip()) <= 120 for line in lines)
    assert lines[0].split() == [word for header in WIDE_COLUMNS for word in header.split()]
    assert lines[2].startswith("  language-models-eval ")  # indented under its parent
    assert lines[1].split() == ["research", "64", "1", "none", "1024.5", "64", "96", "1024",
                                "493826.8", "172032", "287%", "12", "1234", "5678"]
