"""The controller's Kueue-shaped series, read from its registry after passes against a fake API
server: every counter exists at 0 before anything happens, quotas and limits are the
ClusterQueue's, workloads held and queue statuses are those the objects show, and the time
from admission to ready is the time the pods took."""

from __future__ import annotations

import math
import re
from pathlib import Path

from fake_api import CLOCK, FakeApi, add, reconciler, settled_pass, submitted_jobs, team
from prometheus_client.metrics import MetricWrapperBase

from admitter.controller.metrics import (
    PREEMPTION_REASONS,
    QUEUE_STATUSES,
    WRITE_STEPS,
    Metrics,
    PassGauge,
    kueue_buckets,
)
from admitter.controller.reconciler import Reconciler
from admitter.controller.snapshot import View
from admitter.core.decisions import EvictionReason, Snapshot
from admitter.core.model import GPU
from admitter.core.topology import CLUSTER
from admitter.kube import client as kube

from builders.core import node as core_node
from builders.core import running_on
from builders.kube import JobWrapper, cluster_queue, local_queue


def value(controller: Reconciler | Metrics, series: str, /, **labels: str) -> float | None:
    metrics = controller.metrics if isinstance(controller, Reconciler) else controller
    return metrics.registry.get_sample_value(series, labels)


def test_the_wait_buckets_are_kueues() -> None:
    assert kueue_buckets(14)[:4] == (1.0, 2.5, 5.0, 10.0)
    assert kueue_buckets(14)[-1] == 2.5 * 2 ** 12
    assert len(kueue_buckets(14)) == 14


def test_every_write_step_and_attempt_result_is_counted_from_zero() -> None:
    metrics = Metrics()
    for step in WRITE_STEPS:
        assert value(metrics, "admitter_failed_writes_total", step=step) == 0, step
    for result in ("success", "inadmissible"):
        assert value(metrics, "admitter_admission_attempts_total", result=result) == 0
    assert {"start", "finish", "start-pod", "finish-orphan"} <= set(WRITE_STEPS)
    assert "none" not in WRITE_STEPS


async def test_a_queues_counters_exist_at_zero_once_it_is_seen() -> None:
    api = FakeApi()
    controller = reconciler(api)
    team(api, controller, 8, node_a=8)
    await settled_pass(controller)
    assert value(controller, "admitter_admitted_workloads_total", cluster_queue="team") == 0
    for reason in EvictionReason:
        assert value(controller, "admitter_evicted_workloads_total", cluster_queue="team",
                     reason=reason.value) == 0, reason
    for reason_value in PREEMPTION_REASONS:
        assert value(controller, "admitter_preempted_workloads_total",
                     preempting_cluster_queue="team", reason=reason_value) == 0
    for series in ("admitter_ready_wait_time_seconds_count",
                   "admitter_admitted_until_ready_wait_time_seconds_count"):
        assert value(controller, series, cluster_queue="team") == 0, series
    assert value(controller, "admitter_local_queue_ready_wait_time_seconds_count",
                 name="default", namespace="ns") == 0


async def test_quota_limit_and_workloads_held_per_cluster_queue_and_local_queue() -> None:
    api = FakeApi()
    controller = reconciler(api)
    await submitted_jobs(api, controller, 3, 2, node_a=8)
    await settled_pass(controller)  # a pass that sees the admissions written
    assert value(controller, "admitter_cluster_queue_nominal_quota", cluster_queue="team",
                 resource=GPU) == 8
    assert value(controller, "admitter_cluster_queue_borrowing_limit", cluster_queue="team",
                 resource=GPU) == 8
    for name in ("admitter_admitted_active_workloads", "admitter_reserving_active_workloads"):
        assert value(controller, name, cluster_queue="team") == 3, name
    for name in ("admitter_local_queue_admitted_active_workloads",
                 "admitter_local_queue_reserving_active_workloads"):
        assert value(controller, name, name="default", namespace="ns") == 3, name
    assert value(controller, "admitter_admitted_workloads_total", cluster_queue="team") == 3
    for status in QUEUE_STATUSES:
        assert value(controller, "admitter_cluster_queue_status", cluster_queue="team",
                     status=status) == int(status == "active"), status
    assert value(controller, "admitter_local_queue_status", name="default", namespace="ns",
                 active="True") == 1
    assert value(controller, "admitter_local_queue_status", name="default", namespace="ns",
                 active="False") == 0


async def test_an_unlimited_queue_reports_an_infinite_limit_and_a_deleted_one_terminated(
        ) -> None:
    api = FakeApi()
    controller = reconciler(api)
    add(api, controller.caches.cluster_queues, kube.CLUSTER_QUEUES, cluster_queue("open", 4))
    closing = cluster_queue("closing", 4)
    closing["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    add(api, controller.caches.cluster_queues, kube.CLUSTER_QUEUES, closing)
    add(api, controller.caches.local_queues, kube.LOCAL_QUEUES,
        local_queue("closing", name="leaving", namespace="ns"))
    await settled_pass(controller)
    assert value(controller, "admitter_cluster_queue_borrowing_limit", cluster_queue="open",
                 resource=GPU) == math.inf
    assert value(controller, "admitter_cluster_queue_status", cluster_queue="closing",
                 status="terminated") == 1
    assert value(controller, "admitter_cluster_queue_status", cluster_queue="closing",
                 status="active") == 0
    assert value(controller, "admitter_local_queue_status", name="leaving", namespace="ns",
                 active="False") == 1


async def test_the_time_from_admission_to_ready_is_the_time_the_pods_took() -> None:
    now = [CLOCK]
    api = FakeApi()
    controller = reconciler(api, lambda: now[0])
    team(api, controller, 8, node_a=8)
    add(api, controller.caches.jobs["Job"], kube.JOBS,
        JobWrapper("train", "ns").gpus(1).min_runtime(None).obj())
    for _ in range(2):
        await settled_pass(controller)
    assert value(controller, "admitter_admitted_until_ready_wait_time_seconds_count",
                 cluster_queue="team") == 0, "not ready yet: its pods have not started"
    now[0] += 7
    job = api.objects[kube.JOBS.path("ns", "train")]
    add(api, controller.caches.jobs["Job"], kube.JOBS, {**job, "status": {"ready": 1}})
    await settled_pass(controller)
    for name, labels in (
            ("admitter_admitted_until_ready_wait_time_seconds", {"cluster_queue": "team"}),
            ("admitter_local_queue_admitted_until_ready_wait_time_seconds",
             {"name": "default", "namespace": "ns"})):
        assert value(controller, f"{name}_count", **labels) == 1, name
        assert value(controller, f"{name}_sum", **labels) == 7, name
        assert value(controller, f"{name}_bucket", le="5.0", **labels) == 0, name
        assert value(controller, f"{name}_bucket", le="10.0", **labels) == 1, name
    assert value(controller, "admitter_ready_wait_time_seconds_count",
                 cluster_queue="team") == 1
    await settled_pass(controller)
    assert value(controller, "admitter_admitted_until_ready_wait_time_seconds_count",
                 cluster_queue="team") == 1, "timed once"


def documented() -> dict[str, set[str]]:
    """docs/controller.md's table of series: each series named in a row → that row's labels."""
    text = (Path(__file__).parents[2] / "docs" / "controller.md").read_text()
    rows: dict[str, set[str]] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `admitter_") and len(cells) == 4:
            for series in re.findall(r"`(admitter_[a-z_]+)`", cells[0]):
                rows[series] = set(re.findall(r"`([a-z_]+)`", cells[2]))
    return rows


def test_the_docs_list_every_series_with_its_labels() -> None:
    rows = documented()
    metrics = [m for m in vars(Metrics()).values() if isinstance(m, MetricWrapperBase | PassGauge)]
    assert len(metrics) >= 30
    for metric in metrics:
        (family,) = metric.describe()
        exposed = f"{family.name}_total" if family.type == "counter" else family.name
        assert exposed in rows, f"{exposed} is not in docs/controller.md"
        labels = metric.labelnames if isinstance(metric, PassGauge) else metric._labelnames
        assert rows[exposed] == set(labels), exposed


async def test_a_deleted_queues_gauges_go_with_it() -> None:
    api = FakeApi()
    controller = reconciler(api)
    await submitted_jobs(api, controller, 1, 2, node_a=8)
    add(api, controller.caches.cluster_queues, kube.CLUSTER_QUEUES, cluster_queue("other", 4))
    await settled_pass(controller)
    gauges = ("admitter_cluster_queue_nominal_quota", "admitter_cluster_queue_fair_share",
              "admitter_cluster_queue_resource_reservation")
    for series in gauges:
        assert value(controller, series, cluster_queue="other", resource=GPU) is not None
    controller.caches.cluster_queues.forget(api.objects[kube.CLUSTER_QUEUES.path(None, "other")])
    await settled_pass(controller)
    for series in gauges:
        assert value(controller, series, cluster_queue="other", resource=GPU) is None, series
        assert value(controller, series, cluster_queue="team", resource=GPU) is not None
    assert value(controller, "admitter_pending_workloads", cluster_queue="other") is None
    assert value(controller, "admitter_cluster_queue_status", cluster_queue="other",
                 status="active") is None


def fleet_view(*admitted: tuple[str, str | None, int]) -> View:
    """Two workers' nodes (east 2 × 8 GPUs, west 1 × 8) and Workloads admitted as (key,
    cluster their admission names, GPUs)."""
    nodes = [core_node("e-0", cluster="east"), core_node("e-1", cluster="east"),
             core_node("w-0", cluster="west")]
    workloads = [running_on(key, "team", "e-0", gpus=gpus) for key, _, gpus in admitted]
    objects = {key: {"metadata": {"name": key}, "status": {"admission": {
        "topologyDomain": {} if cluster is None else {CLUSTER: cluster}}}}
        for key, cluster, _ in admitted}
    return View(Snapshot(CLOCK, nodes, (), (), workloads), objects, {}, {}, {})


def test_per_cluster_gpus_admitted_gpus_and_reachability_over_a_fleet() -> None:
    metrics = Metrics()
    metrics.observe_fleet(fleet_view(("ns/a", "east", 8), ("ns/b", "east", 4),
                                     ("ns/c", "gone", 8)),
                          {"east": True, "west": True, "south": False})
    assert value(metrics, "admitter_cluster_nodes", cluster="east") == 2
    assert value(metrics, "admitter_cluster_gpus", cluster="east") == 16
    assert value(metrics, "admitter_cluster_admitted_gpus", cluster="east") == 12
    assert value(metrics, "admitter_cluster_gpus", cluster="west") == 8
    assert value(metrics, "admitter_cluster_admitted_gpus", cluster="west") == 0
    # a worker that does not answer offers no nodes; its admissions still count there
    assert value(metrics, "admitter_cluster_gpus", cluster="south") == 0
    assert value(metrics, "admitter_cluster_admitted_gpus", cluster="gone") == 8
    assert value(metrics, "admitter_worker_reachable", cluster="east") == 1
    assert value(metrics, "admitter_worker_reachable", cluster="south") == 0
    assert value(metrics, "admitter_worker_reachable", cluster="gone") is None, (
        "a cluster named by no WorkerCluster is not a worker")


def test_without_worker_clusters_there_is_no_cluster_series() -> None:
    metrics = Metrics()
    metrics.observe_fleet(fleet_view(("ns/a", "east", 8)), {"east": True})
    metrics.observe_fleet(fleet_view(("ns/a", "east", 8)), {})  # the last one deleted
    for series in ("admitter_cluster_nodes", "admitter_cluster_gpus",
                   "admitter_cluster_admitted_gpus", "admitter_worker_reachable"):
        assert value(metrics, series, cluster="east") is None, series


async def test_a_single_cluster_pass_exports_no_cluster_series() -> None:
    api = FakeApi()
    controller = reconciler(api)
    await submitted_jobs(api, controller, 1, 2, node_a=8)
    await settled_pass(controller)
    families = {family.name for family in controller.metrics.registry.collect()
                if family.samples}
    assert "admitter_cluster_queue_nominal_quota" in families
    assert not families & {"admitter_cluster_nodes", "admitter_cluster_gpus",
                           "admitter_cluster_admitted_gpus", "admitter_worker_reachable"}
