"""Prometheus metrics, named and labelled after Kueue's (`admitter_` for `kueue_`) where they
mean the same, so existing dashboards and alerts translate directly. Every counter's series
exist at 0 from the start (for each label value it can take, and each queue once seen), so an
`increase()` alert sees the first event (docs/controller.md, "What it exports").

The gauges that describe the last pass (per queue, per LocalQueue, per admitted workload) are
computed when scraped (`PassGauge`), from what the pass kept (`PassFigures`): setting a
labelled child of every such gauge on every pass cost more than the rest of the controller
on a thousand queues (BENCHMARKS.md, Kueue's large-scale shape), while Prometheus reads them
every 15-60 s."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from admitter.api.quantity import from_base_units
from admitter.controller.converge import Step
from admitter.controller.orphans import FINISH_ORPHAN
from admitter.controller.plain_pods import PodStep
from admitter.controller.queue_holds import Holdings, closed_reason, terminating
from admitter.controller.snapshot import View
from admitter.controller.status import QueueUsage
from admitter.core.decisions import CycleResult, EvictionReason, Pending, QueueStatus
from admitter.core.fairshare import FairShare
from admitter.core.model import GPU, UNLIMITED, Phase
from admitter.core.ranking import Ranking
from admitter.core.topology import CLUSTER
from admitter.core.usage import HOUR
from admitter.kube.core_values import admitted_cluster
from admitter.kube.informer import Key

CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
"""Seconds: a cycle takes milliseconds on a small cluster, seconds on a very large one."""


def kueue_buckets(count: int) -> tuple[float, ...]:
    """Kueue's wait-time buckets (`generateExponentialBuckets`): 1 s, then 2.5 s doubling."""
    return (1.0, *(2.5 * 2 ** i for i in range(count - 1)))


ADMISSION_WAIT_BUCKETS = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600,
                          24 * 3600)
"""Seconds from creation to admission, in the steps an alert on it is written in: within a pass
or a few (seconds), behind running work (minutes to an hour), behind a queue's spent share
(hours, up to a day)."""
READY_BUCKETS = kueue_buckets(14)
"""1 s to 2.8 h, as Kueue's `ready_wait_time_seconds` and `admitted_until_ready_...`."""
WRITE_STEPS = (*(s.value for s in Step if s is not Step.NONE),
               *(s.value for s in PodStep if s is not PodStep.NONE), FINISH_ORPHAN)
"""Every `step` of `admitter_failed_writes_total`: the writes a pass isolates one by one."""
PREEMPTION_REASONS = (EvictionReason.PREEMPTED.value, EvictionReason.RECLAIMED.value)
"""Evictions made for another workload (`preemptor`): by priority inside its ClusterQueue, or
for another queue's share (Kueue's `InClusterQueue` and `InCohort*`)."""
QUEUE_STATUSES = ("pending", "active", "terminated")
"""Kueue's `cluster_queue_status`: left out of the tree (a parent cycle or missing parent, an
invalid spec), admitting, being deleted."""
LOCAL_QUEUE_ACTIVE = ("True", "False")


Series = Iterable[tuple[tuple[str, ...], float]]
"""A gauge's samples: label values (in the gauge's label order) and value."""


class PassGauge(Collector):
    """A gauge whose series are computed when the registry is read, by `series` (from the
    last pass's figures), instead of being set on every pass."""

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str],
                 series: Callable[[], Series], registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.series = series
        registry.register(self)

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, value in self.series():
            family.add_metric(labels, float(value))
        return [family]


@dataclass(frozen=True, slots=True)
class PassFigures:
    """What the last pass decided on and decided, kept for the gauges to read when scraped.

    Hazard: the gauges read these objects later, at a scrape between or during passes. None
    of them changes after its pass: the view's dicts and snapshot are built anew each pass
    from cached objects that are replaced, never modified; the queue statuses and pending
    list are the cycle's, read (and so fixed) when the pass ends; a fair share and a ranking
    are made per cycle. Only `usage`, the ledger, moves on: its GPU-hours are read as the
    ledger holds them at the scrape (the newer figure). Keeping them holds one pass's view
    alive until the next pass replaces it."""

    view: View
    statuses: Mapping[str, QueueStatus]
    pending: tuple[Pending, ...]
    fair: FairShare
    ranking: Ranking | None
    holds: Holdings
    usage: QueueUsage | None


@dataclass(frozen=True, slots=True)
class AwaitingReady:
    """An admission this controller made, whose pods are not all ready yet."""

    cluster_queue: str
    local_queue: Key


class Metrics:
    """One registry per controller, so tests can read values without global state."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.last: PassFigures | None = None
        """The last pass's figures, which the per-pass gauges read when scraped."""
        self.pending = PassGauge("admitter_pending_workloads", "Workloads waiting for admission",
                                 ["cluster_queue"], self._pending_series, r)
        self.admitted = Counter("admitter_admitted_workloads", "Workloads admitted",
                                ["cluster_queue"], registry=r)
        self.wait = Histogram("admitter_admission_wait_time_seconds",
                              "Time from creation to admission", ["cluster_queue"],
                              buckets=ADMISSION_WAIT_BUCKETS, registry=r)
        self.evicted = Counter("admitter_evicted_workloads", "Workloads evicted",
                               ["cluster_queue", "reason"], registry=r)
        self.usage = PassGauge("admitter_cluster_queue_resource_usage",
                               "Resources held by admitted workloads (devices, cores, bytes)",
                               ["cluster_queue", "resource"], self._allocated_series, r)
        self.fair_share = PassGauge("admitter_cluster_queue_fair_share",
                                    "Fair share (devices, cores, bytes)",
                                    ["cluster_queue", "resource"], self._fair_share_series, r)
        self.cycle = Histogram("admitter_admission_cycle_duration_seconds",
                               "Wall time of one admission cycle", buckets=CYCLE_BUCKETS,
                               registry=r)
        self.unreadable = Gauge("admitter_unreadable_objects",
                                "Objects read from the API server that could not be understood "
                                "and are ignored until they change", ["kind"], registry=r)
        self.pending_by_reason = PassGauge(
            "admitter_pending_workloads_by_reason",
            "Workloads waiting for admission, by the reason the last cycle gave",
            ["cluster_queue", "reason"], self._pending_by_reason_series, r)
        self.attempts = Counter("admitter_admission_attempts",
                                "Workloads tried by a cycle: success (admitted) or inadmissible "
                                "(left waiting)", ["result"], registry=r)
        self.attempt_duration = Histogram(
            "admitter_admission_attempt_duration_seconds",
            "Wall time of a cycle, by whether it admitted anything (success) or not",
            ["result"], buckets=CYCLE_BUCKETS, registry=r)
        self.reservation = PassGauge(
            "admitter_cluster_queue_resource_reservation",
            "Quota reserved by admitted workloads (devices, cores, bytes)",
            ["cluster_queue", "resource"], self._allocated_series, r)
        self.gpu_hours = PassGauge("admitter_cluster_queue_gpu_hours_in_window",
                                   "Funded GPU-hours used inside the fair-share window (leaves)",
                                   ["cluster_queue"], self._gpu_hours_series, r)
        self.owed = PassGauge("admitter_cluster_queue_owed_gpu_hours_in_window",
                              "GPU budget times the fair-share window: the GPU-hours owed there",
                              ["cluster_queue"], self._owed_series, r)
        self.protection = PassGauge(
            "admitter_workload_protection_remaining_seconds",
            "Min-runtime protection left of each admitted funded workload",
            ["cluster_queue", "namespace", "workload"], self._protection_series, r)
        self.failed_writes = Counter("admitter_failed_writes",
                                     "Writes for one object that failed; a later pass retries",
                                     ["step"], registry=r)
        self.install_problems = Gauge(
            "admitter_install_problems",
            "Differences between the registered webhook configurations and what the settings "
            "need, by kind (install_check.py); 0 when the install matches", ["kind"], registry=r)
        self.nominal_quota = PassGauge(
            "admitter_cluster_queue_nominal_quota",
            "The ClusterQueue's deserved quota (devices, cores, bytes)",
            ["cluster_queue", "resource"], self._nominal_quota_series, r)
        self.borrowing_limit = PassGauge(
            "admitter_cluster_queue_borrowing_limit",
            "The ClusterQueue's limit: the most it may hold, borrowing included (devices, cores, "
            "bytes); +Inf when unlimited", ["cluster_queue", "resource"],
            self._borrowing_limit_series, r)
        self.admitted_active = PassGauge("admitter_admitted_active_workloads",
                                         "Admitted Workloads not finished (parents count their "
                                         "subtree)", ["cluster_queue"], self._admitted_series, r)
        self.reserving_active = PassGauge(
            "admitter_reserving_active_workloads",
            "Workloads holding quota: the admitted ones (admitter reserves and admits at once)",
            ["cluster_queue"], self._admitted_series, r)
        self.queue_status = PassGauge("admitter_cluster_queue_status",
                                      "1 for the ClusterQueue's one status: pending, active or "
                                      "terminated", ["cluster_queue", "status"],
                                      self._queue_status_series, r)
        self.preempted = Counter("admitter_preempted_workloads",
                                 "Workloads evicted to make room for another, by the preemptor's "
                                 "ClusterQueue", ["preempting_cluster_queue", "reason"],
                                 registry=r)
        self.ready_wait = Histogram("admitter_ready_wait_time_seconds",
                                    "Time from creation until the pods are all ready",
                                    ["cluster_queue"], buckets=READY_BUCKETS, registry=r)
        self.admitted_until_ready = Histogram(
            "admitter_admitted_until_ready_wait_time_seconds",
            "Time from admission until the pods are all ready", ["cluster_queue"],
            buckets=READY_BUCKETS, registry=r)
        local = ["name", "namespace"]
        self.local_admitted_active = PassGauge(
            "admitter_local_queue_admitted_active_workloads",
            "Admitted Workloads not finished, per LocalQueue", local,
            self._local_admitted_series, r)
        self.local_reserving_active = PassGauge(
            "admitter_local_queue_reserving_active_workloads",
            "Workloads holding quota, per LocalQueue: the admitted ones", local,
            self._local_admitted_series, r)
        self.local_status = PassGauge("admitter_local_queue_status",
                                      "1 for whether the LocalQueue admits (True) or its queue "
                                      "is missing or being deleted (False)", [*local, "active"],
                                      self._local_status_series, r)
        self.local_ready_wait = Histogram("admitter_local_queue_ready_wait_time_seconds",
                                          "Time from creation until the pods are all ready",
                                          local, buckets=READY_BUCKETS, registry=r)
        self.local_admitted_until_ready = Histogram(
            "admitter_local_queue_admitted_until_ready_wait_time_seconds",
            "Time from admission until the pods are all ready", local, buckets=READY_BUCKETS,
            registry=r)
        self.cluster_nodes = Gauge("admitter_cluster_nodes",
                                   "Over a fleet, the nodes each cluster offers the model (a "
                                   "worker that does not answer offers none)", ["cluster"],
                                   registry=r)
        self.cluster_gpus = Gauge("admitter_cluster_gpus",
                                  "Over a fleet, the GPUs allocatable on the nodes each cluster "
                                  "offers", ["cluster"], registry=r)
        self.cluster_admitted_gpus = Gauge("admitter_cluster_admitted_gpus",
                                           "Over a fleet, the GPUs of the Workloads admitted "
                                           "into each cluster", ["cluster"], registry=r)
        self.worker_reachable = Gauge("admitter_worker_reachable",
                                      "1 while the manager reaches the WorkerCluster (its "
                                      "Reachable condition is True), else 0", ["cluster"],
                                      registry=r)
        self.awaiting_ready: dict[str, AwaitingReady] = {}
        """Admissions made here whose pods are not ready yet (a new leader times only its
        own: it cannot know when an earlier one's became ready)."""
        self._counted: set[str] = set()
        """ClusterQueues whose counters and histograms exist (at 0 until something happens)."""
        self._counted_local: set[Key] = set()
        """LocalQueues whose histograms exist."""
        for step in WRITE_STEPS:
            self.failed_writes.labels(step)
        for result in ("success", "inadmissible"):
            self.attempts.labels(result)

    def observe_admission(self, queue: str, waited: float, key: str = "",
                          local_queue: Key = ("", "")) -> None:
        """An admission written; with its Workload's `key` and `local_queue`, timed until its
        pods are ready."""
        self.admitted.labels(queue).inc()
        self.wait.labels(queue).observe(waited)
        if key:
            self.awaiting_ready[key] = AwaitingReady(queue, local_queue)

    def observe_eviction(self, queue: str, reason: str,
                         preempting_queue: str | None = None) -> None:
        self.evicted.labels(queue, reason).inc()
        if preempting_queue is not None:
            self.preempted.labels(preempting_queue, reason).inc()

    def failed_write(self, step: str) -> None:
        self.failed_writes.labels(step).inc()

    def observe_cycle(self, result: CycleResult, seconds: float, view: View,
                      holds: Holdings, usage: QueueUsage | None = None) -> None:
        """Cycle time, and the figures the per-pass gauges read when scraped; admissions and
        evictions are counted as they are carried out, so a pass that fails half way counts
        only what it did. `holds` gives the Workloads each queue holds, `usage` each leaf's
        windowed use."""
        self.cycle.observe(seconds)
        self.attempts.labels("success").inc(len(result.admissions))
        self.attempts.labels("inadmissible").inc(len(result.pending))
        self.attempt_duration.labels("success" if result.admissions else "inadmissible"
                                     ).observe(seconds)
        self.last = PassFigures(view, result.queues, result.pending, result.fair_share,
                                result.ranking, holds, usage)
        self._count_queues(view)
        self._ready(view)

    def observe_fleet(self, view: View, reachable: Mapping[str, bool]) -> None:
        """Per cluster, its nodes and GPUs in the model and the GPUs admitted into it (by
        the cluster each admission names); per WorkerCluster, whether it answers (`reachable`,
        by name). No series without WorkerClusters."""
        for gauge in (self.cluster_nodes, self.cluster_gpus, self.cluster_admitted_gpus,
                      self.worker_reachable):
            gauge.clear()
        if not reachable:
            return
        nodes: dict[str, int] = dict.fromkeys(reachable, 0)
        gpus: dict[str, int] = dict.fromkeys(reachable, 0)
        for node in view.snapshot.nodes:
            cluster = node.labels.get(CLUSTER)
            if cluster is not None:
                nodes[cluster] = nodes.get(cluster, 0) + 1
                gpus[cluster] = gpus.get(cluster, 0) + node.allocatable.get(GPU, 0)
        admitted: dict[str, int] = dict.fromkeys(nodes, 0)
        for workload in view.snapshot.workloads:
            wl = view.workloads.get(workload.key)
            cluster = admitted_cluster(wl) if wl is not None else None
            if workload.phase is Phase.ADMITTED and cluster is not None:
                admitted[cluster] = admitted.get(cluster, 0) + workload.requests().get(GPU, 0)
        for cluster, count in admitted.items():
            self.cluster_nodes.labels(cluster).set(nodes.get(cluster, 0))
            self.cluster_gpus.labels(cluster).set(gpus.get(cluster, 0))
            self.cluster_admitted_gpus.labels(cluster).set(count)
        for cluster, answers in reachable.items():
            self.worker_reachable.labels(cluster).set(int(answers))

    def _count_queues(self, view: View) -> None:
        """The counters and histograms of a queue first seen, at 0."""
        for name in view.cluster_queues:
            if name not in self._counted:
                self._counted.add(name)
                for series in (self.admitted, self.wait, self.ready_wait,
                               self.admitted_until_ready):
                    series.labels(name)
                for reason in EvictionReason:
                    self.evicted.labels(name, reason.value)
                for reason_value in PREEMPTION_REASONS:
                    self.preempted.labels(name, reason_value)
        for namespace, name in view.local_queues:
            if (namespace, name) not in self._counted_local:
                self._counted_local.add((namespace, name))
                self.local_ready_wait.labels(name, namespace)
                self.local_admitted_until_ready.labels(name, namespace)

    # The per-pass gauges, read from the last pass when scraped. A queue deleted, or left out
    # of the tree, has none. -----------------------------------------------------------------

    def _decided_queues(self, last: PassFigures) -> Iterable[tuple[str, QueueStatus]]:
        """The ClusterQueues the last pass decided for, with their status."""
        for name in last.view.cluster_queues:
            status = last.statuses.get(name)
            if status is not None:
                yield name, status

    def _pending_by_reason_series(self) -> Series:
        counts: dict[tuple[str, ...], int] = {}
        for pending in self.last.pending if self.last is not None else ():
            labels = (pending.queue, pending.reason.value)
            counts[labels] = counts.get(labels, 0) + 1
        return counts.items()

    def _pending_series(self) -> Series:
        if (last := self.last) is not None:
            for name, status in self._decided_queues(last):
                yield (name,), status.pending

    def _allocated_series(self) -> Series:
        """What admitted workloads hold: both the usage and the reservation."""
        if (last := self.last) is not None:
            for name, status in self._decided_queues(last):
                for resource in last.fair.resources:
                    yield (name, resource), float(from_base_units(
                        resource, status.allocated.get(resource, 0)))

    def _fair_share_series(self) -> Series:
        if (last := self.last) is not None:
            for name, _ in self._decided_queues(last):
                for resource in last.fair.resources:
                    yield (name, resource), float(from_base_units(
                        resource, last.fair.share(name, resource)))

    def _gpu_hours_series(self) -> Series:
        if (last := self.last) is not None and (usage := last.usage) is not None:
            for name, _ in self._decided_queues(last):
                yield (name,), usage.gpu_hours_in_window(name)

    def _owed_series(self) -> Series:
        if (last := self.last) is not None and last.usage is not None:
            window = max(last.usage.window, 0.0)
            for name, _ in self._decided_queues(last):
                budget = last.ranking.budget(name) if last.ranking is not None else 0.0
                yield (name,), budget * window / HOUR

    def _nominal_quota_series(self) -> Series:
        if (last := self.last) is not None:
            for queue in last.view.snapshot.queues:
                for resource, quota in queue.resources.items():
                    yield (queue.name, resource), float(from_base_units(resource, quota.quota))

    def _borrowing_limit_series(self) -> Series:
        if (last := self.last) is not None:
            for queue in last.view.snapshot.queues:
                for resource, quota in queue.resources.items():
                    yield (queue.name, resource), (
                        math.inf if quota.limit == UNLIMITED
                        else float(from_base_units(resource, quota.limit)))

    def _admitted_series(self) -> Series:
        """Admitted Workloads held: both the admitted and the reserving count."""
        if (last := self.last) is not None:
            for name in last.view.cluster_queues:
                status = last.statuses.get(name)
                yield (name,), 0 if status is None else status.admitted

    def _queue_status_series(self) -> Series:
        if (last := self.last) is not None:
            for name, cq in last.view.cluster_queues.items():
                shown = ("terminated" if terminating(cq) else
                         "pending" if name not in last.statuses else "active")
                for value in QUEUE_STATUSES:
                    yield (name, value), int(value == shown)

    def _local_admitted_series(self) -> Series:
        if (last := self.last) is not None:
            for (namespace, name), lq in last.view.local_queues.items():
                yield (name, namespace), len(last.holds.of(lq))

    def _local_status_series(self) -> Series:
        if (last := self.last) is not None:
            view = last.view
            for namespace, name in view.local_queues:
                active = str(closed_reason(view.local_queues, view.cluster_queues, namespace,
                                           name) is None)
                for value in LOCAL_QUEUE_ACTIVE:
                    yield (name, namespace, value), int(value == active)

    def _protection_series(self) -> Series:
        if (last := self.last) is not None:
            snapshot = last.view.snapshot
            for workload in snapshot.workloads:
                if workload.phase is Phase.ADMITTED and workload.admitted_at is not None and (
                        workload.funded):
                    namespace, _, name = workload.key.partition("/")
                    yield (workload.queue, namespace, name), max(
                        0.0, workload.admitted_at + workload.min_runtime - snapshot.now)

    def _ready(self, view: View) -> None:
        """Time the admissions made here whose pods this pass first sees all ready; forget
        those no longer admitted (evicted or finished before they were)."""
        now = view.snapshot.now
        admitted = {w.key: w for w in view.snapshot.workloads if w.phase is Phase.ADMITTED}
        for key, awaiting in list(self.awaiting_ready.items()):
            workload = admitted.get(key)
            if workload is None or workload.admitted_at is None:
                del self.awaiting_ready[key]
                continue
            if not workload.pods_ready:
                continue
            del self.awaiting_ready[key]
            namespace, name = awaiting.local_queue
            since_creation = max(0.0, now - workload.submitted_at)
            since_admission = max(0.0, now - workload.admitted_at)
            self.ready_wait.labels(awaiting.cluster_queue).observe(since_creation)
            self.admitted_until_ready.labels(awaiting.cluster_queue).observe(since_admission)
            self.local_ready_wait.labels(name, namespace).observe(since_creation)
            self.local_admitted_until_ready.labels(name, namespace).observe(since_admission)
