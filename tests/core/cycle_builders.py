"""Readable builders for admission-cycle tests, and a tiny world that applies decisions.

`World` keeps nodes, queues and workloads, runs a cycle at a given time and applies the
result the way the controller does: evicted workloads go back to pending (keeping their
submission time), admitted ones start with the placement the cycle assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from admitter.core.cycle import run_cycle
from admitter.core.decisions import CycleResult, CycleSettings, Snapshot
from admitter.core.model import (
    GPU,
    UNLIMITED,
    FairShareSettings,
    Node,
    Phase,
    PodSet,
    Queue,
    ResourceQuota,
    TopologyRequest,
    Workload,
)
from admitter.core.topology import HOSTNAME

RACK = "topology.admitter.dev/rack"
BLOCK = "topology.admitter.dev/block"
LEVELS = (BLOCK, RACK, HOSTNAME)
NO_TIME_FAIRNESS = CycleSettings(fair_share=FairShareSettings(window=0))


def racks(count: int, nodes_per_rack: int = 2, gpus: int = 8, blocks: int = 1) -> list[Node]:
    """`count` racks per block of `nodes_per_rack` nodes, named b0-r1-n0 and labelled so."""
    out = []
    for b in range(blocks):
        for r in range(count):
            for n in range(nodes_per_rack):
                name = f"b{b}-r{r}-n{n}"
                labels = {BLOCK: f"b{b}", RACK: f"r{r}", HOSTNAME: name}
                out.append(Node(name, {GPU: gpus, "cpu": 96_000}, labels))
    return out


def queue(name: str, quota: int = 0, *, parent: str | None = None, weight: float = 1.0,
          limit: int = UNLIMITED, priority: int = 0, order: int = 0) -> Queue:
    """A queue with GPU knobs only."""
    knobs = ResourceQuota(quota=quota, limit=limit, over_quota_weight=weight)
    return Queue(name, parent, priority, {GPU: knobs}, order)


def job(key: str, queue_name: str, gpus: int = 8, pods: int = 1, *, at: float = 0.0,
        min_runtime: float = 3600.0, priority: int = 0, resumable: bool = True,
        required: str | None = None, preferred: str | None = None) -> Workload:
    """A pending gang of `pods` pods × `gpus` GPUs."""
    return Workload(key, queue_name, (PodSet("main", pods, {GPU: gpus}),), at, priority,
                    min_runtime, resumable, TopologyRequest(required, preferred))


@dataclass
class World:
    nodes: list[Node]
    queues: list[Queue]
    workloads: dict[str, Workload] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    """Funded GPU-seconds per leaf queue inside the window, the same at every cycle."""
    settings: CycleSettings = NO_TIME_FAIRNESS
    topology: tuple[str, ...] = LEVELS
    history: list[CycleResult] = field(default_factory=list)

    def submit(self, *workloads: Workload) -> World:
        for workload in workloads:
            self.workloads[workload.key] = workload
        return self

    def snapshot(self, now: float) -> Snapshot:
        return Snapshot(now, self.nodes, self.topology, self.queues,
                        list(self.workloads.values()), self.usage, self.settings)

    def cycle(self, now: float) -> CycleResult:
        result = run_cycle(self.snapshot(now))
        for eviction in result.evictions:
            self.workloads[eviction.key] = replace(
                self.workloads[eviction.key], phase=Phase.PENDING, admitted_at=None,
                placement={}, pod_set_placements=())
        for admission in result.admissions:
            merged: dict[str, int] = {}
            for counts in admission.pod_set_nodes:
                for node, count in counts.items():
                    merged[node] = merged.get(node, 0) + count
            self.workloads[admission.key] = replace(
                self.workloads[admission.key], phase=Phase.ADMITTED, admitted_at=now,
                placement=merged, pod_set_placements=admission.pod_set_nodes)
        self.history.append(result)
        return result

    def finish(self, key: str) -> None:
        del self.workloads[key]

    def cordon(self, name: str) -> None:
        self.nodes = [replace(n, unschedulable=True) if n.name == name else n for n in self.nodes]

    def running(self) -> list[str]:
        return sorted(k for k, w in self.workloads.items() if w.phase is Phase.ADMITTED)

    def placement(self, key: str) -> dict[str, int]:
        return dict(self.workloads[key].placement)


def admitted(result: CycleResult) -> list[str]:
    return [a.key for a in result.admissions]


def evicted(result: CycleResult) -> dict[str, str]:
    return {e.key: e.reason.value for e in result.evictions}


def pending(result: CycleResult) -> dict[str, str]:
    return {p.key: p.reason for p in result.pending}
