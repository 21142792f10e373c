"""Prometheus metrics, named after Kueue's so existing dashboards translate directly."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from admitter.api.quantity import from_base_units
from admitter.controller.status import QueueUsage
from admitter.core.decisions import CycleResult, Snapshot
from admitter.core.model import Phase
from admitter.core.usage import HOUR

CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
"""Seconds: a cycle takes milliseconds on a small cluster, seconds on a very large one."""


class Metrics:
    """One registry per controller, so tests can read values without global state."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.pending = Gauge("admitter_pending_workloads", "Workloads waiting for admission",
                             ["cluster_queue"], registry=r)
        self.admitted = Counter("admitter_admitted_workloads", "Workloads admitted",
                                ["cluster_queue"], registry=r)
        self.wait = Histogram("admitter_admission_wait_time_seconds",
                              "Time from creation to admission", ["cluster_queue"],
                              buckets=(1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600,
                                       12 * 3600, 24 * 3600), registry=r)
        self.evicted = Counter("admitter_evicted_workloads", "Workloads evicted",
                               ["cluster_queue", "reason"], registry=r)
        self.usage = Gauge("admitter_cluster_queue_resource_usage",
                           "Resources held by admitted workloads (devices, cores, bytes)",
                           ["cluster_queue", "resource"], registry=r)
        self.fair_share = Gauge("admitter_cluster_queue_fair_share",
                                "Fair share (devices, cores, bytes)",
                                ["cluster_queue", "resource"], registry=r)
        self.cycle = Histogram("admitter_admission_cycle_duration_seconds",
                               "Wall time of one admission cycle", buckets=CYCLE_BUCKETS,
                               registry=r)
        self.unreadable = Gauge("admitter_unreadable_objects",
                                "Objects read from the API server that could not be understood "
                                "and are ignored until they change", ["kind"], registry=r)
        self.pending_by_reason = Gauge(
            "admitter_pending_workloads_by_reason",
            "Workloads waiting for admission, by the reason the last cycle gave",
            ["cluster_queue", "reason"], registry=r)
        self.attempts = Counter("admitter_admission_attempts",
                                "Workloads tried by a cycle: success (admitted) or inadmissible "
                                "(left waiting)", ["result"], registry=r)
        self.attempt_duration = Histogram(
            "admitter_admission_attempt_duration_seconds",
            "Wall time of a cycle, by whether it admitted anything (success) or not",
            ["result"], buckets=CYCLE_BUCKETS, registry=r)
        self.reservation = Gauge("admitter_cluster_queue_resource_reservation",
                                 "Quota reserved by admitted workloads (devices, cores, bytes)",
                                 ["cluster_queue", "resource"], registry=r)
        self.gpu_hours = Gauge("admitter_cluster_queue_gpu_hours_in_window",
                               "Funded GPU-hours used inside the fair-share window (leaves)",
                               ["cluster_queue"], registry=r)
        self.owed = Gauge("admitter_cluster_queue_owed_gpu_hours_in_window",
                          "GPU budget times the fair-share window: the GPU-hours owed there",
                          ["cluster_queue"], registry=r)
        self.protection = Gauge("admitter_workload_protection_remaining_seconds",
                                "Min-runtime protection left of each admitted funded workload",
                                ["cluster_queue", "namespace", "workload"], registry=r)
        self.failed_writes = Counter("admitter_failed_writes",
                                     "Writes for one object that failed; a later pass retries",
                                     ["step"], registry=r)
        self.install_problems = Gauge(
            "admitter_install_problems",
            "Differences between the registered webhook configurations and what the settings "
            "need, by kind (install_check.py); 0 when the install matches", ["kind"], registry=r)

    def observe_admission(self, queue: str, waited: float) -> None:
        self.admitted.labels(queue).inc()
        self.wait.labels(queue).observe(waited)

    def observe_eviction(self, queue: str, reason: str) -> None:
        self.evicted.labels(queue, reason).inc()

    def observe_cycle(self, result: CycleResult, seconds: float, queues: Iterable[str],
                      usage: QueueUsage | None = None, snapshot: Snapshot | None = None,
                      ) -> None:
        """Cycle time and the queues' gauges; admissions and evictions are counted as they
        are carried out, so a pass that fails half way counts only what it did. `usage` gives
        each leaf's windowed use, `snapshot` the admitted workloads the cycle saw."""
        self.cycle.observe(seconds)
        self.attempts.labels("success").inc(len(result.admissions))
        self.attempts.labels("inadmissible").inc(len(result.pending))
        self.attempt_duration.labels("success" if result.admissions else "inadmissible"
                                     ).observe(seconds)
        fair = result.fair_share
        ranking = result.ranking
        self.pending_by_reason.clear()
        for pending in result.pending:
            self.pending_by_reason.labels(pending.queue, pending.reason.value).inc()
        for name in queues:
            status = result.queues.get(name)
            if status is None:
                continue
            self.pending.labels(name).set(status.pending)
            for resource in fair.resources:
                held = float(from_base_units(resource, status.allocated.get(resource, 0)))
                self.usage.labels(name, resource).set(held)
                self.reservation.labels(name, resource).set(held)
                self.fair_share.labels(name, resource).set(
                    float(from_base_units(resource, fair.share(name, resource))))
            if usage is not None:
                self.gpu_hours.labels(name).set(usage.status(name)["gpuHoursInWindow"])
                budget = ranking.budget(name) if ranking is not None else 0.0
                self.owed.labels(name).set(budget * max(usage.window, 0.0) / HOUR)
        self.protection.clear()
        if snapshot is not None:
            self._protection(snapshot)

    def _protection(self, snapshot: Snapshot) -> None:
        for workload in snapshot.workloads:
            if workload.phase is Phase.ADMITTED and workload.admitted_at is not None and (
                    workload.funded):
                namespace, _, name = workload.key.partition("/")
                left = max(0.0, workload.admitted_at + workload.min_runtime - snapshot.now)
                self.protection.labels(workload.queue, namespace, name).set(left)
