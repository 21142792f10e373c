"""The event loop: jump between moments where something can change, and let the controller's
own decision core (`IncrementalCore`) decide on the cycle grid.

Moments are submissions, completions, cluster events, and the one moment each cycle names as
the first at which time alone could change its decisions (`CycleResult.next_change`: a
protection ending under a blocked preemptor, a starvation bound, a drained node's work
reaching the end of its min runtime). A change at t is acted on at the first cycle boundary
k·cycle ≥ t; time in between is skipped, not stepped through.

Re-run rule. The core is deterministic: fed the same state, only time-dependent facts can
change its answer. So the cycle runs at the first boundary at or after
1. a change: submission, completion, cordon/uncordon, or the previous cycle's own admissions
   and evictions, unless the cycle says they cannot unblock more (`CycleResult.settled`);
2. the last cycle's `next_change`;
3. and otherwise every `drift_cycles` boundaries while work is pending and something runs,
   for the one fact nobody announces: usage sliding through the fair-share window.
Without time-based fair share (window 0) this decides exactly what a cycle at every boundary
would (`tests/sim/test_sim_properties.py`). A cycle is skipped when it could not matter:
nothing pending, no cordoned node holding work, and no running work at its maximum run time.
With no horizon the run ends once nothing runs, nothing new will arrive, and the last cycle
after the last change admitted nothing; what is left is reported unfinished.

The core is kept between cycles (`IncrementalCore`): the loop tells it each submission,
admission, eviction, finish and node change, so a cycle does not rebuild the waiting lists, the
node model or the allocation sums; it decides exactly what `run_cycle` would on the snapshot.
"""

from __future__ import annotations

import gc
import heapq
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum
from itertools import count

from admitter.api.convert import core_cycle_settings, scenario_nodes, topology_levels
from admitter.api.scenario import ClusterEvent, Scenario
from admitter.api.scenario_file import queue_tree
from admitter.core.decisions import Admission, CycleResult, Eviction
from admitter.core.incremental import IncrementalCore
from admitter.core.usage import UsageLedger
from admitter.sim.accounting import Accounting
from admitter.sim.jobs import Job, Stint
from admitter.sim.workloads import Instance, expand

DRIFT_CYCLES = 30
"""Boundaries between re-runs while nothing changes but usage drifts (5 min at 10 s)."""

Decide = Callable[[IncrementalCore, float, Mapping[str, float], float], CycleResult]
"""The decision core as the loop calls it: `IncrementalCore.cycle` (the core, the moment, the
window's usage per leaf, short jobs' mean GPUs), or a wrapper that times or watches it."""

Progress = Callable[[float, int], None]
"""Told the simulated time and how many workloads have finished, after each finish."""


class SimulationError(Exception):
    """The core decided something the simulator cannot apply: a bug, never bad input.
    (An `Exception`: compiled, the module cannot subclass other built-in exceptions.)"""


class _Kind(IntEnum):
    """Order of events at the same instant: what frees capacity before what asks for it."""

    FINISH = 0
    CLUSTER = 1
    SUBMIT = 2
    WAKE = 3


@dataclass(frozen=True, slots=True)
class Outcome:
    """Everything the result is computed from."""

    scenario: Scenario
    jobs: list[Job]
    """Submitted workloads in submission order."""
    unsubmitted: int
    end: float
    cycles: int
    """How many times the core ran."""
    wasted_gpu_s: float
    accounting: Accounting


class Simulation:
    """One run of a scenario; `seed` permutes simultaneous submissions and the node order.
    The loop reads admissions and evictions only, so its cycles are asked for no reasons
    (`CycleSettings.reasons`) unless `reasons`: for a `decide` that reads the pending
    workloads."""

    def __init__(self, scenario: Scenario, seed: int = 0, drift_cycles: int = DRIFT_CYCLES,
                 decide: Decide = IncrementalCore.cycle, reasons: bool = False):
        self._scenario = scenario
        self._decide = decide
        self._period = scenario.settings.cycle
        self._drift = drift_cycles
        tree = queue_tree(scenario)
        queues = tuple(tree.queue(name) for name in tree)
        nodes = scenario_nodes(scenario)
        random.Random(seed).shuffle(nodes)
        self._nodes = {node.name: node for node in nodes}
        self._cordoned: set[str] = set()
        self._settings = replace(core_cycle_settings(scenario.settings), reasons=reasons)
        self._core = IncrementalCore(nodes, topology_levels(scenario), queues,
                                     self._settings)
        """Told every change; the cycle rolls its own changes back."""
        self._ledger = UsageLedger(self._settings.fair_share)
        self._ledger.add_history(scenario.history, 0.0)
        self.accounting = Accounting(tree, nodes)
        self._jobs: dict[str, Job] = {}
        self._pending: dict[str, Job] = {}
        self._running: dict[str, Job] = {}
        self._events: list[tuple[float, int, int, object]] = []
        self._order = count()
        self._next_change: float | None = None
        """The last cycle's `next_change`; a wake-up for an earlier cycle's is stale."""
        self._due: int | None = None
        self._last_cycle = -1
        self._now = 0.0
        self._cycles = 0
        self._finished = 0
        self._wasted = 0.0
        instances = expand(scenario, seed)
        for instance in instances:
            self._push(instance.submitted_at, _Kind.SUBMIT, instance)
        for event in scenario.events:
            self._push(event.at, _Kind.CLUSTER, event)
        self._total = len(instances)
        self._arrivals = len(instances) + len(scenario.events)
        """Submissions and cluster events still ahead: they keep a run without horizon alive."""

    def run(self, progress: Progress | None = None) -> Outcome:
        """Simulate to the horizon (or until nothing is left to do). The cyclic garbage
        collector is paused meanwhile: each cycle makes tens of thousands of short-lived objects
        that reference counting frees, and full collector passes over the whole heap would find
        nothing. A process-wide switch, so it is the simulator's (a run owns its process),
        never the decision core's."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._run(progress)
        finally:
            if collecting:
                gc.enable()

    def _run(self, progress: Progress | None) -> Outcome:
        horizon = self._scenario.horizon
        while horizon is not None or not self._settled():
            at_event = self._events[0][0] if self._events else math.inf
            due = self._next_cycle()
            at = min(at_event, due * self._period if due is not None else math.inf)
            if at == math.inf or (horizon is not None and at > horizon):
                break
            self._now = at
            self.accounting.advance(at)
            if at == at_event:
                self._apply_events(at, progress)
            elif due is not None:
                self._cycle(due)
        end = horizon if horizon is not None else self._now
        self.accounting.advance(end)
        return Outcome(
            self._scenario,
            list(self._jobs.values()),
            self._total - len(self._jobs),
            end,
            self._cycles,
            self._wasted,
            self.accounting,
        )

    # -- scheduling of cycles ---------------------------------------------------------------

    def _settled(self) -> bool:
        return not self._running and not self._arrivals and (
            not self._pending or self._due is None
        )

    def _next_cycle(self) -> int | None:
        due = self._due
        if self._pending and self._running:
            drift = max(self._last_cycle + self._drift, self._boundary(self._now))
            due = drift if due is None else min(due, drift)
        return due

    def _boundary(self, at: float) -> int:
        """Index of the first cycle boundary at or after `at`."""
        return math.ceil(round(at / self._period, 9))

    def _request(self, at: float) -> None:
        boundary = self._boundary(at)
        self._due = boundary if self._due is None else min(self._due, boundary)

    def _worth_cycling(self, at: float) -> bool:
        """Whether a cycle at `at` could decide anything: work waits, a cordoned node holds
        work, or running work has reached its maximum run time."""
        if self._pending:
            return True
        for job in self._running.values():
            if self._cordoned and not self._cordoned.isdisjoint(job.stints[-1].nodes):
                return True
            runs_out = job.workload.runs_out_at()
            if runs_out is not None and runs_out <= at:
                return True
        return False

    # -- events -----------------------------------------------------------------------------

    def _push(self, at: float, kind: _Kind, payload: object) -> None:
        heapq.heappush(self._events, (at, kind, next(self._order), payload))

    def _apply_events(self, at: float, progress: Progress | None) -> None:
        while self._events and self._events[0][0] == at:
            _, kind, _, payload = heapq.heappop(self._events)
            if kind == _Kind.FINISH:
                assert isinstance(payload, tuple)
                job, stint = payload
                if job.running is stint:
                    self._finish(job, at)
                    if progress is not None:
                        progress(at, self._finished)
            elif kind == _Kind.SUBMIT:
                assert isinstance(payload, Instance)
                self._submit(payload, at)
            elif kind == _Kind.CLUSTER:
                assert isinstance(payload, ClusterEvent)
                self._cluster(payload, at)
            else:
                if at == self._next_change and self._worth_cycling(at):
                    self._request(at)

    def _submit(self, instance: Instance, at: float) -> None:
        self._arrivals -= 1
        job = Job(instance)
        self._jobs[job.key] = job
        self._pending[job.key] = job
        self._core.put(job.workload)
        self._request(at)

    def _finish(self, job: Job, at: float) -> None:
        del self._running[job.key]
        self._core.remove(job.key)
        self.accounting.hold(job.instance.pending, job.stints[-1].nodes, -1)
        self._ledger.close(job.key, at)
        job.finish(at)
        self._finished += 1
        self._request(at)

    def _cluster(self, event: ClusterEvent, at: float) -> None:
        self._arrivals -= 1
        name = event.cordon if event.cordon is not None else event.uncordon
        assert name is not None
        cordon = event.cordon is not None
        if cordon:
            self._cordoned.add(name)
        else:
            self._cordoned.discard(name)
        self._nodes[name] = replace(self._nodes[name], unschedulable=cordon)
        self._core.set_nodes(tuple(self._nodes.values()))
        self.accounting.cordon(name, cordon)
        self._request(at)

    # -- cycles -----------------------------------------------------------------------------

    def _cycle(self, index: int) -> None:
        at = index * self._period
        self._due = None
        self._last_cycle = index
        if not self._worth_cycling(at):
            return
        result = self._decide(self._core, at, self._ledger.usage(at),
                              self._ledger.short_gpus(at))
        self._cycles += 1
        for eviction in result.evictions:
            self._evict(eviction, at)
        for admission in result.admissions:
            self._admit(admission, at)
        if (result.evictions or result.admissions) and not result.settled:
            self._due = index + 1
        self._next_change = result.next_change
        if result.next_change is not None:
            self._push(result.next_change, _Kind.WAKE, None)

    def _evict(self, eviction: Eviction, at: float) -> None:
        job = self._running.pop(eviction.key, None)
        if job is None:
            raise SimulationError(f"the core evicted {eviction.key}, which is not running")
        self.accounting.hold(job.instance.pending, job.stints[-1].nodes, -1)
        self._ledger.close(job.key, at)
        if not eviction.reason.requeues:
            job.stop_for_good(at, eviction.reason.value)
            self._core.remove(job.key)
            self._finished += 1
            return
        lost = job.stop(at, eviction.reason.value, eviction.preemptor)
        self._core.put(job.workload)
        self._wasted += lost * job.instance.gpus
        self._pending[job.key] = job

    def _admit(self, admission: Admission, at: float) -> None:
        job = self._pending.pop(admission.key, None)
        if job is None:
            raise SimulationError(f"the core admitted {admission.key}, which is not pending")
        finish_at = job.start(at, admission.pod_set_nodes)
        self._running[job.key] = job
        self._core.put(job.workload)
        stint: Stint = job.stints[-1]
        self.accounting.hold(job.instance.pending, stint.nodes, 1)
        workload = job.instance.pending
        if workload.funded:
            self._ledger.open(job.key, workload.queue, at, job.instance.gpus,
                              self._settings.short_jobs.is_short(workload))
        self._push(finish_at, _Kind.FINISH, (job, stint))
