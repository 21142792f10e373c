"""Step 3: a funded workload past the starvation bound, of an allocation that is not
over-served, that neither fits nor finds ranked victims, gets nodes reserved
(`reservation.choose`: the domain cheapest to empty) and takes resumable work past its min
runtime there, whatever its rank (`eviction`: a drain's victims); what it cannot take yet leaves
as its protection ends. After the short jobs (step 2), before the long work (step 4): the held
capacity turns every later long funded admission away but for what cannot delay the gang.

They are held only while the short jobs' room would let it start on them
(`Headroom.refuses_on`): held for a gang the room keeps off them, they would stand idle for
nothing. One drain at a time bounds what stands idle. It goes to the team that has used the
smallest part of its budget (leaf ratio), the longest-waiting workload first within a team: the
drain is how a domain-wide gang starts on a full cluster, and waiting time alone would hand it to
whoever submitted first, however much their team had used. Use moves only with time, so the
target stays until it starts unless another starving team falls below its team's use; its nodes
only gain free capacity meanwhile.
"""

from __future__ import annotations

from admitter.core.backfill import Backfill, start_time
from admitter.core.cycle_state import CycleState
from admitter.core.decisions import PendingReason
from admitter.core.model import Workload
from admitter.core.moments import Waited, span
from admitter.core.reservation import (
    choose,
    describe,
    drain_alike,
    drainable_gpus,
    hold,
    unfunded_gpus,
)
from admitter.core.room import Search
from admitter.core.steps.funded import make_room, try_funded


def drain_for_starving(cycle: CycleState) -> None:
    bound = cycle.snapshot.settings.starvation_bound
    starving = _starving(cycle, bound)
    maps: dict[tuple[str, int], tuple[dict[str, int], dict[str, int]]] = {}
    changed, unfunded = -1, {}
    ratio = cycle.ranking.ratio
    for workload in sorted(starving, key=lambda w: (ratio(w.queue), w.submitted_at, w.key)):
        if cycle.ledger.limit_block(workload) is not None:
            continue
        if try_funded(cycle, workload, starving=True):
            continue
        if changed != len(cycle.admissions) + len(cycle.evictions):  # what runs moved
            changed = len(cycle.admissions) + len(cycle.evictions)
            maps.clear()
            if cycle.unfunded_held is None:
                cycle.unfunded_held = unfunded_gpus(cycle.running.values())
            unfunded = cycle.unfunded_held
            # A protection ending can move the choice: the drain may take that work then
            # (short work too: a debug-sized job past its min runtime is the drain's).
            for other in cycle.running.values():
                until = other.protected_until()
                if until is not None and cycle.eviction.drain_may_take(other):
                    cycle.until(until)
        # What a drain may take depends on the gang's queue and priority (its rank).
        takes = cycle.eviction.drain_takes(workload)
        waits_for = cycle.eviction.drain_waits_for(workload)
        taken = maps.get((workload.queue, workload.priority))
        if taken is None:
            taken = maps[workload.queue, workload.priority] = drainable_gpus(
                cycle.running.values(), unfunded, cycle.now, takes, waits_for,
                drain_alike(cycle.eviction, workload))
        chosen = choose(cycle.state, cycle.nodes, workload, taken[0], taken[1])
        if not chosen:
            continue
        # The drain's target: not held to the short jobs' pool count (`headroom`), or a
        # domain emptied for it would still have to free the pool that the rest of the
        # cluster lacks. The same placement as above, without that bound.
        cycle.headroom.exempt = workload.key
        if try_funded(cycle, workload, starving=True):
            return
        if cycle.headroom.refuses_on(workload, chosen):
            cycle.headroom.exempt = None  # held, the nodes would stand idle for nothing
            continue
        cycle.finder.keep_off(chosen)
        blocked = make_room(cycle, workload, None, search=Search.DRAIN, explain=False)
        if blocked is None:
            return
        cycle.backfill = Backfill(workload, chosen, start_time(
            cycle.state, chosen, workload, cycle.running.values(), takes, cycle.now),
            takes, waits_for, cycle.eviction.kind)
        hold(cycle.statement, chosen)
        cycle.reserved_for = workload
        # Held capacity turns away what comes after; a re-run could admit differently only
        # if something was admitted before the hold.
        cycle.unsettled = cycle.unsettled or bool(cycle.admissions)
        cycle.failures.clear()
        cycle.wait(workload, PendingReason.RESERVED, "waited ",
                   Waited(workload.submitted_at, cycle.now), ", past the starvation bound of ",
                   span(bound), "; ", describe(workload, chosen),
                   retry_at=blocked.protected_until,
                   blockers=tuple(w.key for w in blocked.protected))
        return


def _starving(cycle: CycleState, bound: float) -> list[Workload]:
    """Long funded work past its backoff and past the starvation bound, of an allocation that
    is not over-served (`Ranking.over_served`, against the siblings with long work waiting):
    the drain's possible targets. Each not starving yet names the moment it will be."""
    starving: list[Workload] = []
    wanting: set[str] = set()  # queues with long funded work waiting, ancestors included
    for leaf, waiting in cycle.waiting_funded.items():
        if not all(cycle.short_jobs.is_short(w) for w in waiting):
            wanting.update(cycle.tree.path(leaf))
    over_served = cycle.ranking.over_served(
        wanting, cycle.snapshot.settings.time_slicing.swap_margin)
    for leaf, waiting in cycle.waiting_funded.items():
        well_ranked: bool | None = None
        for workload in waiting:
            if cycle.short_jobs.is_short(workload) or not cycle.past_backoff(workload,
                                                                             quiet=True):
                continue  # a short job finds the headroom, not a drain
            starves_at = workload.starves_at(bound)
            if starves_at > cycle.now:
                cycle.until(starves_at)
                continue
            if well_ranked is None:
                well_ranked = not over_served(leaf)
            if well_ranked:
                starving.append(workload)
    return starving
