"""What one admission cycle decides on, and the bookkeeping its steps share.

The cycle's state, built before its steps run (`cycle`), and held by each step (`steps`) by
composition: the workloads arranged for the steps (`CycleInputs`: waiting lists in queue
order, the admitted work, the funded demand per leaf; read afresh by `scan`, or kept by
`incremental.IncrementalCore`), the node model and the allocations (built, or kept), fair share
and the ranking of allocations, the short jobs' headroom, the `Statement` every admission and
eviction goes through (simulated ones included) and the preemption search
(`preemption.RoomFinder`). Then what every later step does the same way: place a workload
(failures remembered until capacity is freed), admit, evict, say why a workload waits (one that
fits nowhere even on the idle cluster says that, whatever else holds it), note the first moment
time alone could change a decision, and the result. Who may be evicted is the eviction rule's
(`eviction.EvictionRule`), one per cycle, which the preemption search and the drain share.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Final, cast

from admitter.core.backfill import Backfill
from admitter.core.decisions import (
    Admission,
    CycleResult,
    Eviction,
    EvictionReason,
    Pending,
    PendingReason,
    Snapshot,
)
from admitter.core.eviction import EvictionRule
from admitter.core.fairshare import FairShare
from admitter.core.fit import fits
from admitter.core.headroom import Headroom
from admitter.core.model import GPU, Phase, Workload
from admitter.core.nodes import ClusterState
from admitter.core.placement import Placement, PlacementFailure, place
from admitter.core.preemption import RoomFinder
from admitter.core.queue_order import workload_key
from admitter.core.queue_tree import QueueTree
from admitter.core.quota import Allocations, QuotaLedger
from admitter.core.ranking import Ranking, gpu_budgets
from admitter.core.statement import Statement
from admitter.core.status import per_queue, queue_statuses
from admitter.core.usage import fair_share_now

OUTWEIGHED_BY_NEVER = frozenset({PendingReason.NO_FIT, PendingReason.PROTECTED_VICTIMS,
                                 PendingReason.LIMIT_EXCEEDED, PendingReason.QUOTA_EXCEEDED})
"""Reasons that say what holds a workload back now: for one that fits nowhere even with nothing
running, they would promise a start that never comes, so it waits with `NEVER_FITS` instead."""


@dataclass(slots=True)
class CycleInputs:
    """What a cycle reads of the workloads, arranged for its steps. `scan` makes it from a
    snapshot's workloads (the reference); `incremental.IncrementalCore` keeps one current
    between cycles as events arrive. A cycle only reads it."""

    waiting_funded: dict[str, list[Workload]]
    """Per leaf, pending funded workloads in queue order (`workload_key`). Funded and unfunded
    apart: each later pass reads one kind, and on a saturated cluster unfunded work piles up
    (thousands waiting for idle GPUs that do not come), so a pass over funded work must not
    walk it."""
    waiting_unfunded: dict[str, list[Workload]]
    position: dict[str, int]
    """Each pending workload's place in its leaf, funded and unfunded together (1 = next)."""
    admitted: list[Workload]
    """Admitted workloads of leaf queues, by key: only `running` iterates in an order that
    shows (drain evictions), so input order must not matter."""
    holding: list[Workload]
    """Every admitted workload, of a leaf queue or not: what the node model holds."""
    invalid: list[Workload]
    """Pending workloads whose queue is not a leaf."""
    demand: dict[str, dict[str, int]]
    """Per leaf, the summed requests of its funded workloads (fair share's demand)."""


def scan(workloads: Iterable[Workload], leaves: Iterable[str]) -> CycleInputs:
    """The inputs read from every workload afresh: one pass, then a sort per leaf."""
    waiting: dict[str, list[Workload]] = {leaf: [] for leaf in leaves}
    admitted: list[Workload] = []
    holding: list[Workload] = []
    invalid: list[Workload] = []
    demand: dict[str, dict[str, int]] = {}
    for workload in workloads:
        queued = waiting.get(workload.queue)
        if workload.phase is Phase.ADMITTED:
            holding.append(workload)
            if queued is not None:
                admitted.append(workload)
        elif workload.phase is Phase.PENDING:
            (invalid if queued is None else queued).append(workload)
        if queued is not None and workload.funded:
            leaf = demand.get(workload.queue)
            if leaf is None:
                leaf = demand[workload.queue] = {}
            for resource, amount in workload.requests().items():
                leaf[resource] = leaf.get(resource, 0) + amount
    admitted.sort(key=attrgetter("key"))
    inputs = CycleInputs({leaf: [] for leaf in waiting}, {leaf: [] for leaf in waiting}, {},
                         admitted, holding, invalid, demand)
    for name, queued in waiting.items():
        queued.sort(key=workload_key)
        funded, unfunded = inputs.waiting_funded[name], inputs.waiting_unfunded[name]
        for i, w in enumerate(queued, 1):
            inputs.position[w.key] = i
            (funded if w.funded else unfunded).append(w)
    return inputs


_UNKNOWN: Final = object()
"""A memo miss where None is a known answer."""


class Restated:
    """A waiting workload's reason that a later pass of the cycle may restate: part of its
    message, joined only when the message is read."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


class CycleState:
    """The cycle's state, kept current as the steps (`steps`) admit and evict.

    `snapshot` gives the moment, the settings, the nodes and the usage; its workloads are read
    from `inputs`. `nodes` (the node model) holds exactly `inputs.holding`, and `allocations`
    exactly `inputs.admitted`; the cycle changes both only through its `Statement`."""

    def __init__(self, snapshot: Snapshot, tree: QueueTree, inputs: CycleInputs,
                 nodes: ClusterState, allocations: Allocations) -> None:
        self.snapshot = snapshot
        self.now = snapshot.now
        self.non_preemptible_priority = snapshot.settings.non_preemptible_priority
        self.short_jobs = snapshot.settings.short_jobs
        """Who is a short job (`ShortJobs.is_short`), for every step alike."""
        self.reasons = snapshot.settings.reasons
        """Whether to say why each pending workload waits (`CycleSettings.reasons`): without,
        `wait` records nothing and work done only for a reason is skipped."""
        self.tree = tree
        self.nodes = {node.name: node for node in snapshot.nodes}
        self.state = nodes
        demand = inputs.demand
        capacity = self.state.schedulable_capacity()
        used, self.usage, self.fair = self._fair_share(demand, capacity)
        self.ledger = QuotaLedger(self.tree, self.fair, allocations)
        self.ranking = Ranking(self.tree, gpu_budgets(self.tree, capacity.get(GPU, 0)), used,
                               self.ledger.funded)
        self.running = {w.key: w for w in inputs.admitted}
        self.unfunded_held: dict[str, int] | None = None
        """`reservation.unfunded_gpus` of `running`, until `running` changes."""
        self.headroom = Headroom(self.state, inputs.holding, self.now,
                                 self.non_preemptible_priority, self.short_jobs,
                                 self.ledger.within_deserved, snapshot.short_gpus)
        self.statement = Statement(self.state, allocations, self.headroom)
        """Every change to the node model, the allocations and the headroom's count;
        `run_kept_cycle` rolls it back to hand kept models back unchanged."""
        self.eviction = EvictionRule(self.ranking, self.short_jobs,
                                     self.non_preemptible_priority,
                                     snapshot.settings.time_slicing)
        """Who may be evicted, for whom: asked by the search and by the drain alike."""
        self.finder = RoomFinder(self.statement, self.ledger, self.running, self.now,
                                 self.eviction, self.headroom)
        self.admissions: list[Admission] = []
        self.evictions: list[Eviction] = []
        self.pending: dict[str, Pending] = {}
        self.position = inputs.position
        self.waiting_funded = inputs.waiting_funded
        self.waiting_unfunded = inputs.waiting_unfunded
        self.invalid = inputs.invalid
        self.failures: dict[object, PlacementFailure] = {}
        self.next_change = math.inf
        """The first moment after `now` when time alone could change a decision (see
        `CycleResult.next_change`)."""
        self.steady_until = math.inf
        """See `CycleResult.steady_until` (`steady`)."""
        self.room_refused: dict[str, tuple[Workload, Restated]] = {}
        """Funded workloads only the short jobs' room turned away, in the order it did, with
        the reason they were given, which the last funded pass restates
        (`steps.step5_give_up_room`)."""
        self.reserved_for: Workload | None = None
        self.backfill: Backfill | None = None
        """What may start on the capacity held for `reserved_for` (`backfill.Backfill`)."""
        self.preemption_tried: set[tuple[str, object, str | None, bool]] = set()
        """Searches made: queue, workload shape, required level, and whether for a drain."""
        self.capped = False
        """Whether a preemptor was turned away because the searches ran out."""
        self.unsettled = False
        """Whether a cycle right after this one, on its outcome, could decide more (see
        `CycleResult.settled`)."""
        self.borrowed = False
        """Whether unfunded work was admitted: its queue then ranks later, which after a capped
        search lets another queue search in the next cycle."""
        self.standing: dict[str, tuple[tuple[int, float, int, str], str | None, bool]] = {}
        for workload in inputs.invalid:
            self.wait(workload, PendingReason.INVALID_QUEUE,
                      f"queue {workload.queue} is not a leaf ClusterQueue")

    def _fair_share(self, demand: dict[str, dict[str, int]], capacity: dict[str, int]
                    ) -> tuple[dict[str, float] | None, dict[str, float], FairShare]:
        """Fair share of `demand` (funded requests per leaf) with the windowed usage; also the
        windowed GPU-seconds per queue (subtree sums), None with time-based fair share off."""
        return fair_share_now(self.tree, capacity, demand, self.snapshot.usage,
                              self.snapshot.settings.fair_share)

    def waiting(self, funded: bool, short: bool | None = None) -> dict[str, list[Workload]]:
        """Per leaf, the eligible pending workloads that are (or are not) funded; with `short`,
        only those that are (or are not) short jobs (each pass says why its own are backed
        off)."""
        waiting = self.waiting_funded if funded else self.waiting_unfunded
        now, is_short = self.now, self.short_jobs.is_short
        return {leaf: [w for w in ws if (short is None or is_short(w) is short) and (
            w.eligible_at <= now or self.past_backoff(w))] for leaf, ws in waiting.items()}

    def past_backoff(self, workload: Workload, quiet: bool = False) -> bool:
        """Past any backoff; `quiet` only asks (the pass that serves it says why)."""
        if workload.eligible_at <= self.now:
            return True
        if not quiet:
            self.until(workload.eligible_at)
            self.wait(workload, PendingReason.BACKOFF,
                      "requeued after its pods were not ready in time",
                      retry_at=workload.eligible_at)
        return False

    def place(self, workload: Workload) -> Placement | PlacementFailure:
        """Placement, remembering failures until capacity is freed (admissions only shrink it):
        every workload of a shape after the first that failed gets the answer without a
        search."""
        # The topology's fields, not the request itself: a frozen dataclass hashes in Python.
        shape = workload.shape(), workload.topology.required, workload.topology.preferred
        known = self.failures.get(shape)
        if known is not None:
            return known
        placed = place(self.state, workload, explain=self.reasons)  # alike but the reason
        if isinstance(placed, PlacementFailure):
            self.failures[shape] = placed
        return placed

    def fits_idle(self, workload: Workload) -> bool:
        """Each pod set fits the idle nodes, topology aside: necessary for a placement, and
        read from the domain tree's memo for every workload after the first of its shape."""
        demand = self.state.demand(workload)
        return demand is not None and fits(self.state.tree.root, demand)

    def admit(self, workload: Workload, placement: Placement, why: str) -> None:
        """Start `workload` at `placement` on the statement; `why` opens its message."""
        admitted = workload.admitted(self.now, placement.node_counts)
        self.statement.allocate(admitted, placement.node_counts)
        self.running[workload.key] = admitted
        self.until(admitted.runs_out_at())  # stopped then (step 1), if it declared a maximum
        if workload.funded and self.ranking.by_holding:  # ranks moved: a failed search of
            self.unsettled = True  # this cycle might now find victims
        self.unfunded_held = None
        self.pending.pop(workload.key, None)
        where = _where(placement.affinity)
        narrower = tuple((pod_set.name, affinity) for pod_set, affinity in zip(
            workload.pod_sets, placement.pod_set_affinity, strict=True)
            if affinity != placement.affinity)
        where += "".join(f"; pod set {name} {_where(affinity)}" for name, affinity in narrower)
        self.admissions.append(Admission(workload.key, workload.queue, placement.node_counts,
                                         dict(placement.affinity), f"{why}; placed {where}",
                                         narrower))

    def evict(self, workload: Workload, reason: EvictionReason, message: str) -> None:
        """Evict for no preemptor (step 1); a search's victims are evicted on the statement by
        the search itself (`steps.funded.make_room`)."""
        self.statement.evict(workload)
        self.running.pop(workload.key)
        self.unfunded_held = None
        self.failures.clear()
        self.evictions.append(Eviction(workload.key, workload.queue, reason, message))

    def _next_change(self) -> float | None:
        self.until(self.finder.next_change)
        return None if self.next_change == math.inf else self.next_change

    def steady(self, moment: float) -> None:
        """Note `moment` as one when a comparison of this cycle with `now` could come out
        otherwise, though no decision need change then (`CycleResult.steady_until`)."""
        if self.now < moment < self.steady_until:
            self.steady_until = moment

    def until(self, moment: float | None) -> None:
        """Note `moment` as one when time alone could change a decision, if it is the first."""
        if moment is not None and self.now < moment < self.next_change:
            self.next_change = moment

    def _never_fits(self, workload: Workload) -> str | None:
        """Why `workload` fits no placement on the cluster's nodes even with nothing running on
        them and none cordoned (`ClusterState.idle`), or None if it would fit there: its shape,
        tolerations and topology against the nodes themselves. Asked once per shape for as long
        as the node model is kept."""
        idle = self.state.idle()
        shape = workload.shape(), workload.topology.required, workload.topology.preferred
        known = idle.never.get(shape, _UNKNOWN)  # one lookup: None is an answer too
        if known is not _UNKNOWN:
            return cast("str | None", known)
        placed = place(idle, workload)
        never = idle.never[shape] = (
            placed.reason if isinstance(placed, PlacementFailure) else None)
        return never

    def wait(self, workload: Workload, reason: PendingReason, *message: object,
              retry_at: float | None = None, blockers: tuple[str, ...] = ()) -> None:
        """`message` in parts, joined only if someone reads it (`Pending.message`). A workload
        that fits nowhere even on the idle cluster waits with `NEVER_FITS` rather than with a
        reason that says what holds it now (`OUTWEIGHED_BY_NEVER`). Nothing, for a caller that
        asked for no reasons: no decision reads a wait."""
        if not self.reasons:
            return
        if reason in OUTWEIGHED_BY_NEVER:
            never = self._never_fits(workload)
            if never is not None:
                reason, message, retry_at, blockers = PendingReason.NEVER_FITS, (
                    never, ", even with nothing else running on the cluster's nodes"), None, ()
        self.pending[workload.key] = Pending(workload.key, workload.queue, reason, message,
                                             self.position.get(workload.key, 0), retry_at,
                                             blockers)

    def _still_waiting(self) -> dict[str, int]:
        """Per queue, how many workloads still wait: all that waited, less this cycle's
        admissions. Counted so, not from the reasons, the count is one rule whether or not the
        caller asked for reasons. Counted now: a kept core's waiting lists change after the
        cycle."""
        counts = per_queue(self.invalid)
        for leaf, funded in self.waiting_funded.items():
            if funded or self.waiting_unfunded[leaf]:
                counts[leaf] = (counts.get(leaf, 0) + len(funded)
                                + len(self.waiting_unfunded[leaf]))
        for admission in self.admissions:
            counts[admission.queue] -= 1
        return counts

    def result(self) -> CycleResult:
        # Statuses are counted only if read, after kept allocations are rolled back: a copy.
        tree, running, waiting = self.tree, self.running, self.pending
        allocated = {name: dict(amounts) for name, amounts in self.ledger.held.items()}
        still = self._still_waiting()
        return CycleResult(
            admissions=tuple(self.admissions),
            evictions=tuple(self.evictions),
            pending=lambda: tuple(waiting[key] for key in sorted(waiting)),
            fair_share=self.fair,
            next_change=self._next_change(),
            settled=not (self.unsettled or self.evictions or (self.borrowed and self.capped)),
            statuses=lambda: queue_statuses(tree, allocated, running.values(), still),
            ranking=self.ranking,
            steady_until=self.steady_until,
        )


def _where(affinity: Mapping[str, str]) -> str:
    """A domain as admission messages name it."""
    return ("in " + ", ".join(f"{k}={v}" for k, v in affinity.items()) if affinity
            else "anywhere in the cluster")
