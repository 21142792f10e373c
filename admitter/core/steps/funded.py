"""Admitting one funded workload, the way every funded step does it (short work, the drain's
gang, long work): where it fits, within its limits and leaving the short jobs' room; else on
capacity held for the drain (`held_capacity`); else by making room (`preemption.RoomFinder`,
who may be evicted being `eviction`'s to say). A workload that still waits is told why.
"""

from __future__ import annotations

from admitter.core.cycle_state import CycleState, Restated
from admitter.core.decisions import Eviction, PendingReason
from admitter.core.model import Workload
from admitter.core.moments import Moment
from admitter.core.placement import PlacementFailure
from admitter.core.quota import QuotaBlock
from admitter.core.room import NOT_TRIED, Blocked, Search
from admitter.core.steps.held_capacity import start_on_held
from admitter.core.steps.offer import serve

PREEMPTION_ATTEMPTS = 16
"""Preemptor searches per cycle, one per queue and workload shape (KAI's queueDepthPerAction
plays the same role); the cap bounds cycle time, and the queues left out search first in the
next cycle (see `CycleResult.settled`)."""

SHOWN_PROTECTED = 3
"""Protected workloads a ProtectedVictims message names; the rest are counted (all of them
are the Pending's blockers)."""


def admit_funded(cycle: CycleState, short: bool) -> None:
    """Every waiting funded workload past its backoff that is (or is not) a short job, offered
    capacity best-ranked allocation first (`offer.serve`)."""
    serve(cycle, cycle.waiting(funded=True, short=short),
          lambda workload: try_funded(cycle, workload))


def try_funded(cycle: CycleState, workload: Workload, starving: bool = False) -> bool:
    """Admit where it fits, else make room; on failure, say why (a starving workload says
    nothing yet: the drain decides its reason), proving a ProtectedVictims wait only for a
    caller that asked for reasons."""
    if cycle.reserved_for is workload or workload.key in cycle.running:
        return False
    limit = cycle.ledger.limit_block(workload)
    preemptible = workload.preemptible(cycle.non_preemptible_priority)
    share = None if preemptible or cycle.short_jobs.is_short(workload) else (
        cycle.ledger.share_block(workload))
    bound = limit if limit is not None else share
    why: object
    if bound is None:  # whether it fits first, then whether the room lets it start
        counted = cycle.headroom.count_refusal(workload)
        placed = cycle.place(workload) if counted is None or not cycle.fits_idle(
            workload) else None
        if isinstance(placed, PlacementFailure):
            why = placed.reason
        else:
            refused = counted if placed is None else cycle.headroom.refusal(workload, placed)
            if refused is None and placed is not None:
                cycle.admit(workload, placed, "fits")
                return True
            why = Restated(refused or "")
            cycle.room_refused[workload.key] = workload, why
    else:  # only victims under the queue at its bound can lower what it holds
        why = bound
    if bound is None and start_on_held(cycle, workload):
        return True
    blocked = make_room(cycle, workload, bound, search=Search.RANKED,
                        explain=cycle.reasons and not starving)
    if blocked is None:
        return True
    if starving:
        return False
    if blocked.protected and blocked.protected_until is not None:  # proved (`RoomFinder`)
        protected = blocked.protected
        names = ", ".join(w.key for w in protected[:SHOWN_PROTECTED]) + (
            f" and {len(protected) - SHOWN_PROTECTED} more"
            if len(protected) > SHOWN_PROTECTED else "")
        cycle.wait(workload, PendingReason.PROTECTED_VICTIMS,
                   why, "; evicting ", names, " would make room, and their min runtime "
                   "protects them until ", Moment(blocked.protected_until, cycle.now),
                   retry_at=blocked.protected_until,
                   blockers=tuple(w.key for w in protected))
    elif limit is not None:
        cycle.wait(workload, PendingReason.LIMIT_EXCEEDED, limit)
    elif share is not None:
        cycle.wait(workload, PendingReason.QUOTA_EXCEEDED, share,
                   " (non-preemptible work stays within its fair share)")
    else:
        cycle.wait(workload, PendingReason.NO_FIT, why)
    return False


def make_room(cycle: CycleState, workload: Workload, bound: QuotaBlock | None, *,
              search: Search, explain: bool) -> Blocked | None:
    """Requeue running work for `workload` (see `preemption`); `bound` is the queue on its
    path at a bound, under which victims must be. Tried once per queue and workload shape per
    cycle (a queue's debug job searches even while its gang is blocked), for at most
    `PREEMPTION_ATTEMPTS` per cycle, best-ranked first; the rest get their turn next cycle.
    None once admitted; `explain` names the protected candidates."""
    attempt = (workload.queue, workload.shape(), workload.topology.required,
               search is Search.DRAIN)  # a bool: an Enum member hashes in Python
    if attempt in cycle.preemption_tried:
        return NOT_TRIED
    if cycle.finder.simulated >= PREEMPTION_ATTEMPTS:
        if not cycle.capped:
            cycle.capped = True
            cycle.unsettled = True  # the searches left out go first in the next cycle
        return NOT_TRIED
    cycle.preemption_tried.add(attempt)
    room = cycle.finder.find(workload, search, bound, explain=explain)
    if isinstance(room, Blocked):
        return room
    for victim in room.victims:  # evicted on the statement by the search
        cycle.running.pop(victim.workload.key)
        cycle.evictions.append(Eviction(victim.workload.key, victim.workload.queue,
                                        victim.reason, victim.message, workload.key))
    cycle.failures.clear()
    cycle.admit(workload, room.placement,
                f"after evicting {', '.join(v.workload.key for v in room.victims)}")
    return None
