"""One admission cycle: snapshot in, decisions out. The steps read in the order they run.

1. The cycle's state (`cycle_state`): fair share for the snapshot's demand, usage and
   schedulable capacity (what `admitter fairshare` and the ClusterQueue status show), and the
   ranking of allocations: funded GPU time over the window against each queue's GPU budget
   (`ranking`).
2. Evictions that do not depend on anyone pending: work that ran its maximum run time (stopped
   for good), gangs whose pods never became ready, and work on cordoned nodes once past its
   min runtime (Ai2's automatic drain).
3. Funded admissions: short jobs first (`headroom`); then a starving gang of an allocation that
   is not over-served, of the team that used least of its budget, drains one domain
   (`drain_for_starving`); then the rest. Both passes serve the best-ranked allocation first
   (level by level, re-ranked after each admission), by priority inside a queue. Rank, don't
   cap: a funded workload is admitted where it fits, within explicit limits (long
   non-preemptible work within its fair share) and leaving the short jobs' headroom; one that does
   not fit may requeue running work past its min runtime (see `preemption`). Long work that
   cannot delay the drained gang may start on its held nodes (`backfill`). Last, long work
   that only the short jobs' room turned away is tried again on what is still idle, the room
   weighed against what it idles (`give_up_room`).
4. Unfunded workloads take what is still idle.
5. Every workload still pending gets the fact that blocks it.

As many workloads are admitted per cycle as fit; there is no one-head-per-queue limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from admitter.core.backfill import Backfill, start_time
from admitter.core.cycle_state import CycleInputs, CycleState, Restated, scan
from admitter.core.decisions import (
    CycleResult,
    Eviction,
    EvictionReason,
    PendingReason,
    Snapshot,
)
from admitter.core.fit import fits
from admitter.core.model import GPU, Workload
from admitter.core.moments import Moment, moment, span
from admitter.core.nodes import ClusterState, held_per_node
from admitter.core.placement import Placement, PlacementFailure, place
from admitter.core.preemption import drain_may_take
from admitter.core.queue_tree import QueueTree
from admitter.core.quota import Allocations, QuotaBlock
from admitter.core.reservation import RESERVATION_KEY, choose, describe, hold
from admitter.core.room import NOT_TRIED, Blocked, Search
from admitter.core.selection import QueueSelector

PREEMPTION_ATTEMPTS = 16
"""Preemptor searches per cycle, one per queue and workload shape (KAI's queueDepthPerAction
plays the same role); the cap bounds cycle time, and the queues left out search first in the
next cycle (see `CycleResult.settled`)."""

SHOWN_PROTECTED = 3
"""Protected workloads a ProtectedVictims message names; the rest are counted (all of them
are the Pending's blockers)."""


def run_cycle(snapshot: Snapshot) -> CycleResult:
    """Decide admissions and evictions for one snapshot, everything built afresh; pure and
    deterministic. The reference that `incremental.IncrementalCore` decides exactly as."""
    tree = QueueTree(snapshot.queues)
    inputs = scan(snapshot.workloads, tree.leaves())
    nodes = ClusterState(snapshot.nodes, snapshot.topology, inputs.holding)
    return _Cycle(snapshot, tree, inputs, nodes, Allocations(tree, inputs.admitted)).decide()


def run_kept_cycle(snapshot: Snapshot, tree: QueueTree, inputs: CycleInputs,
                   nodes: ClusterState, allocations: Allocations) -> CycleResult:
    """`run_cycle` on models a caller keeps between cycles (`incremental.IncrementalCore`):
    `tree` is `QueueTree(snapshot.queues)`, `inputs` what `scan` makes of the workloads, `nodes`
    the node model holding `inputs.holding` and `allocations` the sums of `inputs.admitted`.
    The cycle changes the two models only through its `Statement` and rolls that back before
    returning, so the caller gets them back unchanged, their memos warm."""
    cycle = _Cycle(snapshot, tree, inputs, nodes, allocations)
    mark = cycle.statement.checkpoint()
    try:
        return cycle.decide()
    finally:
        cycle.statement.rollback(mark)


def _drainable(running: Iterable[Workload], unfunded: dict[str, int], now: float,
               takes: Callable[[Workload], bool], waits_for: Callable[[Workload], bool]
               ) -> tuple[dict[str, int], dict[str, int]]:
    """GPUs per node a drain for a gang could take now: unfunded work's, and the funded work
    past its min runtime that it `takes` (`RoomFinder.drain_takes`); and what leaves once
    every protection has ended: what it takes, and what it `waits_for` besides
    (`RoomFinder.drain_waits_for`). One pass for both: each asks the ranking per workload."""
    now_held, later_held = dict(unfunded), dict(unfunded)
    for workload in running:
        until = workload.protected_until()
        if until is None:
            continue
        taken = takes(workload)
        if not taken and not waits_for(workload):
            continue
        per_node = held_per_node(workload, GPU)
        for node, gpus in per_node.items():
            later_held[node] = later_held.get(node, 0) + gpus
        if taken and until <= now:
            for node, gpus in per_node.items():
                now_held[node] = now_held.get(node, 0) + gpus
    return now_held, later_held


def _unfunded_gpus(running: Iterable[Workload]) -> dict[str, int]:
    """GPUs per node held by unfunded work, which yields to any funded workload at once."""
    held: dict[str, int] = {}
    for workload in running:
        if not workload.funded:
            for node, gpus in held_per_node(workload, GPU).items():
                held[node] = held.get(node, 0) + gpus
    return held


class _Cycle(CycleState):
    """Steps 2 to 4 on the state of one cycle (`cycle_state`)."""

    def decide(self) -> CycleResult:
        self.evict_unready_and_drained()
        self.admit_funded(short=True)
        self.drain_for_starving()
        self.admit_funded(short=False)
        self.give_up_room()
        self.admit_unfunded()
        return self.result()

    # Step 2 -----------------------------------------------------------------------------

    def evict_unready_and_drained(self) -> None:
        timeout = self.snapshot.settings.pods_ready_timeout
        cordoned_nodes = {name for name, node in self.nodes.items() if node.unschedulable}
        for workload in list(self.running.values()):
            runs_out = workload.runs_out_at()
            if runs_out is not None:
                if runs_out <= self.now:
                    assert workload.max_runtime is not None
                    self._evict(workload, EvictionReason.MAX_RUNTIME_EXCEEDED,
                                f"ran {span(workload.max_runtime)}, its maximum run time")
                    continue
                self._until(runs_out)
            started = self.now if workload.admitted_at is None else workload.admitted_at
            if not workload.pods_ready:
                if started + timeout <= self.now:
                    self._evict(workload, EvictionReason.PODS_READY_TIMEOUT,
                                f"pods not all running {span(timeout)} after admission")
                    continue
                self._until(started + timeout)
            if not cordoned_nodes:
                continue
            cordoned = sorted(cordoned_nodes.intersection(workload.placement))
            until = workload.protected_until()
            if cordoned and (until is None or until <= self.now):
                self._evict(workload, EvictionReason.DRAINED,
                            f"node {cordoned[0]} is cordoned; min runtime is over")
            elif cordoned:
                self._until(until)

    # Step 3 -----------------------------------------------------------------------------

    def drain_for_starving(self) -> None:
        """A funded workload past the starvation bound, of an allocation that is not over-served,
        that neither fits nor finds ranked victims, gets nodes reserved (`reservation.choose`: the
        domain cheapest to empty) and takes resumable work past its min runtime there, whatever its
        rank; what it cannot take yet leaves as its protection ends. They are held only while the
        short jobs' room would let it start on them (`Headroom.refuses_on`): held for a gang the
        room keeps off them, they would stand idle for nothing. The reserved nodes' free capacity
        is held from every funded admission of the cycle. One drain at a time bounds what stands
        idle. It goes to the team that has used the smallest part of its budget (leaf ratio), the
        longest-waiting workload first within a team: the drain is how a domain-wide gang starts
        on a full cluster, and waiting time alone would hand it to whoever submitted first, however
        much their team had used. Use moves only with time, so the target stays until it starts
        unless another starving team falls below its team's use; its nodes only gain free capacity
        meanwhile."""
        bound = self.snapshot.settings.starvation_bound
        starving: list[Workload] = []
        wanting: set[str] = set()  # queues with long funded work waiting, ancestors included
        for leaf, waiting in self.waiting_funded.items():
            if not all(self.short_jobs.is_short(w) for w in waiting):
                wanting.update(self.tree.path(leaf))
        over_served = self.ranking.over_served(
            wanting, self.snapshot.settings.time_slicing.swap_margin)
        for leaf, waiting in self.waiting_funded.items():
            well_ranked: bool | None = None
            for workload in waiting:
                if self.short_jobs.is_short(workload) or not self._eligible(workload, quiet=True):
                    continue  # a short job finds the headroom, not a drain
                if workload.submitted_at + bound > self.now:
                    self._until(workload.submitted_at + bound)
                    continue
                if well_ranked is None:
                    well_ranked = not over_served(leaf)
                if well_ranked:
                    starving.append(workload)
        maps: dict[tuple[str, int], tuple[dict[str, int], dict[str, int]]] = {}
        changed, unfunded = -1, {}
        ratio = self.ranking.ratio
        for workload in sorted(starving, key=lambda w: (ratio(w.queue), w.submitted_at, w.key)):
            if self.ledger.limit_block(workload) is not None:
                continue
            if self._try_funded(workload, starving=True):
                continue
            if changed != len(self.admissions) + len(self.evictions):  # what runs moved
                changed = len(self.admissions) + len(self.evictions)
                maps.clear()
                if self.unfunded_held is None:
                    self.unfunded_held = _unfunded_gpus(self.running.values())
                unfunded = self.unfunded_held
                # A protection ending can move the choice: the drain may take that work then
                # (short work too: a debug-sized job past its min runtime is the drain's).
                for other in self.running.values():
                    until = other.protected_until()
                    if until is not None and drain_may_take(
                            other, self.non_preemptible_priority, self.short_jobs):
                        self._until(until)
            # What a drain may take depends on the gang's queue and priority (its rank).
            takes = self.finder.drain_takes(workload)
            waits_for = self.finder.drain_waits_for(workload)
            taken = maps.get((workload.queue, workload.priority))
            if taken is None:
                taken = maps[workload.queue, workload.priority] = _drainable(
                    self.running.values(), unfunded, self.now, takes, waits_for)
            chosen = choose(self.state, self.nodes, workload, taken[0], taken[1])
            if not chosen:
                continue
            # The drain's target: not held to the short jobs' pool count (`headroom`), or a
            # domain emptied for it would still have to free the pool that the rest of the
            # cluster lacks. The same placement as above, without that bound.
            self.headroom.exempt = workload.key
            if self._try_funded(workload, starving=True):
                return
            if self.headroom.refuses_on(workload, chosen):
                self.headroom.exempt = None  # held, the nodes would stand idle for nothing
                continue
            self.finder.keep_off(chosen)
            blocked = self._make_room(workload, None, search=Search.DRAIN, explain=False)
            if blocked is None:
                return
            self.backfill = Backfill(workload, chosen, start_time(
                self.state, chosen, workload, self.running.values(), takes, self.now),
                takes, waits_for, self.short_jobs)
            hold(self.statement, chosen)
            self.reserved_for = workload
            # Held capacity turns away what comes after; a re-run could admit differently only
            # if something was admitted before the hold.
            self.unsettled = self.unsettled or bool(self.admissions)
            self.failures.clear()
            waited = self.now - workload.submitted_at
            self._wait(workload, PendingReason.RESERVED, f"waited {span(waited)}, past the "
                       f"starvation bound of {span(bound)}; {describe(workload, chosen)}",
                       retry_at=blocked.protected_until,
                       blockers=tuple(w.key for w in blocked.protected))
            return

    # Step 3, continued ------------------------------------------------------------------

    def admit_funded(self, short: bool) -> None:
        """Short jobs first, before a drain holds capacity: they see all the headroom kept for
        them, and what they take on drained nodes the drain takes back past their min runtime
        (`preemption`)."""
        self._serve({leaf: [w for w in ws if self.short_jobs.is_short(w) is short]
                     for leaf, ws in self._waiting(funded=True).items()}, unfunded=False)

    def give_up_room(self) -> None:
        """Long funded work that only the short jobs' room turned away, tried again in the
        order it was: every other funded workload has had its turn, so what is idle now would
        otherwise stand idle, and the room is given up to a start where keeping it would idle
        more GPUs than it keeps (`Headroom.refusal`, weighing). On idle GPUs only: nothing is
        evicted for it. Again until a round starts nothing: a start moves the others'
        placements, and one turned away on a node partly in use may now fit a node where
        nothing runs."""
        self.headroom.weighing = True
        started = True
        while started:
            started = False
            for key, (workload, said) in self.room_refused.items():
                if key in self.running or workload is self.reserved_for:
                    continue
                placed = self._place(workload)
                why = placed.reason if isinstance(placed, PlacementFailure) else (
                    self.headroom.refusal(workload, placed))
                if why is None and isinstance(placed, Placement):
                    self._admit(workload, placed, "fits; the short jobs' room is given up to "
                                "it, as keeping the room would idle more GPUs than it keeps")
                    started = True
                elif why is not None:
                    said.text = why  # its message says what decided last

    def _try_funded(self, workload: Workload, starving: bool = False) -> bool:
        """Admit where it fits, else make room; on failure, say why (a starving workload says
        nothing yet: the drain decides its reason)."""
        if self.reserved_for is workload or workload.key in self.running:
            return False
        limit = self.ledger.limit_block(workload)
        preemptible = workload.preemptible(self.non_preemptible_priority)
        share = None if preemptible or self.short_jobs.is_short(workload) else (
            self.ledger.share_block(workload))
        bound = limit if limit is not None else share
        why: object
        if bound is None:  # whether it fits first, then whether the room lets it start
            counted = self.headroom.count_refusal(workload)
            placed = self._place(workload) if counted is None or not self._fits_idle(
                workload) else None
            if isinstance(placed, PlacementFailure):
                why = placed.reason
            else:
                refused = counted if placed is None else self.headroom.refusal(workload, placed)
                if refused is None and placed is not None:
                    self._admit(workload, placed, "fits")
                    return True
                why = Restated(refused or "")
                self.room_refused[workload.key] = workload, why
        else:  # only victims under the queue at its bound can lower what it holds
            why = bound
        if bound is None and self._on_held(workload):
            return True
        blocked = self._make_room(workload, bound, search=Search.RANKED,
                                  explain=not starving)
        if blocked is None:
            return True
        if starving:
            return False
        if blocked.protected and blocked.protected_until is not None:  # proved (`RoomFinder`)
            protected = blocked.protected
            names = ", ".join(w.key for w in protected[:SHOWN_PROTECTED]) + (
                f" and {len(protected) - SHOWN_PROTECTED} more"
                if len(protected) > SHOWN_PROTECTED else "")
            self._wait(workload, PendingReason.PROTECTED_VICTIMS,
                       why, "; evicting ", names, " would make room, and their min runtime "
                       "protects them until ", Moment(blocked.protected_until, self.now),
                       retry_at=blocked.protected_until,
                       blockers=tuple(w.key for w in protected))
        elif limit is not None:
            self._wait(workload, PendingReason.LIMIT_EXCEEDED, limit)
        elif share is not None:
            self._wait(workload, PendingReason.QUOTA_EXCEEDED, share,
                       " (non-preemptible work stays within its fair share)")
        else:
            self._wait(workload, PendingReason.NO_FIT, why)
        return False

    def _on_held(self, workload: Workload) -> bool:
        """Start `workload` on capacity held for the drain's gang, if it stays within its
        queues' deserved GPUs (a hold is a reserve, and a reserve is never taken out of
        another queue's guarantee; inside the gang's own queue, the gang keeps its place), or
        if it cannot delay the gang (`backfill.Backfill`: backfilled) and the drain's choice
        stays put with it running; the rest of the held capacity stays held. Held GPUs stand
        idle for hours otherwise, while the gang waits for protected occupants."""
        backfill = self.backfill
        if backfill is None:
            return False
        guaranteed = (workload.queue != backfill.gang.queue
                      and self.ledger.within_deserved(workload))
        if not guaranteed and not backfill.may_take(workload, self.now):
            return False
        shape = ("backfill", workload.shape(), workload.topology.required,
                 workload.topology.preferred)
        if shape in self.failures:
            return False
        statement = self.statement
        mark = statement.checkpoint()
        statement.release(RESERVATION_KEY)
        placed = place(self.state, workload)
        if isinstance(placed, PlacementFailure):
            self.failures[shape] = placed  # capacity only shrinks until something is evicted
        if not isinstance(placed, Placement) or self.headroom.refusal(
                workload, placed) is not None or not (
                    guaranteed or self._keeps_choice(backfill, workload, placed)):
            statement.rollback(mark)  # the hold is back as it was
            return False
        start_at = backfill.start_at  # known unless guaranteed (`Backfill.may_take`)
        self._admit(workload, placed, (
            f"within its queues' deserved quota, on nodes held for {backfill.gang.key}"
            if guaranteed or start_at is None else
            f"backfilled on nodes held for {backfill.gang.key}, its min runtime over by "
            f"{moment(start_at, self.now)}, when that gang could start"))
        hold(statement, backfill.chosen)
        return True

    def _keeps_choice(self, backfill: Backfill, workload: Workload,
                      placed: Placement) -> bool:
        """Whether the drain would choose the same nodes with `workload` running at `placed`
        (assumed on the statement for the question only)."""
        mark = self.statement.checkpoint()
        self.statement.assume(workload.key, workload.pod_sets, placed.node_counts)
        running = [*self.running.values(), workload.admitted(self.now, placed.node_counts)]
        unfunded = _unfunded_gpus(running)
        chosen = choose(self.state, self.nodes, backfill.gang, *_drainable(
            running, unfunded, self.now, backfill.takes, backfill.waits_for))
        self.statement.rollback(mark)
        return sorted(chosen) == sorted(backfill.chosen)

    def _make_room(self, workload: Workload, bound: QuotaBlock | None, *, search: Search,
                   explain: bool) -> Blocked | None:
        """Requeue running work for `workload` (see `preemption`); `bound` is the queue on
        its path at a bound, under which victims must be. Tried once per queue and workload
        shape per cycle (a queue's debug job searches even while its gang is blocked), for at
        most `PREEMPTION_ATTEMPTS` per cycle, best-ranked first; the rest get their turn next
        cycle. None once admitted; `explain` names the protected candidates."""
        attempt = (workload.queue, workload.shape(), workload.topology.required,
                   search is Search.DRAIN)  # a bool: an Enum member hashes in Python
        if attempt in self.preemption_tried:
            return NOT_TRIED
        if self.finder.simulated >= PREEMPTION_ATTEMPTS:
            if not self.capped:
                self.capped = True
                self.unsettled = True  # the searches left out go first in the next cycle
            return NOT_TRIED
        self.preemption_tried.add(attempt)
        room = self.finder.find(workload, search, bound, explain=explain)
        if isinstance(room, Blocked):
            return room
        for victim in room.victims:  # evicted on the statement by the search
            self.running.pop(victim.workload.key)
            self.evictions.append(Eviction(victim.workload.key, victim.workload.queue,
                                           victim.reason, victim.message, workload.key))
        self.failures.clear()
        self._admit(workload, room.placement,
                    f"after evicting {', '.join(v.workload.key for v in room.victims)}")
        return None

    # Step 4 -----------------------------------------------------------------------------

    def admit_unfunded(self) -> None:
        if self.reserved_for is not None:  # unfunded work may fill reserved nodes until used
            self.statement.release(RESERVATION_KEY)
            self.failures.clear()
        self._serve(self._could_run(self._waiting(funded=False)), unfunded=True,
                    until_gpus_run_out=True)

    def _could_run(self, work: dict[str, list[Workload]]) -> dict[str, list[Workload]]:
        """Drop, with their reason, workloads needing more GPUs than the whole cluster has
        idle, or whose pods fit on no set of idle nodes at all: on a saturated cluster that is
        most of them, and no placement search is needed to know it (idle capacity only shrinks
        while unfunded work is admitted)."""
        idle = self.state.free_total(GPU)
        short_of = f"the cluster has {idle} idle {GPU}; "  # once, not per workload
        possible: dict[str, list[Workload]] = {}
        for leaf, workloads in work.items():
            possible[leaf] = []
            for workload in workloads:
                need = workload.requests().get(GPU, 0)
                if need <= idle and self._fits_idle(workload):
                    possible[leaf].append(workload)
                elif (limit := self.ledger.limit_block(workload)) is not None:
                    self._wait(workload, PendingReason.LIMIT_EXCEEDED, limit)
                elif need > idle and not self.state.tree.fleet:  # a fleet names its clusters
                    self._wait(workload, PendingReason.NO_FIT, short_of, need, " needed")
                else:
                    failed = self._place(workload)
                    assert isinstance(failed, PlacementFailure)  # place() checks fits() first
                    self._wait(workload, PendingReason.NO_FIT, failed.reason)
        return possible

    def _fits_idle(self, workload: Workload) -> bool:
        """Each pod set fits the idle nodes, topology aside: necessary for a placement, and
        read from the domain tree's memo for every workload after the first of its shape."""
        demand = self.state.demand(workload)
        return demand is not None and fits(self.state.tree.root, demand)

    def _try_unfunded(self, workload: Workload) -> bool:
        limit = self.ledger.limit_block(workload)
        if limit is not None:
            self._wait(workload, PendingReason.LIMIT_EXCEEDED, limit)
            return False
        placed = self._place(workload)
        if isinstance(placed, Placement):
            self._admit(workload, placed, "unfunded, on idle capacity")
            self.borrowed = True
            return True
        self._wait(workload, PendingReason.NO_FIT, placed.reason)
        return False

    # Offering capacity -------------------------------------------------------------------

    def _serve(self, work: dict[str, list[Workload]], *, unfunded: bool,
               until_gpus_run_out: bool = False) -> None:
        """Offer capacity leaf by leaf, best-ranked allocation first, each workload once, in
        queue order. A failed attempt changes no queue's allocation, so the leaf stays the best
        one: its workloads are tried one after another until one is admitted, and only then is
        the best leaf asked for again. `until_gpus_run_out` (only where nothing is evicted):
        once no GPU is idle, what is left goes back through `_could_run`, which names the
        reason without a search."""
        cursor = dict.fromkeys(work, 0)
        selector = QueueSelector(self.tree, self.ranking, self.usage, self.ledger,
                                 [leaf for leaf, ws in work.items() if ws], self.standing)
        while (leaf := selector.best()) is not None:
            workloads, at = work[leaf], cursor[leaf]
            admitted = False
            while at < len(workloads) and not admitted:
                evictions = len(self.evictions)
                workload = workloads[at]
                admitted = (self._try_unfunded(workload) if unfunded
                            else self._try_funded(workload))
                at += 1
            cursor[leaf] = at
            if admitted:
                selector.refresh(leaf)
                for eviction in self.evictions[evictions:]:
                    selector.refresh(eviction.queue)
                if until_gpus_run_out and self.state.free_total(GPU) == 0:
                    rest = {name: ws[cursor[name]:] for name, ws in work.items()}
                    self._serve(self._could_run(rest), unfunded=unfunded)
                    return
            if at == len(workloads):
                selector.retire(leaf)
