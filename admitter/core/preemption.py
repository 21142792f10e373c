"""Making room for a pending workload by evicting others, proved by simulation first.

Three kinds of victim, never mixed up:
- unfunded workloads (min runtime 0) anywhere: any funded workload may take their place;
- preempt: lower-priority workloads of the same leaf queue, past their min runtime;
- reclaim: workloads of other queues past their min runtime, while the victim's queue (and its
  ancestor where the two paths diverge) is above its fair share. The preemptor must itself stay
  within its fair share (the caller's share check runs on every level of its path).
Non-preemptible workloads (priority ≥ 100, funded) are never victims.

Victims are tried in order (unfunded, lowest priority, most over-served queue, most recently
started, then most recently submitted), each released on the `ClusterState` and the quota ledger until the preemptor fits;
then every victim whose return still leaves room is given back (minimal set). Anything not
proved is rolled back (KAI's Statement: checkpoint, evict, place, commit or roll back).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from admitter.core.decisions import EvictionReason
from admitter.core.model import GPU, Workload
from admitter.core.nodes import ClusterState
from admitter.core.placement import Placement, place
from admitter.core.quota import QuotaLedger

MAX_VICTIMS = 64
"""Give up on a preemptor that would need more evictions than this (bounds cycle time)."""


@dataclass(frozen=True, slots=True)
class Victim:
    workload: Workload
    reason: EvictionReason
    message: str


@dataclass(frozen=True, slots=True)
class Room:
    """Proved: evicting `victims` lets the preemptor be placed at `placement`."""

    placement: Placement
    victims: tuple[Victim, ...]


@dataclass(frozen=True, slots=True)
class Blocked:
    """No room could be proved; `protected_until` is when protected candidates free up."""

    protected: tuple[Workload, ...]
    protected_until: float | None


class RoomFinder:
    """Finds victims for preemptors within one cycle; `running` is kept current by the cycle."""

    def __init__(self, state: ClusterState, ledger: QuotaLedger, running: dict[str, Workload],
                 now: float) -> None:
        self._state = state
        self._ledger = ledger
        self._running = running
        self._now = now

    def find(self, preemptor: Workload, admissible: Callable[[Workload], bool],
             same_queue_only: bool = False) -> Room | Blocked:
        """Evict (virtually) until `preemptor` is `admissible` on quota and fits; keep a minimal
        set. On success the state and ledger hold the victims' release but not the preemptor.
        `same_queue_only` when only the preemptor's own queue can give (it is over its share)."""
        candidates, protected = self._candidates(preemptor, same_queue_only)
        checkpoint = self._state.checkpoint()
        chosen: list[Victim] = []
        placement: Placement | None = None
        for candidate in candidates:
            victim = self._victim(preemptor, candidate)
            if victim is None:
                continue
            self._evict(victim.workload)
            chosen.append(victim)
            placement = self._try(preemptor, admissible)
            if placement is not None or len(chosen) >= MAX_VICTIMS:
                break
        if placement is None:
            self._restore(chosen)
            self._state.rollback(checkpoint)
            until = min((w.protected_until() or self._now for w in protected), default=None)
            return Blocked(tuple(protected), until)
        for victim in reversed(chosen[:-1]):
            self._return(victim.workload)
            kept = self._try(preemptor, admissible)
            if kept is None:
                self._evict(victim.workload)
            else:
                chosen.remove(victim)
                placement = kept
        return Room(placement, tuple(chosen))

    def _try(self, preemptor: Workload, admissible: Callable[[Workload], bool]) -> (
            Placement | None):
        if not admissible(preemptor):
            return None
        result = place(self._state, preemptor)
        return result if isinstance(result, Placement) else None

    def _evict(self, workload: Workload) -> None:
        self._state.release(workload.key)
        self._ledger.remove(workload)

    def _return(self, workload: Workload) -> None:
        self._state.assume(workload.key, workload.pod_sets, _placements(workload))
        self._ledger.add(workload)

    def _restore(self, chosen: Iterable[Victim]) -> None:
        for victim in chosen:
            self._ledger.add(victim.workload)

    def _candidates(self, preemptor: Workload, same_queue_only: bool) -> tuple[
            list[Workload], list[Workload]]:
        """Victim candidates in eviction order, and those only their protected min runtime
        keeps safe."""
        needs = set(preemptor.requests())
        ranked: list[tuple[tuple[bool, int, float, float, float, str], Workload]] = []
        protected: list[Workload] = []
        for workload in self._running.values():
            if same_queue_only and workload.queue != preemptor.queue:
                continue
            if not _holds_any(workload, needs) or not self._kind_allows(preemptor, workload):
                continue
            until = workload.protected_until()
            if workload.funded and not workload.preemptible:
                continue
            if until is not None and until > self._now:
                protected.append(workload)
                continue
            order = (
                workload.funded,
                workload.priority,
                -self._ledger.over_share_ratio(workload.queue),
                -(workload.admitted_at or 0.0),
                -workload.submitted_at,
                workload.key,
            )
            ranked.append((order, workload))
        ranked.sort(key=lambda item: item[0])
        protected.sort(key=lambda w: (w.protected_until() or 0.0, w.key))
        return [w for _, w in ranked], protected

    def _kind_allows(self, preemptor: Workload, victim: Workload) -> bool:
        if not victim.funded:
            return True
        if victim.queue == preemptor.queue:
            return victim.priority < preemptor.priority
        return True

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
        mine = self._ledger.path(reclaimer)
        theirs = self._ledger.path(victim)
        common = 0
        while common < min(len(mine), len(theirs)) and mine[common] == theirs[common]:
            common += 1
        diverging = theirs[common]
        if self._ledger.above_fair_share(diverging) and self._ledger.above_fair_share(victim):
            return diverging
        return None


def _holds_any(workload: Workload, resources: set[str]) -> bool:
    """Only victims holding something the preemptor asks for (GPU first) can help."""
    held = workload.requests()
    if GPU in resources:
        return held.get(GPU, 0) > 0
    return any(held.get(r, 0) > 0 for r in resources)


def _placements(workload: Workload) -> tuple[dict[str, int], ...]:
    if workload.pod_set_placements:
        return tuple(dict(p) for p in workload.pod_set_placements)
    return (dict(workload.placement),)
