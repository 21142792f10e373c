"""Making room for a pending workload by evicting others, proved by simulation first.

Three kinds of victim, never mixed up:
- unfunded workloads (min runtime 0) anywhere: any funded workload may take their place;
- preempt: lower-priority workloads of the same leaf queue, past their min runtime;
- reclaim: workloads of other queues past their min runtime, while the victim's queue (and its
  ancestor where the two paths diverge) is above its fair share. The preemptor must itself stay
  within its fair share (the caller's share check runs on every level of its path).
Non-preemptible workloads (funded, priority at least the settings' threshold) are never
victims.

Victims are ranked (unfunded, lowest priority, most over-served queue, most recently started,
most recently submitted) and planned per topology domain, then released one by one on the
`ClusterState` and the quota ledger until the preemptor fits; every victim whose return still
leaves room is then given back (minimal set). Anything not proved is rolled back (KAI's
Statement: checkpoint, evict, place, commit or roll back).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from operator import itemgetter

from admitter.core.decisions import EvictionReason
from admitter.core.model import GPU, Workload
from admitter.core.nodes import ClusterState, held_per_node, recorded_placements
from admitter.core.placement import Placement, place
from admitter.core.quota import QuotaLedger, accumulate
from admitter.core.topology import HOSTNAME, Domain

MAX_VICTIMS = 64
"""Give up on a preemptor that would need more evictions than this (bounds cycle time)."""

DOMAINS_TRIED = 3
"""Candidate domains simulated per preemptor, best plan first."""


@dataclass(slots=True)  # not frozen: see docs/admission-cycle.md, Speed
class Victim:
    workload: Workload
    reason: EvictionReason
    message: str


@dataclass(slots=True)  # not frozen: see docs/admission-cycle.md, Speed
class Room:
    """Proved: evicting `victims` lets the preemptor be placed at `placement`."""

    placement: Placement
    victims: tuple[Victim, ...]


@dataclass(slots=True)  # not frozen: see docs/admission-cycle.md, Speed
class Blocked:
    """No room could be proved. `protected_until` is when protected candidates free up;
    `protected` names them when asked to explain."""

    protected: tuple[Workload, ...]
    protected_until: float | None


NOT_TRIED = Blocked((), None)
"""Blocked without a search (one instance: most preemptors of a busy cycle get it)."""


class RoomFinder:
    """Finds victims for preemptors within one cycle; `running` is kept current by the cycle.

    Candidates are ranked once per cycle. For each preemptor, victims are grouped by the domain
    of its required topology level (the whole cluster without one; the node for a single
    pod); the domains whose free
    capacity plus their victims' would hold the gang are planned, fewest and cheapest
    victims first, and only those plans are simulated.
    """

    def __init__(self, state: ClusterState, ledger: QuotaLedger, running: dict[str, Workload],
                 now: float, non_preemptible_priority: int | None) -> None:
        self._state = state
        self._non_preemptible_priority = non_preemptible_priority
        self._ledger = ledger
        self._running = running
        self._now = now
        self._ranked = False
        self._evictable: dict[str, _Group] = {}
        self._protected: dict[str, _Group] = {}
        self._domain_of: dict[str | None, dict[str, Domain]] = {}
        self._held: dict[tuple[str, str, str | None], list[tuple[Domain, int]]] = {}
        self._under: dict[tuple[bool, str | None], list[tuple[str, _Group]]] = {}
        """Per ranking (protected or not) and `within` queue, the groups of queues under it."""
        self._diverging: dict[tuple[str, str], str] = {}
        """Per (reclaimer, victim) leaf, the victim's ancestor where their paths diverge."""
        self._kept_off: set[str] = set()
        """Workloads on nodes reserved for a starving workload: no one else's victims."""
        self.next_change = math.inf
        """The first moment a protection ending could turn a failed search of this cycle."""
        self._protected_order: list[tuple[float, Workload]] = []
        """Protected candidates with the end of their protection, soonest first."""
        self._evictable_funded: dict[str, dict[str, int]] = {}
        """Per queue, what its subtree's evictable funded workloads hold, as ranked: no set of
        victims can give back more."""

    def keep_off(self, nodes: Iterable[str]) -> None:
        """From now on this cycle, take no victim running on `nodes` (a reservation)."""
        reserved = set(nodes)
        self._kept_off = {key for key, workload in self._running.items()
                          if any(node in reserved for node in workload.placement)}

    def find(self, preemptor: Workload, deserved_only: bool | None,
             within: str | None = None, *, explain: bool = True) -> Room | Blocked:
        """Evict (virtually) until `preemptor` is admissible on quota and fits; keep a minimal
        set. On success the state and ledger hold the victims' release but not the preemptor.
        Admissible: within every limit and, unless `deserved_only` is None, within the fair
        share (or deserved quota) of every queue on its path. `within` names the queue on the
        preemptor's path that is at its share: only victims under it can lower that queue's
        holding. `deserved_only` None is for a funded borrower: only unfunded work may yield
        (it holds only what funded demand does not claim), and its share is not asked.
        Without `explain`, a `Blocked` names no protected candidates."""
        self._rank()
        unfunded_only = deserved_only is None
        reachable = deserved_only is None or self._might_reach_share(preemptor, deserved_only,
                                                                     within)
        chosen = self._eligible(self._evictable, preemptor, within, unfunded_only,
                                reclaim_checked=True) if reachable else []
        if chosen and (deserved_only is None or self._ledger.share_reachable(
                preemptor, deserved_only=deserved_only, released=(w for _, w in chosen))):
            chosen.sort(key=itemgetter(0))
            for plan in self._plans(preemptor, [w for _, w in chosen])[:DOMAINS_TRIED]:
                room = self._simulate(preemptor, plan, deserved_only)
                if room is not None:
                    return room
        if deserved_only is None:  # unfunded work is never protected: time changes nothing
            return Blocked((), None)
        if not reachable and not explain:
            self._note(self._share_reachable_at(preemptor, deserved_only, within))
            return Blocked((), None)
        eligible = self._eligible(self._protected, preemptor, within, False,
                                  reclaim_checked=False)
        until = min((w.protected_until() or self._now for _, w in eligible), default=None)
        self._note(until)
        if not explain:
            return Blocked((), until)
        return Blocked(tuple(w for _, w in sorted(eligible, key=itemgetter(0))), until)

    def _note(self, moment: float | None) -> None:
        if moment is not None and moment < self.next_change:
            self.next_change = moment

    def _might_reach_share(self, preemptor: Workload, deserved_only: bool,
                           within: str | None) -> bool:
        """Whether evicting every evictable funded workload that could be a victim would bring
        the preemptor within its share: when not, no victim list needs to be built (on a busy
        cluster most preemptors over their share end here)."""
        return self._ledger.share_reachable_freeing(
            preemptor, deserved_only=deserved_only, freed=self._evictable_freed(preemptor, within))

    def _share_reachable_at(self, preemptor: Workload, deserved_only: bool,
                            within: str | None) -> float | None:
        """For a preemptor `_might_reach_share` turned away: the first protection end after
        which it would not (protections under `within` ending in order), or None if none
        before `next_change`, which another search already named."""
        path = self._ledger.path(preemptor.queue)
        freed = {name: dict(amounts)
                 for name, amounts in self._evictable_freed(preemptor, within).items()}
        for end, workload in self._protected_order:
            if end >= self.next_change:
                return None
            theirs = self._ledger.path(workload.queue)
            if within is not None and within not in theirs:
                continue
            for name in path:
                if name in theirs:
                    accumulate(freed.setdefault(name, {}), workload.requests(), 1)
            if self._ledger.share_reachable_freeing(preemptor, deserved_only=deserved_only,
                                                    freed=freed):
                return end
        return None

    def _evictable_freed(self, preemptor: Workload,
                         within: str | None) -> dict[str, dict[str, int]]:
        """Per queue on the preemptor's path, what the evictable funded workloads that could be
        its victims hold (those under `within` only, when given)."""
        freed: dict[str, dict[str, int]] = {}
        scope = within
        for name in self._ledger.path(preemptor.queue):
            released = self._evictable_funded.get(name if scope is None else scope)
            if released is not None:
                freed[name] = released
            if name == scope:
                scope = None
        return freed

    def _simulate(self, preemptor: Workload, plan: list[Workload],
                  deserved_only: bool | None) -> Room | None:
        """Evict the whole plan, try once; if the preemptor fits, give back every victim it can
        do without, newest decision first (one placement per victim, none on failure). The
        quota ledger alone decides whether victims are justified and the preemptor admissible,
        so the node model is only touched once the ledger says yes."""
        chosen: list[Victim] = []
        for candidate in plan:
            victim = self._victim(preemptor, candidate)
            if victim is not None:
                self._ledger.remove(victim.workload)
                chosen.append(victim)
        placement = None
        checkpoint = self._state.checkpoint()
        if chosen and self._admissible(preemptor, deserved_only):
            for victim in chosen:
                self._state.release(victim.workload.key)
            placement = self._place(preemptor)
        if placement is None:
            for victim in chosen:
                self._ledger.add(victim.workload)
            self._state.rollback(checkpoint)
            return None
        for victim in reversed(chosen):
            self._return(victim.workload)
            kept = self._place(preemptor) if self._admissible(preemptor, deserved_only) else None
            if kept is None:
                self._evict(victim.workload)
            else:
                chosen.remove(victim)
                placement = kept
        return Room(placement, tuple(chosen))

    def _admissible(self, preemptor: Workload, deserved_only: bool | None) -> bool:
        return self._ledger.limit_block(preemptor) is None and (deserved_only is None or (
            self._ledger.share_block(preemptor, deserved_only=deserved_only) is None))

    def _place(self, preemptor: Workload) -> Placement | None:
        result = place(self._state, preemptor)
        return result if isinstance(result, Placement) else None

    def _evict(self, workload: Workload) -> None:
        self._state.release(workload.key)
        self._ledger.remove(workload)

    def _return(self, workload: Workload) -> None:
        self._state.assume(workload.key, workload.pod_sets, recorded_placements(workload))
        self._ledger.add(workload)

    def _rank(self) -> None:
        """Once per cycle: running workloads that may be evicted now, in eviction order
        (unfunded, lowest priority, most over-served queue, most recently started, most
        recently submitted), and those protected by their min runtime (soonest free first),
        both grouped by queue so each preemptor looks at queues rather than at every run."""
        if self._ranked:
            return
        ranked: list[tuple[tuple[bool, int, float, float, float, str], Workload]] = []
        protected: list[tuple[float, str, Workload]] = []
        over: dict[str, float] = {}
        per_leaf: dict[str, dict[str, int]] = {}
        now = self._now
        for workload in self._running.values():
            funded = workload.min_runtime > 0  # `funded` and `protected_until`, inlined
            if funded and not workload.preemptible(self._non_preemptible_priority):
                continue
            started = workload.admitted_at
            if funded and started is not None and started + workload.min_runtime > now:
                protected.append((started + workload.min_runtime, workload.key, workload))
                continue
            ratio = over.get(workload.queue)
            if ratio is None:
                ratio = over[workload.queue] = self._ledger.over_share_ratio(workload.queue)
            order = (funded, workload.priority, -ratio, -(started or 0.0),
                     -workload.submitted_at, workload.key)
            ranked.append((order, workload))
            if funded:  # summed per leaf here, along each path below
                sums = per_leaf.get(workload.queue)
                if sums is None:
                    sums = per_leaf[workload.queue] = {}
                accumulate(sums, workload.requests(), 1)
        ranked.sort(key=itemgetter(0))
        protected.sort(key=itemgetter(0, 1))
        self._ranked = True
        self._protected_order = [(end, w) for end, _, w in protected]
        for leaf, sums in per_leaf.items():
            for name in self._ledger.path(leaf):
                accumulate(self._evictable_funded.setdefault(name, {}), sums, 1)
        self._evictable = _by_queue([w for _, w in ranked])
        self._protected = _by_queue([w for _, _, w in protected])

    def _eligible(self, groups: dict[str, _Group], preemptor: Workload, within: str | None,
                  unfunded_only: bool, *, reclaim_checked: bool) -> list[tuple[int, Workload]]:
        """Still-running workloads of `groups` the preemptor may take, with their position in
        the ranking (unsorted: most callers only need their sum).

        Unfunded work anywhere; funded work of its own queue at lower priority; funded work
        of another queue (unless `unfunded_only`) — with `reclaim_checked`, only while that
        queue is above its fair share, which evicting others never raises. `within` keeps
        only queues under it."""
        under = self._under.get((groups is self._protected, within))
        if under is None:
            under = self._under[groups is self._protected, within] = [
                (queue, group) for queue, group in groups.items()
                if within is None or within in self._ledger.path(queue)]
        chosen: list[tuple[int, Workload]] = []
        for queue, group in under:
            chosen.extend(group.unfunded)
            if unfunded_only:
                continue
            if queue == preemptor.queue:
                chosen.extend(item for item in group.funded
                              if item[1].priority < preemptor.priority)
            elif not reclaim_checked or self._over_queue(preemptor.queue, queue) is not None:
                chosen.extend(group.funded)
        running, kept_off = self._running, self._kept_off
        return [item for item in chosen if item[1].key in running and item[1].key not in kept_off]

    def _plans(self, preemptor: Workload, candidates: list[Workload]) -> list[list[Workload]]:
        """Per domain of the required level (per node for a single pod): the first candidates
        (in eviction order) whose release would bring the domain's free amount of the key
        resource to the gang's need. Fewest victims first, then the plan whose worst victim
        ranks earliest."""
        requests = preemptor.requests()
        resource = GPU if requests.get(GPU, 0) > 0 else min(requests, default=GPU)
        index = self._state.resource_index(resource)
        need = requests.get(resource, 0)
        required = preemptor.topology.required
        # One pod lands on one node: planning per node is exact where a wider domain's sum
        # can hide that no single node would hold the pod.
        level = HOSTNAME if sum(p.count for p in preemptor.pod_sets) == 1 else required
        per_domain: dict[int, tuple[Domain, list[Workload], int]] = {}
        for workload in candidates:
            for domain, gained in self._gains(workload, resource, level):
                if required is not None and required not in domain.affinity:
                    continue  # a node outside every domain of the required level
                entry = per_domain.get(id(domain))
                if entry is None:
                    free = 0 if index is None else sum(row[index] for row in domain.free)
                    entry = per_domain[id(domain)] = (domain, [], free)
                _, plan, free = entry
                if (free >= need and plan) or len(plan) >= MAX_VICTIMS:
                    continue
                plan.append(workload)
                per_domain[id(domain)] = (domain, plan, free + gained)
            if level is None and per_domain and all(
                    (free >= need and plan) or len(plan) >= MAX_VICTIMS
                    for _, plan, free in per_domain.values()):
                break  # the one cluster-wide plan is complete
        rank = {w.key: i for i, w in enumerate(candidates)}
        viable = [((len(plan), max(rank[w.key] for w in plan), domain.order), plan)
                  for domain, plan, free in per_domain.values() if free >= need and plan]
        return [plan for _, plan in sorted(viable, key=lambda v: v[0])]

    def _gains(self, workload: Workload, resource: str,
               level: str | None) -> list[tuple[Domain, int]]:
        """What evicting `workload` frees of `resource` in each domain at `level` (cached)."""
        key = (workload.key, resource, level)
        gains = self._held.get(key)
        if gains is None:
            domain_of = self._domains(level)
            per_domain: dict[int, tuple[Domain, int]] = {}
            for node, amount in held_per_node(workload, resource).items():
                domain = domain_of.get(node)
                if domain is not None:
                    known = per_domain.get(id(domain), (domain, 0))[1]
                    per_domain[id(domain)] = (domain, known + amount)
            gains = self._held[key] = list(per_domain.values())
        return gains

    def _domains(self, level: str | None) -> dict[str, Domain]:
        """Node name → its domain at `level` (the root for None)."""
        mapping = self._domain_of.get(level)
        if mapping is None:
            tree = self._state.tree
            domains = tree.domains(level) if level is not None else [tree.root]
            mapping = {node: d for d in domains for node in d.nodes}
            self._domain_of[level] = mapping
        return mapping

    def _victim(self, preemptor: Workload, victim: Workload) -> Victim | None:
        """The eviction, if still justified given the victims chosen so far (the ledger
        already reflects them, so a victim queue stops giving once back at its fair share)."""
        if not victim.funded:
            same = victim.queue == preemptor.queue
            return Victim(
                victim,
                EvictionReason.PREEMPTED if same else EvictionReason.RECLAIMED,
                f"unfunded workload evicted for funded {preemptor.key}",
            )
        if victim.queue == preemptor.queue:
            return Victim(
                victim,
                EvictionReason.PREEMPTED,
                f"preempted by {preemptor.key} (priority {preemptor.priority} > "
                f"{victim.priority}) in queue {victim.queue}",
            )
        over = self._over_queue(preemptor.queue, victim.queue)
        if over is None:
            return None
        return Victim(
            victim,
            EvictionReason.RECLAIMED,
            f"reclaimed by queue {preemptor.queue} for {preemptor.key}: queue {over} is "
            "above its fair share",
        )

    def _over_queue(self, reclaimer: str, victim: str) -> str | None:
        """The victim-side queue that shows reclaim is fair, or None: both the victim's leaf and
        its ancestor where the paths diverge must be above their fair share right now."""
        if not self._ledger.above_fair_share(victim):
            return None
        diverging = self._diverging.get((reclaimer, victim))
        if diverging is None:
            mine = self._ledger.path(reclaimer)
            theirs = self._ledger.path(victim)
            common = 0
            while common < min(len(mine), len(theirs)) and mine[common] == theirs[common]:
                common += 1
            diverging = self._diverging[reclaimer, victim] = theirs[common]
        if diverging == victim or self._ledger.above_fair_share(diverging):
            return diverging
        return None


class _Group:
    """One queue's workloads as (position in the ranking, workload), unfunded and funded."""

    __slots__ = ("funded", "unfunded")

    def __init__(self) -> None:
        self.unfunded: list[tuple[int, Workload]] = []
        self.funded: list[tuple[int, Workload]] = []


def _by_queue(ordered: list[Workload]) -> dict[str, _Group]:
    groups: dict[str, _Group] = {}
    for position, workload in enumerate(ordered):
        group = groups.get(workload.queue)
        if group is None:
            group = groups[workload.queue] = _Group()
        funded = workload.min_runtime > 0  # `funded`, inlined: runs for every running workload
        (group.funded if funded else group.unfunded).append((position, workload))
    return groups
