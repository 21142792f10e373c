"""Making room for a pending workload by requeueing running ones, proved by simulation first.

Who may be a victim is the eviction rule's to say (`eviction.may_evict`), asked once per kind
and subtree when a preemptor's candidate lists are made (`_eligible`) and again for each victim
of a simulated plan (`eviction.EvictionRule.victim`). Here: which running work is a candidate
at all (past its min runtime now, or protected until later, for the explanation), the plans,
and their proof. Work on nodes reserved for a starving gang is no one's victim but the drain's
(`keep_off`). A long preemptor leaves the short jobs' headroom.

Victims are ranked cheapest first (unfunded; resumable before non-resumable; least progress
lost; fewest GPUs; lowest priority; worst-ranked allocation; most recently started) and planned
per topology domain, then evicted on the cycle's `Statement` until the preemptor fits; every
victim whose return still leaves room is given back (minimal set). Anything not proved is rolled
back to the search's checkpoint (KAI's Statement: checkpoint, evict, place, keep or roll back).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from operator import itemgetter

from admitter.core.candidates import Candidate, CandidateGroups
from admitter.core.eviction import (
    EVER_EVICTABLE,
    FUNDED,
    EvictionRule,
    Standing,
    may_evict,
    ranked_standing,
)
from admitter.core.headroom import Headroom
from admitter.core.model import GPU, Workload, held_per_node, recorded_placements
from admitter.core.placement import Placement, place
from admitter.core.quota import QuotaBlock, QuotaLedger
from admitter.core.room import Blocked, Room, Search, Victim
from admitter.core.statement import Statement
from admitter.core.topology import HOSTNAME, Domain

MAX_VICTIMS = 64
"""Give up on a preemptor that would need more evictions than this (bounds cycle time)."""

DOMAINS_TRIED = 3
"""Candidate domains simulated per preemptor, best plan first."""


class RoomFinder:
    """Finds victims for preemptors within one cycle; `running` is kept current by the cycle.

    Candidates are ranked once per cycle and grouped by queue, so that each preemptor decides
    per queue which of them it may take. For each preemptor, victims are grouped by the domain
    of its required topology level (the whole cluster without one; the node for a single pod);
    the domains whose free capacity plus their victims' would hold the gang are planned, fewest
    and cheapest victims first, and only those plans are simulated.
    """

    def __init__(self, statement: Statement, ledger: QuotaLedger, running: dict[str, Workload],
                 now: float, rule: EvictionRule, headroom: Headroom) -> None:
        self._statement = statement
        self._state = statement.nodes
        self._ledger = ledger
        self._running = running
        self._now = now
        self._rule = rule
        self._ranking = rule.ranking
        self._headroom = headroom
        self._short = rule.short_jobs
        self._ranked = False
        self._evictable = CandidateGroups((), ledger.path, rule.kind)
        self._protected = CandidateGroups((), ledger.path, rule.kind)
        self._domain_of: dict[str | None, dict[str, Domain]] = {}
        self._held: dict[tuple[str, str, str | None], list[tuple[Domain, int]]] = {}
        self._kept_off: set[str] = set()
        """Workloads on nodes reserved for a starving workload: no one else's victims."""
        self._drained: set[str] = set()
        """Those same workloads: the drain's own candidates."""
        self.next_change = math.inf
        """The first moment a protection ending could turn a failed search of this cycle."""
        self.simulated = 0
        """Searches that had victims to simulate: the expensive ones, which a cycle bounds."""
        self._candidates: dict[tuple[bool, str, int, bool, bool, str | None,
                                     tuple[int, int]], list[Candidate]] = {}
        """`_eligible`'s lists before dropping who left, per what decides them."""

    def keep_off(self, nodes: Iterable[str]) -> None:
        """From now on this cycle, take no victim running on `nodes` (a reservation) except
        for the drain itself."""
        reserved = set(nodes)
        self._kept_off = {key for key, workload in self._running.items()
                          if any(node in reserved for node in workload.placement)}
        self._drained = set(self._kept_off)
        self._candidates.clear()  # a drain's candidates depend on the drained nodes

    def find(self, preemptor: Workload, search: Search, bound: QuotaBlock | None = None, *,
             explain: bool = True) -> Room | Blocked:
        """Evict (virtually) until `preemptor` is within every limit and fits; keep a minimal
        set. On success the statement holds the victims' evictions but not the preemptor; on
        failure it is as it was.
        `bound` is a queue on the preemptor's path at its limit: only victims under it can
        lower what it holds, and together they must free what the preemptor would exceed by.
        A non-preemptible preemptor must also end within its fair share.
        With `explain`, a failed search is searched again as if every protection had ended:
        the `Blocked` names the protected workloads of the room that search proves, and when
        the last of them may leave; none if even that search finds no room (`_waited_for`).
        Without it, a `Blocked` names no one and gives the first moment a protection ends."""
        self._rank()
        within = None if bound is None else bound.queue
        chosen = self._eligible(self._evictable, preemptor, within, search)
        candidates = [w for _, w in sorted(chosen, key=itemgetter(0))]
        if candidates:
            self.simulated += 1
            room = self._search(preemptor, candidates, search, bound)
            if room is not None:
                return room
        eligible = self._eligible(self._protected, preemptor, within, search)
        until = min((w.protected_until() or self._now for _, w in eligible), default=None)
        if until is not None and until < self.next_change:
            self.next_change = until
        if not explain:
            return Blocked((), until)
        if not eligible:
            return Blocked((), None)
        # The order the search will take them in once every protection has ended.
        free_at = max(w.protected_until() or self._now for _, w in eligible)
        ordered = sorted([*candidates, *(w for _, w in eligible)], key=lambda w: _cost(
            w, free_at, self._ranking.ratio(w.queue)))
        return self._waited_for(preemptor, ordered, {w.key for _, w in eligible}, search, bound)

    def _search(self, preemptor: Workload, candidates: list[Workload], search: Search,
                bound: QuotaBlock | None, among: set[str] | None = None) -> Room | None:
        """The first plan of `candidates` (eviction order) proved to make room, or None; with
        `among`, only plans that take one of those keys are tried."""
        # Plans that also leave the short jobs' headroom first; then, where it holds the
        # preemptor back, swaps that take only what their victims free (`_place`).
        for swap in (False, True) if self._headroom.applies(preemptor) else (False,):
            plans = self._plans(preemptor, candidates, swap)
            if bound is not None:
                plans = _freeing(bound, plans, candidates)
            if among is not None:
                plans = [plan for plan in plans if any(w.key in among for w in plan)]
            for plan in plans[:DOMAINS_TRIED]:
                room = self._simulate(preemptor, plan, search, swap)
                if room is not None:
                    return room
        return None

    def _waited_for(self, preemptor: Workload, ordered: list[Workload], protected: set[str],
                    search: Search, bound: QuotaBlock | None) -> Blocked:
        """The same search as if the `protected` candidates' protection had ended: every
        candidate in the one eviction order (`ordered`, cheapest first, as the search will
        order them once they are free: which victims a plan takes, and so whether it proves
        room, depends on that order), trying only plans that take one of the protected (the
        others are what the search that failed tried), rolled back whatever it proves. The
        protected workloads among the victims of the room it finds are the ones whose
        protection the preemptor waits for, until the last of them ends. A protected workload
        whose eviction would not make room (another team's work keeps the domain full, or the
        preemptor fits no domain at all) is never named, nor is a time promised."""
        mark = self._statement.checkpoint()
        room = self._search(preemptor, ordered, search, bound, among=protected)
        self._statement.rollback(mark)
        if room is None:
            return Blocked((), None)
        waited = [v.workload for v in room.victims if v.workload.key in protected]
        ends = [w.protected_until() or self._now for w in waited]
        return Blocked(tuple(waited), max(ends)) if waited else Blocked((), None)

    def _simulate(self, preemptor: Workload, plan: list[Workload], search: Search,
                  swap: bool) -> Room | None:
        """Evict the whole plan, try once; if the preemptor fits, give back every victim it can
        do without, newest decision first (one placement per victim, none on failure). The
        quota ledger alone decides whether victims are justified and the preemptor admissible,
        so victims are first uncounted (books and headroom) and released on the node model only
        once the ledger says yes; either way each victim is whole again (both halves) before
        anything else reads the state."""
        statement = self._statement
        mark = statement.checkpoint()
        chosen: list[Victim] = []
        for candidate in plan:
            victim = self._victim(preemptor, candidate, search)
            if victim is not None:
                statement.uncount(victim.workload)
                chosen.append(victim)
        placement = None
        if chosen and self._within_bounds(preemptor):
            for victim in chosen:
                statement.release(victim.workload.key)
            placement = self._place(preemptor, chosen, swap)
        if placement is None:
            statement.rollback(mark)
            return None
        for victim in reversed(chosen[:]):
            statement.allocate(victim.workload, recorded_placements(victim.workload))
            rest = [v for v in chosen if v is not victim]
            kept = self._place(preemptor, rest, swap) if self._within_bounds(
                preemptor) else None
            if kept is None:
                statement.evict(victim.workload)
            else:
                chosen = rest
                placement = kept
        return Room(placement, tuple(chosen))

    def _within_bounds(self, preemptor: Workload) -> bool:
        """Within every limit (and fair share, if non-preemptible and long: a short job gives
        its GPUs back within minutes anyway) on the ledger as it is."""
        return self._ledger.limit_block(preemptor) is None and (
            preemptor.preemptible(self._rule.non_preemptible_priority)
            or self._short.is_short(preemptor) or self._ledger.share_block(preemptor) is None)

    def _place(self, preemptor: Workload, victims: list[Victim],
               swap: bool) -> Placement | None:
        """Where the preemptor fits with `victims` gone, leaving the short jobs' headroom, or
        (a `swap`) taking only what its victims freed (`Headroom.takes_nothing`): a swap is
        never refused for a room it leaves as it found it, but a plan that could refill the
        room keeps its victims for that."""
        result = place(self._state, preemptor, explain=False)  # a failed plan is dropped
        if not isinstance(result, Placement):
            return None
        headroom = self._headroom
        if swap:
            return result if headroom.takes_nothing(
                preemptor, result, [v.workload for v in victims]) else None
        return result if headroom.refusal(preemptor, result) is None else None

    def _rank(self) -> None:
        """Once per cycle: running workloads that may be evicted now, cheapest first
        (unfunded, resumable, least progress lost, fewest GPUs, lowest priority, worst-ranked
        allocation, most recently started, most recently submitted, key), and those protected
        by their min runtime (soonest free first), both grouped by queue so each preemptor looks
        at queues rather than at every run."""
        if self._ranked:
            return
        ranked: list[tuple[tuple[bool, bool, float, int, int, float, float, float, str],
                           Workload]] = []
        protected: list[tuple[float, str, Workload]] = []
        ratios: dict[str, float] = {}
        now, kind = self._now, self._rule.kind
        for workload in self._running.values():
            if not kind(workload) & EVER_EVICTABLE:
                continue
            started = workload.admitted_at  # `protected_until`, inlined
            if workload.funded and started is not None and started + workload.min_runtime > now:
                protected.append((started + workload.min_runtime, workload.key, workload))
                continue
            ratio = ratios.get(workload.queue)
            if ratio is None:
                ratio = ratios[workload.queue] = self._ranking.ratio(workload.queue)
            ranked.append((_cost(workload, now, ratio), workload))
        ranked.sort(key=itemgetter(0))
        protected.sort(key=itemgetter(0, 1))
        self._ranked = True
        self._evictable = CandidateGroups([w for _, w in ranked], self._ledger.path, kind)
        self._protected = CandidateGroups([w for _, _, w in protected], self._ledger.path, kind)

    def _eligible(self, groups: CandidateGroups, preemptor: Workload, within: str | None,
                  search: Search) -> list[Candidate]:
        """Still-running workloads of `groups` the preemptor may take (`eviction.may_evict`),
        with their position in the ranking (unsorted). `within` keeps only queues under it.

        Two leaves' allocations compare where their paths diverge (`ranking`), so every leaf
        under one sibling of a queue on the preemptor's path has the same standing: the walk
        asks the rule once per such subtree and kind of work, and takes the candidates of each
        allowed kind whole, instead of once per workload. A drain asks per workload on the
        nodes it drains (`EvictionRule.drain_takes`)."""
        gpus = preemptor.requests().get(GPU, 0)
        short = self._short.is_short(preemptor)
        ranking, ledger, slicing = self._ranking, self._ledger, self._rule.time_slicing
        # What one preemptor may take depends on its queue, priority, kind and bound only (and,
        # when use is what is held, on its size and on the allocations as they stand): searches
        # of other shapes share the list; with use over a window, on the GPU time of its
        # protected run too (the larger gap is judged with it charged).
        # The search as a bool: an Enum member hashes through interpreted Python.
        drain = search is Search.DRAIN
        key = (groups is self._protected, preemptor.queue, preemptor.priority, short, drain,
               within, (gpus, ledger.changes) if ranking.by_holding else (
                   0, int(gpus * preemptor.min_runtime)))
        chosen = self._candidates.get(key)
        if chosen is None:
            chosen = []
            drained = self._drained
            takes = self._rule.drain_takes(preemptor) if drain else None
            path = ledger.path(preemptor.queue)
            for depth in range(0 if within is None else path.index(within) + 1, len(path)):
                mine = path[depth]
                better: float | None = None
                charged = 0.0  # `better` with the preemptor's protected run charged
                for sibling in groups.children.get(path[depth - 1] if depth else None, ()):
                    if sibling == mine:
                        continue
                    if better is None:
                        better = ranking.ratio(mine, gpus)
                        charged = ranking.after_run(mine, gpus, preemptor.min_runtime)
                    standing = ranked_standing(ranking.ratio(sibling), better, charged, slicing)
                    for kind, items in groups.below[sibling].items():
                        if may_evict(kind, standing, short, Search.RANKED):
                            chosen.extend(items)
                        elif takes is not None and kind & FUNDED:
                            chosen.extend(item for item in items
                                          if item[1].key in drained and takes(item[1]))
            own = groups.below.get(preemptor.queue)
            for kind, items in own.items() if own is not None else ():
                for item in items:
                    standing = (Standing.OUTRANKED if item[1].priority < preemptor.priority
                                else Standing.NONE)
                    if may_evict(kind, standing, short, Search.RANKED) or (
                            takes is not None and kind & FUNDED and item[1].key in drained
                            and takes(item[1])):
                        chosen.append(item)
            self._candidates[key] = chosen
        running, kept_off = self._running, self._kept_off
        return [item for item in chosen if item[1].key in running and (
            drain or item[1].key not in kept_off)]

    def _plans(self, preemptor: Workload, candidates: list[Workload],
               swap: bool) -> list[list[Workload]]:
        """Per domain of the required level (per node for a single pod): the first candidates
        (in eviction order) whose release would bring the domain's free amount of the key
        resource to the gang's need. Fewest victims first, then the plan whose worst victim
        ranks earliest. Only the first `DOMAINS_TRIED` plans are sure to be there: once that
        many need one victim each, no later candidate can make a better plan, and the scan
        stops."""
        requests = preemptor.requests()
        resource = GPU if requests.get(GPU, 0) > 0 else min(requests, default=GPU)
        index = self._state.resource_index(resource)
        need = requests.get(resource, 0)
        # A long start leaves the headroom free as well, anywhere in the cluster: a domain
        # must free more only for the part of it that the pool outside the domain lacks. A
        # swap need only free what it takes (`_place`).
        headroom = (self._headroom.needed if resource == GPU and not swap
                    and self._headroom.applies(preemptor) else 0)
        pool = self._headroom.pool() if headroom else 0
        required = self._state.tree.enclosing(preemptor.topology.required)
        # One pod lands on one node: planning per node is exact where a wider domain's sum
        # can hide that no single node would hold the pod.
        level = HOSTNAME if sum(p.count for p in preemptor.pod_sets) == 1 else required
        per_domain: dict[int, tuple[Domain, list[Workload], int, int, int]] = {}
        """Per domain: its plan, free amount with the plan released, amount wanted, and the
        position of the plan's last (worst-ranked) victim among the candidates."""
        singles = 0
        for position, workload in enumerate(candidates):
            for domain, gained in self._gains(workload, resource, level):
                if required is not None and required not in domain.affinity:
                    continue  # a node outside every domain of the required level
                entry = per_domain.get(id(domain))
                if entry is None:
                    free = 0 if index is None else sum(row[index] for row in domain.free)
                    wanted = need + max(0, headroom - (pool - free)) if headroom else need
                    entry = (domain, [], free, wanted, position)
                _, plan, free, wanted, _ = entry
                if (free >= wanted and plan) or len(plan) >= MAX_VICTIMS:
                    continue
                plan.append(workload)
                per_domain[id(domain)] = (domain, plan, free + gained, wanted, position)
                if len(plan) == 1 and free + gained >= wanted:
                    singles += 1
            if singles >= DOMAINS_TRIED:
                break  # later candidates only make plans of one victim that ranks later
            if level is None and per_domain and all(
                    (free >= wanted and plan) or len(plan) >= MAX_VICTIMS
                    for _, plan, free, wanted, _ in per_domain.values()):
                break  # the one cluster-wide plan is complete
        viable = [((len(plan), last, domain.order), plan)
                  for domain, plan, free, wanted, last in per_domain.values()
                  if free >= wanted and plan]
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

    def _victim(self, preemptor: Workload, victim: Workload, search: Search) -> Victim | None:
        """The eviction, if still justified given the victims chosen so far (the eviction
        rule asked again, `EvictionRule.victim`)."""
        return self._rule.victim(preemptor, victim, search, victim.key in self._drained)


def _cost(workload: Workload, at: float, ratio: float
          ) -> tuple[bool, bool, float, int, int, float, float, float, str]:
    """How cheap evicting `workload` at `at` is, cheapest first (`RoomFinder._rank`): unfunded,
    resumable, least progress lost, fewest GPUs, lowest priority, worst-ranked allocation
    (`ratio`), most recently started, most recently submitted, key."""
    started = workload.admitted_at
    lost = 0.0 if workload.resumable or started is None else at - started
    return (workload.funded, not workload.resumable, lost, workload.requests().get(GPU, 0),
            workload.priority, -ratio, -(started or 0.0), -workload.submitted_at, workload.key)


def _freeing(bound: QuotaBlock, plans: list[list[Workload]],
             candidates: list[Workload]) -> list[list[Workload]]:
    """`plans` (each frees a domain the preemptor fits) made to free what it would exceed
    `bound` by too: each topped up with the cheapest other candidates (all under the bound's
    queue), and one more plan of those alone, for a preemptor that fits where GPUs stand idle
    and is held back by the limit only. A limit counts wherever the victims run: planning by
    domain alone found no plan when they ran on other nodes than the one the preemptor fits.
    Fewest victims first."""
    excess = bound.holding + bound.request - bound.bound
    freeing = []
    for plan in (*plans, []):
        taken = {w.key for w in plan}
        freed = sum(w.requests().get(bound.resource, 0) for w in plan)
        topped = list(plan)
        for candidate in candidates:
            if freed >= excess or len(topped) >= MAX_VICTIMS:
                break
            if candidate.key not in taken:
                topped.append(candidate)
                freed += candidate.requests().get(bound.resource, 0)
        if topped and freed >= excess and topped not in freeing:
            freeing.append(topped)
    return sorted(freeing, key=len)
