"""Prometheus metrics, named after Kueue's so existing dashboards translate directly."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from admitter.api.quantity import from_base_units
from admitter.core.decisions import CycleResult


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
                               "Wall time of one admission cycle",
                               buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
                               registry=r)
        self.unreadable = Gauge("admitter_unreadable_objects",
                                "Objects read from the API server that could not be understood "
                                "and are ignored until they change", ["kind"], registry=r)
        self.failed_writes = Counter("admitter_failed_writes",
                                     "Writes for one object that failed; a later pass retries",
                                     ["step"], registry=r)

    def observe_admission(self, queue: str, waited: float) -> None:
        self.admitted.labels(queue).inc()
        self.wait.labels(queue).observe(waited)

    def observe_eviction(self, queue: str, reason: str) -> None:
        self.evicted.labels(queue, reason).inc()

    def observe_cycle(self, result: CycleResult, seconds: float, queues: Iterable[str]) -> None:
        """Cycle time and the queues' gauges; admissions and evictions are counted as they
        are carried out, so a pass that fails half way counts only what it did."""
        self.cycle.observe(seconds)
        fair = result.fair_share
        for name in queues:
            status = result.queues.get(name)
            if status is None:
                continue
            self.pending.labels(name).set(status.pending)
            for resource in fair.resources:
                held = status.allocated.get(resource, 0)
                self.usage.labels(name, resource).set(float(from_base_units(resource, held)))
                self.fair_share.labels(name, resource).set(
                    float(from_base_units(resource, fair.share(name, resource))))
