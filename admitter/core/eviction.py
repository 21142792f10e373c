"""Who may be evicted, and for whom: the one rule every step and search that evicts asks.

A running workload is described by its kind (`kind_of`: funded, resumable, short, spread over
several nodes, ever evictable) and the preemptor's claim on it by a standing (`Standing`: how
the victim's allocation ranks against the preemptor's, or that it is of lower priority in the
same queue). `may_evict` decides from those two alone, for a ranked search (preemption and
reclaim) or for a drain (`Search.DRAIN`, on the nodes reserved for a starving gang):
- unfunded work may always be evicted for funded work: it holds only what funded work leaves;
- funded non-preemptible work (priority at least the settings' threshold) never is;
- ranked, in the preemptor's own queue: lower-priority resumable work (priority orders work
  inside a queue only; non-resumable work is not taken, docs/admission-cycle.md: taking it for
  priority multiplied the GPU-hours wasted);
- ranked, of another queue: any work of an allocation ranked worse beyond the non-resumable gap
  (`TimeSlicing`), swappable work (`swappable`) beyond the swap margin; a short preemptor
  (`ShortJobs.is_short`, a debug job) also takes swappable work on one node from any other
  allocation (it gives the GPUs back within minutes; a gang on several nodes it would requeue
  whole for one pod) and never long non-resumable work, whatever the gap (it would run minutes
  for hours lost). Hazard: short jobs are taken only at the larger gap (else a short job and the
  work it displaced could take turns), so one that runs far past its short min runtime keeps its
  GPUs unless its allocation is that far off its budget;
- drained: resumable or short work of lower priority in the gang's queue or of an allocation
  ranked worse by any margin (a drain never takes from a better-ranked allocation or an equal
  priority, so two gangs never drain each other in turn).
No funded workload is evicted inside its protected min runtime (`Workload.protected_until`):
the searches keep those apart (`preemption.RoomFinder`) and the drain waits for them to end.

Two readers ask the rule at different moments, and must: the victim search's candidate lists
(`RoomFinder._eligible`) ask it once per kind and subtree, on the standings of the cycle's
ranking when the list is made; each eviction of a simulated plan (`EvictionRule.victim`) asks it
again on the standing as it is then, with the victims chosen so far given back to their queues.
Both read the same `may_evict`, so a candidate passes one and fails the other only through the
ranking: with use counted as what is held it moves with every victim, and the second reader
also refuses a swap the victim's side would swap back (`Ranking.clearly_worse`); with use over
a window the two agree exactly (tests/core/test_eviction.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from admitter.core.decisions import EvictionReason
from admitter.core.model import GPU, Workload
from admitter.core.policy import ShortJobs, TimeSlicing
from admitter.core.ranking import Ranking, beyond
from admitter.core.room import Search, Victim

# A workload's kind: bits, so a kind is a small int (candidate lists are grouped by it); Final,
# so compiled code reads them as constants.
FUNDED: Final = 1
RESUMABLE: Final = 2
SHORT: Final = 4
SPREAD: Final = 8
"""Held on several nodes: a gang a short job would requeue whole for one pod."""
EVER_EVICTABLE: Final = 16
"""Unfunded, or funded below the non-preemptible priority."""

UNFUNDED_KIND: Final = EVER_EVICTABLE
"""Every unfunded workload: the rule reads nothing else of it."""


class Standing:
    """The preemptor's claim on a victim (ints: compiled code compares them without Python)."""

    NONE: Final = 0
    """The same queue, without a lower priority: no claim at all."""
    OUTRANKED: Final = 1
    """The same queue, of lower priority."""
    OTHER_QUEUE: Final = 2
    """Another allocation, not ranked worse: only a short preemptor's claim."""
    WORSE: Final = 3
    """Another allocation ranked worse by any margin (what a drain needs)."""
    CLEARLY_WORSE: Final = 4
    """Ranked worse beyond the swap margin."""
    FAR_WORSE: Final = 5
    """Ranked worse beyond the non-resumable gap, the preemptor's protected run charged."""


def kind_of(workload: Workload, short_jobs: ShortJobs,
            non_preemptible_priority: int | None) -> int:
    """What the rule reads of `workload` itself."""
    if not workload.funded:
        return UNFUNDED_KIND
    kind = FUNDED
    if workload.resumable:
        kind |= RESUMABLE
    if short_jobs.is_short(workload):
        kind |= SHORT
    if len(workload.placement) > 1:
        kind |= SPREAD
    if workload.preemptible(non_preemptible_priority):
        kind |= EVER_EVICTABLE
    return kind


def swappable(kind: int) -> bool:
    """Funded resumable work that is not short: what the swap margin may take (short work loses
    at most minutes, but is taken only at the larger gap, or a short job and the work it
    displaced could take turns)."""
    return kind & (FUNDED | RESUMABLE | SHORT) == FUNDED | RESUMABLE


def may_evict(kind: int, standing: int, short_preemptor: bool, search: Search) -> bool:
    """Whether a workload of `kind` may be evicted (once past its min runtime) for a preemptor
    with `standing` on it, short or not, in a `search` (the module docstring's rule)."""
    if not kind & FUNDED:
        return True
    if not kind & EVER_EVICTABLE or standing == Standing.NONE:
        return False
    if search is Search.DRAIN:
        return standing != Standing.OTHER_QUEUE and bool(kind & (RESUMABLE | SHORT))
    if standing == Standing.OUTRANKED:
        return bool(kind & RESUMABLE) and not (short_preemptor and kind & SPREAD)
    if standing == Standing.FAR_WORSE:
        return not (short_preemptor and kind & (RESUMABLE | SHORT) == 0)
    if standing == Standing.CLEARLY_WORSE and swappable(kind):
        return True
    return short_preemptor and swappable(kind) and not kind & SPREAD


def ranked_standing(worse: float, better: float, charged: float,
                    time_slicing: TimeSlicing) -> int:
    """The standing of an allocation whose ratio is `worse` against the preemptor's (`better`;
    `charged` with the preemptor's protected run counted, `Ranking.after_run`)."""
    if beyond(worse, charged, time_slicing.non_resumable_gap):
        return Standing.FAR_WORSE
    if beyond(worse, better, time_slicing.swap_margin):
        return Standing.CLEARLY_WORSE
    return Standing.OTHER_QUEUE


class EvictionRule:
    """`may_evict` for one cycle: the kinds of running work (kept, they do not change within
    a cycle) and the standings, read from the cycle's ranking as it is when asked."""

    def __init__(self, ranking: Ranking, short_jobs: ShortJobs,
                 non_preemptible_priority: int | None, time_slicing: TimeSlicing) -> None:
        self.ranking = ranking
        self.short_jobs = short_jobs
        self.time_slicing = time_slicing
        self.non_preemptible_priority = non_preemptible_priority
        self._kinds: dict[str, int] = {}

    def kind(self, workload: Workload) -> int:
        """`kind_of` `workload`, kept by key for the cycle but for `SPREAD`. Hazard: the one key
        names a pending workload and, once admitted in the cycle, its running copy; only where
        it runs differs between them, so that bit is read afresh."""
        known = self._kinds.get(workload.key)
        if known is None:
            known = self._kinds[workload.key] = kind_of(
                workload, self.short_jobs, self.non_preemptible_priority) & ~SPREAD
        return known | SPREAD if len(workload.placement) > 1 and known & FUNDED else known

    def drain_may_take(self, workload: Workload) -> bool:
        """Whether a drain could take `workload` once past its min runtime, for some gang (one
        of a higher priority in its queue): preemptible, and resumable or short."""
        return may_evict(self.kind(workload), Standing.OUTRANKED, False, Search.DRAIN)

    def drain_takes(self, gang: Workload) -> Callable[[Workload], bool]:
        """Whom a drain for `gang` may take once past its min runtime (`may_evict` for
        `Search.DRAIN`). The domain is chosen by what this takes (`reservation.choose`): a
        domain full of better-ranked work would only empty as that work finishes. Reads of a
        workload only what `reservation.drain_alike` keys."""
        ranking = self.ranking
        gpus = gang.requests().get(GPU, 0)

        def takes(workload: Workload) -> bool:
            kind = self.kind(workload)
            if not may_evict(kind, Standing.OUTRANKED, False, Search.DRAIN):
                return False  # no standing would do: the ranking need not be asked
            if workload.queue == gang.queue:
                standing = (Standing.OUTRANKED if workload.priority < gang.priority
                            else Standing.NONE)
            else:
                standing = (Standing.WORSE if ranking.clearly_worse(
                    workload.queue, gang.queue, 0.0, gpus, workload.requests().get(GPU, 0))
                    else Standing.OTHER_QUEUE)
            return may_evict(kind, standing, False, Search.DRAIN)

        return takes

    def drain_waits_for(self, gang: Workload) -> Callable[[Workload], bool]:
        """Whose work a drain for `gang` may wait for, besides what it takes once past its min
        runtime (`drain_takes`): short work, whoever's (it ends within minutes: a debug job
        landing on a drained node must not turn the drain away); and preemptible resumable
        work of an allocation not ranked better than the gang's (its own queue's included),
        which leaves as it ends or is requeued while nothing long lands on the drained nodes.
        Better-ranked allocations' long work is not waited for: a domain it fills would stand
        held for as long as that work runs (counting it cost seeds of the family up to 5 points
        of occupancy), and neither is long non-resumable work. Asked of funded work only;
        reads of a workload only what `reservation.drain_alike` keys."""
        ranking = self.ranking

        def waits_for(workload: Workload) -> bool:
            kind = self.kind(workload)
            if kind & SHORT:
                return True
            return (kind & (RESUMABLE | EVER_EVICTABLE) == RESUMABLE | EVER_EVICTABLE
                    and not ranking.clearly_worse(gang.queue, workload.queue, 0.0))

        return waits_for

    def victim(self, preemptor: Workload, victim: Workload, search: Search,
               drained: bool) -> Victim | None:
        """The eviction of `victim` for `preemptor`, if the rule allows it now (with use counted
        as what is held, the ranking already reflects the victims chosen so far); `drained`: it
        runs on nodes reserved for the drain that `search` makes room for."""
        if search is Search.DRAIN and victim.funded and drained and self.drain_takes(
                preemptor)(victim):
            return Victim(victim, EvictionReason.RECLAIMED,
                          f"requeued past its min runtime for {preemptor.key}: its nodes are "
                          "being drained for that starving gang")
        if not victim.funded:
            same = victim.queue == preemptor.queue
            return Victim(victim, EvictionReason.PREEMPTED if same else EvictionReason.RECLAIMED,
                          f"unfunded workload evicted for funded {preemptor.key}")
        kind = self.kind(victim)
        short = self.short_jobs.is_short(preemptor)
        if victim.queue == preemptor.queue:
            outranked = victim.priority < preemptor.priority
            if not may_evict(kind, Standing.OUTRANKED if outranked else Standing.NONE, short,
                             Search.RANKED):
                return None
            return Victim(victim, EvictionReason.PREEMPTED,
                          f"preempted by {preemptor.key} (priority {preemptor.priority} > "
                          f"{victim.priority}) in queue {victim.queue}")
        standing = self._standing_now(preemptor, victim)
        if not may_evict(kind, standing, short, Search.RANKED):
            return None
        why = ("a short job may requeue resumable work past its min runtime"
               if standing == Standing.OTHER_QUEUE else
               f"queue {victim.queue}'s allocation has used more of its GPU budget than "
               f"{preemptor.queue}'s")
        return Victim(victim, EvictionReason.RECLAIMED,
                      f"requeued past its min runtime for {preemptor.key}: {why}")

    def _standing_now(self, preemptor: Workload, victim: Workload) -> int:
        """A victim of another queue: its allocation against the preemptor's as the ranking
        stands now (`Ranking.clearly_worse`: with use held, the preemptor's side holding the
        GPUs it asks for, and no swap back may follow)."""
        ranking, slicing = self.ranking, self.time_slicing
        gained, lost = preemptor.requests().get(GPU, 0), victim.requests().get(GPU, 0)
        if ranking.clearly_worse(victim.queue, preemptor.queue, slicing.non_resumable_gap,
                                 gained, lost, preemptor.min_runtime):
            return Standing.FAR_WORSE
        if ranking.clearly_worse(victim.queue, preemptor.queue, slicing.swap_margin, gained,
                                 lost):
            return Standing.CLEARLY_WORSE
        return Standing.OTHER_QUEUE
