"""One admission cycle: snapshot in, decisions out. The steps read in the order they run.

1. Fair share for the snapshot's demand, usage and schedulable capacity.
2. Evictions that do not depend on anyone pending: gangs whose pods never became ready, and
   work on cordoned nodes once past its min runtime (Ai2's automatic drain).
3. Entitled admissions, best-ranked queue first (DRF order, re-ranked after each admission):
   funded workloads that stay within their queue's fair share (non-preemptible ones within
   deserved quota). One that does not fit may make room by preemption or reclaim (see
   `preemption`); the first that has waited past the starvation bound gets nodes reserved.
4. Borrowing: funded workloads over their fair share, then unfunded ones, take what is still
   free. They are what reclaim takes back later, which is why borrowing comes last.
5. Every workload still pending gets the fact that blocks it.

As many workloads are admitted per cycle as fit; there is no one-head-per-queue limit.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable
from operator import attrgetter

from admitter.core.decisions import (
    Admission,
    CycleResult,
    Eviction,
    EvictionReason,
    Pending,
    Snapshot,
)
from admitter.core.fairshare import FairShare
from admitter.core.fit import fits
from admitter.core.model import GPU, Phase, Workload
from admitter.core.nodes import ClusterState, held_per_node
from admitter.core.placement import Placement, PlacementFailure, place
from admitter.core.preemption import NOT_TRIED, Blocked, RoomFinder
from admitter.core.queue_order import workload_key
from admitter.core.queue_tree import QueueTree
from admitter.core.quota import Allocations, QuotaLedger
from admitter.core.reservation import RESERVATION_KEY, describe, reserve
from admitter.core.selection import QueueSelector
from admitter.core.status import queue_statuses
from admitter.core.usage import fair_share_now

PREEMPTION_ATTEMPTS = 16
"""Preemptors simulated per cycle (KAI's queueDepthPerAction plays the same role)."""


def run_cycle(snapshot: Snapshot, nodes: ClusterState | None = None,
              tree: QueueTree | None = None,
              allocations: Allocations | None = None) -> CycleResult:
    """Decide admissions and evictions for one snapshot; pure and deterministic.

    `nodes` lets a caller that runs cycle after cycle (the simulator) keep the node model
    instead of having it rebuilt: it must be `ClusterState(snapshot.nodes, snapshot.topology,
    <the admitted workloads>)` kept current with `assume`/`release` (and `commit`). The cycle
    works on it from a checkpoint and rolls back before returning, so the caller gets it back
    unchanged, with its fit memos warm; the decisions are the same either way. Likewise
    `allocations` (`Allocations(tree, <admitted workloads of leaf queues>)`, kept current with
    `add`/`remove`/`commit`) and `tree` (`QueueTree(snapshot.queues)`: paths, limits, fair
    share's sibling groups).
    """
    # The cycle's tens of thousands of short-lived objects would trigger full collector passes
    # over the whole heap for nothing (reference counting frees them). A plain try, not a
    # context manager: contextlib's runs interpreted, even when compiled.
    collecting = gc.isenabled()
    gc.disable()
    node_mark = None if nodes is None else nodes.checkpoint()
    allocation_mark = 0 if allocations is None else allocations.checkpoint()
    try:
        return _decide(snapshot, nodes, tree, allocations)
    finally:
        if nodes is not None and node_mark is not None:
            nodes.rollback(node_mark)
        if allocations is not None:
            allocations.rollback(allocation_mark)
        if collecting:
            gc.enable()


def _decide(snapshot: Snapshot, nodes: ClusterState | None, tree: QueueTree | None,
            allocations: Allocations | None) -> CycleResult:
    cycle = _Cycle(snapshot, nodes, tree, allocations)
    cycle.evict_unready_and_drained()
    cycle.admit_entitled()
    cycle.admit_borrowers()
    return cycle.result()


def _unfunded_gpus(running: Iterable[Workload]) -> dict[str, int]:
    """GPUs per node held by unfunded work, which yields to any funded workload at once."""
    held: dict[str, int] = {}
    for workload in running:
        if not workload.funded:
            for node, gpus in held_per_node(workload, GPU).items():
                held[node] = held.get(node, 0) + gpus
    return held


class _Cycle:
    def __init__(self, snapshot: Snapshot, nodes: ClusterState | None,
                 tree: QueueTree | None, allocations: Allocations | None) -> None:
        self.snapshot = snapshot
        self.now = snapshot.now
        self.non_preemptible_priority = snapshot.settings.non_preemptible_priority
        self.tree = QueueTree(snapshot.queues) if tree is None else tree
        self.nodes = {node.name: node for node in snapshot.nodes}
        # Input order must not matter: only `running` iterates in an order that shows (drain
        # evictions), so only the admitted are sorted; waiting lists are sorted below.
        leaves = self.tree.leaves()
        self.waiting: dict[str, list[Workload]] = {leaf: [] for leaf in leaves}
        admitted: list[Workload] = []
        holding: list[Workload] = []
        invalid: list[Workload] = []
        demand: dict[str, dict[str, int]] = {}
        for workload in snapshot.workloads:  # one pass: this loop sees every workload
            waiting = self.waiting.get(workload.queue)
            if workload.phase is Phase.ADMITTED:
                holding.append(workload)
                if waiting is not None:
                    admitted.append(workload)
            elif workload.phase is Phase.PENDING:
                (invalid if waiting is None else waiting).append(workload)
            if waiting is not None and workload.min_runtime > 0:  # funded demand, inlined
                leaf = demand.get(workload.queue)
                if leaf is None:
                    leaf = demand[workload.queue] = {}
                for resource, amount in workload.requests().items():
                    leaf[resource] = leaf.get(resource, 0) + amount
        admitted.sort(key=attrgetter("key"))
        if nodes is None:
            nodes = ClusterState(snapshot.nodes, snapshot.topology, holding)
        elif nodes.held_count() != len(holding) or not all(
                nodes.assumed(w.key) for w in holding):
            raise ValueError("the node model given to run_cycle does not hold exactly the "
                             "snapshot's admitted workloads")
        self.state = nodes
        if allocations is None:
            allocations = Allocations(self.tree, admitted)
        elif allocations.count() != len(admitted) or not all(
                allocations.holds(w.key) for w in admitted):
            raise ValueError("the allocations given to run_cycle do not hold exactly the "
                             "snapshot's admitted workloads")
        self.usage, self.fair = self._fair_share(demand)
        self.ledger = QuotaLedger(self.tree, self.fair, allocations)
        self.running = {w.key: w for w in admitted}
        self.unfunded_held: dict[str, int] | None = None
        """`_unfunded_gpus` of `running`, until `running` changes."""
        self.finder = RoomFinder(self.state, self.ledger, self.running, self.now,
                                 self.non_preemptible_priority)
        self.admissions: list[Admission] = []
        self.evictions: list[Eviction] = []
        self.pending: dict[str, Pending] = {}
        self.position: dict[str, int] = {}
        for waiting in self.waiting.values():
            waiting.sort(key=workload_key)
            self.position.update((w.key, i) for i, w in enumerate(waiting, 1))
        self.deferred: dict[str, list[Workload]] = {leaf: [] for leaf in leaves}
        self.failures: dict[object, PlacementFailure] = {}
        self.next_change = math.inf
        """The first moment after `now` when time alone could change a decision (see
        `CycleResult.next_change`)."""
        self.reserved_for: Workload | None = None
        self.preemption_tried: set[tuple[str, bool]] = set()
        self.capped = False
        """Whether a preemptor was turned away because the searches ran out."""
        self.unsettled = False
        """Whether a cycle right after this one, on its outcome, could decide more (see
        `CycleResult.settled`)."""
        self.borrowed = False
        """Whether unfunded work was admitted: its queue then ranks later, which after a capped
        search lets another queue search in the next cycle."""
        self.over_share: dict[str, object] = {}
        """Why a deferred borrower was over its share: the start of its message if it waits."""
        self.standing: dict[str, tuple[tuple[int, float, int, str], str | None, bool]] = {}
        for workload in invalid:
            self._wait(workload, "InvalidQueue",
                       f"queue {workload.queue} is not a leaf ClusterQueue")

    def _fair_share(self, demand: dict[str, dict[str, int]]) -> tuple[dict[str, float],
                                                                     FairShare]:
        """Fair share of `demand` (funded requests per leaf) with the windowed usage."""
        return fair_share_now(self.tree, self.state.schedulable_capacity(), demand,
                              self.snapshot.usage, self.now, self.snapshot.settings.fair_share)

    # Step 2 -----------------------------------------------------------------------------

    def evict_unready_and_drained(self) -> None:
        timeout = self.snapshot.settings.pods_ready_timeout
        cordoned_nodes = {name for name, node in self.nodes.items() if node.unschedulable}
        for workload in list(self.running.values()):
            started = self.now if workload.admitted_at is None else workload.admitted_at
            if not workload.pods_ready:
                if started + timeout <= self.now:
                    self._evict(workload, EvictionReason.PODS_READY_TIMEOUT,
                                f"pods not all running {timeout:g}s after admission")
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

    def admit_entitled(self) -> None:
        self._serve(self._waiting(funded=True), borrowing=False)

    def _try_entitled(self, workload: Workload) -> bool:
        if self._held_back(workload):
            return False
        in_quota_only = not workload.preemptible(self.non_preemptible_priority)
        share = self.ledger.share_block(workload, deserved_only=in_quota_only)
        why: object = share
        if share is None:
            placed = self._place(workload)
            if isinstance(placed, Placement):
                self._admit(workload, placed, "within fair share")
                return True
            why = placed.reason
        blocked = self._make_room(workload, in_quota_only, None if share is None else share.queue,
                                  explain=share is None or in_quota_only)
        if blocked is None:
            return True
        if self._reserve_if_starving(workload, in_quota_only):
            return False
        if share is not None and not in_quota_only:
            self.over_share[workload.key] = why
            self.deferred[workload.queue].append(workload)
            return False
        if blocked.protected_until is not None:
            names = ", ".join(w.key for w in blocked.protected[:3])
            self._wait(workload, "ProtectedVictims",
                       f"{why}; the workloads that could make room ({names}) are protected by "
                       f"their min runtime until t={blocked.protected_until:g}s",
                       retry_at=blocked.protected_until)
        else:
            self._wait(workload, "QuotaExceeded" if share is not None else "NoFit", why)
        return False

    def _make_room(self, workload: Workload, in_quota_only: bool, within: str | None, *,
                   borrowing: bool = False, explain: bool = False) -> Blocked | None:
        """Preempt or reclaim; when a queue on the path is at its share (`within`), only victims
        under that queue can help; a `borrowing` workload (funded, over its share) may only
        displace unfunded work. Tried for the first workload of each queue that fails in each
        pass, and for at most `PREEMPTION_ATTEMPTS` per cycle, best-ranked first (simulations
        are the expensive part of a cycle; the rest get their turn next cycle). None once
        admitted; `explain` names the protected candidates, wanted only as a reason."""
        attempt = (workload.queue, borrowing)
        if attempt in self.preemption_tried:
            return NOT_TRIED
        if len(self.preemption_tried) >= PREEMPTION_ATTEMPTS:
            if not self.capped:  # with admissions before the cap, a re-run serves them later
                self.capped = True  # and the searches go to other queues
                self.unsettled = self.unsettled or bool(self.admissions)
            return NOT_TRIED
        self.preemption_tried.add(attempt)
        room = self.finder.find(workload, None if borrowing else in_quota_only, within,
                                explain=explain)
        if isinstance(room, Blocked):
            return room
        for victim in room.victims:
            self.running.pop(victim.workload.key)
            self.evictions.append(Eviction(victim.workload.key, victim.workload.queue,
                                           victim.reason, victim.message, workload.key))
        self.failures.clear()
        self._admit(workload, room.placement,
                    f"after evicting {', '.join(v.workload.key for v in room.victims)}")
        return None

    def _reserve_if_starving(self, workload: Workload, in_quota_only: bool) -> bool:
        """The first blocked workload past the starvation bound that its queue could hold by
        itself gets nodes reserved, and its queue admits nothing behind it this cycle."""
        if self.reserved_for is not None:
            return False
        bound = self.snapshot.settings.starvation_bound
        waiting = self.now - workload.submitted_at < bound
        if waiting and workload.submitted_at + bound >= self.next_change:
            return False  # not starving yet, and an earlier moment is already named
        if self.ledger.share_block(workload, deserved_only=in_quota_only, alone=True):
            return False
        if waiting:
            self._until(workload.submitted_at + bound)  # then it would be the one reserved for
            return False
        if self.unfunded_held is None:
            self.unfunded_held = _unfunded_gpus(self.running.values())
        reserved = reserve(self.state, self.nodes, workload, self.unfunded_held)
        if not reserved:
            return False
        self.reserved_for = workload
        self.unsettled = self.unsettled or bool(self.admissions)  # the same holds for who waits
        self.finder.keep_off(reserved)
        self.failures.clear()
        waited = self.now - workload.submitted_at
        self._wait(workload, "Reserved", f"waited {waited:g}s, past the starvation bound of "
                   f"{bound:g}s; {describe(workload, reserved)}")
        return True

    # Step 4 -----------------------------------------------------------------------------

    def admit_borrowers(self) -> None:
        unfunded_held = sum(w.requests().get(GPU, 0) for w in self.running.values()
                            if not w.funded)
        self._serve(self._could_borrow(self.deferred, unfunded_held), borrowing=True)
        if self.reserved_for is not None:  # unfunded work may fill reserved nodes until used
            self.state.release(RESERVATION_KEY)
            self.failures.clear()
        self._serve(self._could_borrow(self._waiting(funded=False), 0), borrowing=True,
                    until_gpus_run_out=True)

    def _could_borrow(self, work: dict[str, list[Workload]],
                      displaceable: int) -> dict[str, list[Workload]]:
        """Drop, with their reason, workloads needing more GPUs than the whole cluster has
        idle (plus `displaceable`, what unfunded work holds, for funded borrowers), or, with
        nothing to displace, whose pods fit on no set of idle nodes at all: on a saturated
        cluster that is most of them, and no placement search is needed to know it (idle
        capacity only shrinks while borrowers are admitted)."""
        idle = self.state.free_total(GPU)
        possible: dict[str, list[Workload]] = {}
        for leaf, workloads in work.items():
            possible[leaf] = []
            for workload in workloads:
                need = workload.requests().get(GPU, 0)
                if need <= idle + displaceable and (displaceable or self._fits_idle(workload)):
                    possible[leaf].append(workload)
                elif self._held_back(workload):
                    continue
                elif need > idle + displaceable:
                    self._no_idle(workload, "the cluster has ", idle, " idle ", GPU, "; ", need,
                                  " needed")
                else:
                    failed = self._place(workload)
                    assert isinstance(failed, PlacementFailure)  # place() checks fits() first
                    self._no_idle(workload, failed.reason)
        return possible

    def _fits_idle(self, workload: Workload) -> bool:
        """Each pod set fits the idle nodes, topology aside: necessary for a placement, and
        read from the domain tree's memo for every workload after the first of its shape."""
        demand = self.state.demand(workload)
        return demand is not None and fits(self.state.tree.root, demand)

    def _try_borrow(self, workload: Workload) -> bool:
        if self._held_back(workload):
            return False
        placed = self._place(workload)
        if isinstance(placed, Placement):
            self._admit(workload, placed, "borrowing idle capacity"
                        if workload.funded else "unfunded, on idle capacity")
            if workload.funded:  # its queue may now be over its share: what else it runs
                self.unsettled = True  # becomes what an earlier preemptor may reclaim
            else:
                self.borrowed = True
            return True
        if workload.funded and workload.preemptible(self.non_preemptible_priority) and (
                self._make_room(workload, False, None, borrowing=True) is None):
            return True
        self._no_idle(workload, placed.reason)
        return False

    def _no_idle(self, workload: Workload, *why: object) -> None:
        over = self.over_share.get(workload.key)
        if over is None:
            self._wait(workload, "NoFit", *why)
        else:
            self._wait(workload, "QuotaExceeded", over,
                       ", and there is no idle capacity to borrow: ", *why)

    # Shared mechanics -------------------------------------------------------------------

    def _serve(self, work: dict[str, list[Workload]], *, borrowing: bool,
               until_gpus_run_out: bool = False) -> None:
        """Offer capacity leaf by leaf in queue order, each workload once, in queue order.
        A failed attempt changes no queue's allocation, so the leaf stays the best one: its
        workloads are tried one after another until one is admitted, and only then is the
        best leaf asked for again. Each workload goes to `_try_borrow` when `borrowing`, else
        to `_try_entitled`. `until_gpus_run_out` (only where nothing is evicted): once
        no GPU is idle, what is left goes back through `_could_borrow`, which names the reason
        without a search."""
        cursor = dict.fromkeys(work, 0)
        selector = QueueSelector(self.tree, self.fair, self.usage, self.ledger,
                                 [leaf for leaf, ws in work.items() if ws], self.standing)
        while (leaf := selector.best()) is not None:
            workloads, at = work[leaf], cursor[leaf]
            admitted = False
            while at < len(workloads) and not admitted:
                evictions = len(self.evictions)
                workload = workloads[at]
                admitted = self._try_borrow(workload) if borrowing else self._try_entitled(workload)
                at += 1
            cursor[leaf] = at
            if admitted:
                selector.refresh(leaf)
                for eviction in self.evictions[evictions:]:
                    selector.refresh(eviction.queue)
                if until_gpus_run_out and self.state.free_total(GPU) == 0:
                    rest = {name: ws[cursor[name]:] for name, ws in work.items()}
                    self._serve(self._could_borrow(rest, 0), borrowing=borrowing)
                    return
            if at == len(workloads):
                selector.retire(leaf)

    def _waiting(self, funded: bool) -> dict[str, list[Workload]]:
        """Per leaf, the eligible pending workloads that are (or are not) funded."""
        return {leaf: [w for w in ws if w.funded is funded and self._eligible(w)]
                for leaf, ws in self.waiting.items()}

    def _held_back(self, workload: Workload) -> bool:
        """Blocked before fair share is even asked: behind a reservation, or at a limit."""
        head = self.reserved_for
        if head is not None and head.queue == workload.queue:
            self._wait(workload, "BehindReservation", "queue ", workload.queue,
                       " admits nothing behind ", head.key,
                       ", which waited past the starvation bound")
            return True
        limit = self.ledger.limit_block(workload)
        if limit is not None:
            self._wait(workload, "LimitExceeded", limit)
            return True
        return False

    def _eligible(self, workload: Workload) -> bool:
        if workload.eligible_at <= self.now:
            return True
        self._until(workload.eligible_at)
        self._wait(workload, "Backoff", "requeued after its pods were not ready in time",
                   retry_at=workload.eligible_at)
        return False

    def _place(self, workload: Workload) -> Placement | PlacementFailure:
        """Placement, remembering failures until capacity is freed (admissions only shrink it)."""
        # The topology's fields, not the request itself: a frozen dataclass hashes in Python.
        shape = workload.shape(), workload.topology.required, workload.topology.preferred
        known = self.failures.get(shape)
        if known is not None:
            return known
        placed = place(self.state, workload)
        if isinstance(placed, PlacementFailure):
            self.failures[shape] = placed
        return placed

    def _admit(self, workload: Workload, placement: Placement, why: str) -> None:
        self.state.assume(workload.key, workload.pod_sets, placement.node_counts)
        admitted = workload.admitted(self.now, placement.node_counts)
        self.ledger.add(admitted)
        self.running[workload.key] = admitted
        self.unfunded_held = None
        self.pending.pop(workload.key, None)
        where = ("in " + ", ".join(f"{k}={v}" for k, v in placement.affinity.items())
                 if placement.affinity else "anywhere in the cluster")
        self.admissions.append(Admission(workload.key, workload.queue, placement.node_counts,
                                         dict(placement.affinity), f"{why}; placed {where}"))

    def _evict(self, workload: Workload, reason: EvictionReason, message: str) -> None:
        self.state.release(workload.key)
        self.ledger.remove(workload)
        self.running.pop(workload.key)
        self.unfunded_held = None
        self.failures.clear()
        self.evictions.append(Eviction(workload.key, workload.queue, reason, message))

    def _next_change(self) -> float | None:
        self._until(self.finder.next_change)
        return None if self.next_change == math.inf else self.next_change

    def _until(self, moment: float | None) -> None:
        if moment is not None and self.now < moment < self.next_change:
            self.next_change = moment

    def _wait(self, workload: Workload, reason: str, *message: object,
              retry_at: float | None = None) -> None:
        """`message` in parts, joined only if someone reads it (`Pending.message`)."""
        self.pending[workload.key] = Pending(workload.key, workload.queue, reason, message,
                                             self.position.get(workload.key, 0), retry_at)

    def result(self) -> CycleResult:
        # Statuses are counted only if read, after kept allocations are rolled back: a copy.
        tree, running = self.tree, self.running
        allocated = {name: dict(amounts) for name, amounts in self.ledger.held.items()}
        pending = tuple(self.pending[key] for key in sorted(self.pending))
        return CycleResult(
            admissions=tuple(self.admissions),
            evictions=tuple(self.evictions),
            pending=pending,
            fair_share=self.fair,
            next_change=self._next_change(),
            settled=not (self.unsettled or self.evictions or (self.borrowed and self.capped)),
            statuses=lambda: queue_statuses(tree, allocated, running.values(), pending),
        )
