"""A tiny world that runs admission cycles and applies their decisions.

`World` keeps nodes, queues and workloads, runs a cycle at a given time and applies the
result the way the controller does: evicted workloads go back to pending (keeping their
submission time), admitted ones start with the placement the cycle assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from admitter.core.cycle import run_cycle
from admitter.core.decisions import CycleResult, CycleSettings, EvictionReason, Snapshot
from admitter.core.model import (
    FairShareSettings,
    Node,
    Phase,
    Queue,
    Workload,
    merged_placement,
)

from builders.core import LEVELS

NO_TIME_FAIRNESS = CycleSettings(fair_share=FairShareSettings(window=0))


@dataclass
class World:
    nodes: list[Node]
    queues: list[Queue]
    workloads: dict[str, Workload] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    """Funded GPU-seconds per leaf queue inside the window, the same at every cycle."""
    settings: CycleSettings = NO_TIME_FAIRNESS
    short_gpus: float = 0.0
    """GPUs short jobs held on average over the window, the same at every cycle."""
    topology: tuple[str, ...] = LEVELS
    history: list[CycleResult] = field(default_factory=list)

    def submit(self, *workloads: Workload) -> World:
        for workload in workloads:
            self.workloads[workload.key] = workload
        return self

    def snapshot(self, now: float) -> Snapshot:
        return Snapshot(now, self.nodes, self.topology, self.queues,
                        list(self.workloads.values()), self.usage, self.settings,
                        self.short_gpus)

    def cycle(self, now: float) -> CycleResult:
        result = run_cycle(self.snapshot(now))
        for eviction in result.evictions:
            if not eviction.reason.requeues:
                del self.workloads[eviction.key]
                continue
            was = self.workloads[eviction.key]
            ran = 0.0 if was.admitted_at is None else now - was.admitted_at
            self.workloads[eviction.key] = replace(
                was, phase=Phase.PENDING, admitted_at=None, placement={},
                pod_set_placements=(), ran_before=was.ran_before + ran)
        for admission in result.admissions:
            self.workloads[admission.key] = replace(
                self.workloads[admission.key], phase=Phase.ADMITTED, admitted_at=now,
                placement=merged_placement(admission.pod_set_nodes),
                pod_set_placements=admission.pod_set_nodes)
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


def evicted(result: CycleResult) -> dict[str, EvictionReason]:
    return {e.key: e.reason for e in result.evictions}


def pending(result: CycleResult) -> dict[str, str]:
    return {p.key: p.reason for p in result.pending}


def decisions(result: CycleResult) -> tuple[object, ...]:
    """Everything a cycle decides, the pending workloads' reasons aside: what a caller that
    asked for no reasons gets alike (`CycleSettings.reasons`)."""
    return (result.admissions, [a.message for a in result.admissions], result.evictions,
            result.fair_share, dict(result.queues), result.next_change, result.settled,
            result.steady_until)
