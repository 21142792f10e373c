"""What goes into one admission cycle and what comes out of it.

The controller builds a `Snapshot` from its informer caches and hands it to its kept core
(`IncrementalCore.decide`); the simulator tells the core its events instead; `run_cycle` decides
on a snapshot from scratch. Each applies the `CycleResult` its own way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum

from admitter.core.fairshare import FairShare
from admitter.core.model import (
    NON_PREEMPTIBLE_PRIORITY,
    FairShareSettings,
    Node,
    PlainRecord,
    Queue,
    Workload,
)
from admitter.core.moments import Dated
from admitter.core.policy import ShortJobs, TimeSlicing
from admitter.core.ranking import Ranking


@dataclass(frozen=True, slots=True)
class CycleSettings:
    """The knobs the cycle itself reads (a subset of the API's Settings), and whether its
    caller wants the reasons."""

    fair_share: FairShareSettings = field(default_factory=FairShareSettings)
    starvation_bound: float = 1800.0
    pods_ready_timeout: float = 600.0
    non_preemptible_priority: int | None = NON_PREEMPTIBLE_PRIORITY
    """Priorities at or above it are never preempted; None: every priority may be."""
    short_jobs: ShortJobs = field(default_factory=ShortJobs)
    """Who is a short job and how much room they keep; read by the usage ledger too."""
    time_slicing: TimeSlicing = field(default_factory=TimeSlicing)
    """How far apart allocations rank before GPUs change hands."""
    reasons: bool = True
    """Whether the caller wants to know why each pending workload waits (`CycleResult.pending`):
    the controller writes it into Workload status; the simulator reads none and asks for none.
    Without, the cycle does only the work that decides (no ProtectedVictims proof, no
    never-fits check, no message, no failed placement named): the same admissions and
    evictions, in the same order, with `pending` empty."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A frozen view of the cluster at `now`: every decision of a cycle is made against it.

    `workloads` holds the pending and admitted ones (finished workloads no longer matter);
    `usage` holds the funded GPU-seconds per leaf queue inside the fair-share window at
    `now` (`UsageLedger.usage`), and `short_gpus` the GPUs short jobs held on average over
    it (`UsageLedger.short_gpus`), which sizes their room (`Headroom`).
    """

    now: float
    nodes: Sequence[Node]
    topology: Sequence[str]
    queues: Sequence[Queue]
    workloads: Sequence[Workload]
    usage: Mapping[str, float] = field(default_factory=dict)
    settings: CycleSettings = field(default_factory=CycleSettings)
    short_gpus: float = 0.0


class EvictionReason(Enum):
    PREEMPTED = "Preempted"
    RECLAIMED = "Reclaimed"
    DRAINED = "Drained"
    PODS_READY_TIMEOUT = "PodsReadyTimeout"
    MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"
    """It ran its declared maximum run time: stopped and finished, never requeued."""

    @property
    def requeues(self) -> bool:
        """Whether the evicted workload waits to run again (every reason but one)."""
        return self is not EvictionReason.MAX_RUNTIME_EXCEEDED


class PendingReason(StrEnum):
    """Why a workload waits, as its `QuotaReserved=False` condition and event show it."""

    INVALID_QUEUE = "InvalidQueue"
    """Its queue is not a leaf ClusterQueue."""
    QUEUE_CLOSED = "QueueClosed"
    """Its LocalQueue or ClusterQueue is missing or being deleted (the controller's)."""
    RESERVED = "Reserved"
    """The room is held for a workload past the starvation bound."""
    PROTECTED_VICTIMS = "ProtectedVictims"
    """Evicting the workloads named in `Pending.blockers`, once their protected min runtime
    ends, would make room: the search that decided proved it (with them evicted, it fits within
    every limit); `retry_at` is when the last of them ends."""
    LIMIT_EXCEEDED = "LimitExceeded"
    """Admitting it would take a queue on its path past its limit."""
    QUOTA_EXCEEDED = "QuotaExceeded"
    """Non-preemptible work stays within its queue's fair share."""
    NO_FIT = "NoFit"
    """No placement now, even after preemption, and no protection ending would make one."""
    NEVER_FITS = "NeverFits"
    """No placement even with nothing running on the cluster's nodes (a pod larger than any
    node, a gang larger than any domain of its required level, a toleration or node selection
    no node meets): it waits until the nodes change. Outweighs every reason of what holds it
    back now."""
    BACKOFF = "Backoff"
    """Requeued after its pods were not ready in time; waits before it is tried again."""


@dataclass(slots=True)  # not frozen: one per admission (docs/admission-cycle.md, Speed)
class Admission:
    """Admit `key`: the pods per node per pod set the gang check assumed, and the required
    node-affinity term (label key → value) to inject; empty for no topology constraint.
    `pod_set_domains` names each pod set placed in a narrower domain of its own, with that
    domain's term. Read-only by convention."""

    key: str
    queue: str
    pod_set_nodes: tuple[Mapping[str, int], ...]
    affinity: Mapping[str, str]
    message: str
    pod_set_domains: tuple[tuple[str, Mapping[str, str]], ...] = ()


@dataclass(frozen=True, slots=True)
class Eviction:
    """Evict `key`, requeued unless its reason finishes it (`EvictionReason.requeues`);
    `preemptor` names the workload the room was made for."""

    key: str
    queue: str
    reason: EvictionReason
    message: str
    preemptor: str | None = None


class Pending(PlainRecord):
    """Why `key` still waits, naming the blocking fact; `position` is its rank in its queue
    (1 = next). `retry_at` is when the blocking fact ends by itself, if known (e.g. the end of
    a victim's protected min runtime); `blockers` are the keys of the workloads whose
    protection it waits for.

    A cycle asked for reasons makes one per waiting workload, and most messages are never read
    (the controller writes a few per pass), so `message` may be given as the parts it is
    joined from (`str` of each), joined when first read. Not frozen, unlike the other
    decisions (docs/admission-cycle.md, Speed)."""

    __slots__ = ("_message", "_parts", "blockers", "key", "position", "queue", "reason",
                 "retry_at")

    def __init__(self, key: str, queue: str, reason: PendingReason,
                 message: str | tuple[object, ...],
                 position: int, retry_at: float | None = None,
                 blockers: tuple[str, ...] = ()) -> None:
        self.key = key
        self.queue = queue
        self.reason = reason
        self._message: str | None = message if isinstance(message, str) else None
        self._parts: tuple[object, ...] = () if isinstance(message, str) else message
        self.position = position
        self.retry_at = retry_at
        self.blockers = blockers

    @property
    def message(self) -> str:
        if self._message is None:
            self._message = "".join([str(part) for part in self._parts])
        return self._message

    @property
    def dated(self) -> bool:
        """Whether its message names a moment measured from the cycle's `now` ("in 42m")."""
        return any(isinstance(part, Dated) for part in self._parts)

    def redated(self, now: float) -> Pending:
        """The same wait as a cycle at `now` states it: its moments measured from there (a
        result that stands, `standstill`)."""
        if not self.dated:
            return self
        parts = tuple(part.redated(now) if isinstance(part, Dated) else part
                      for part in self._parts)
        return Pending(self.key, self.queue, self.reason, parts, self.position, self.retry_at,
                       self.blockers)

    def _fields(self) -> tuple[object, ...]:
        return (self.key, self.queue, self.reason, self.message, self.position, self.retry_at,
                self.blockers)


@dataclass(slots=True)  # not frozen: one per queue per cycle (docs/admission-cycle.md, Speed)
class QueueStatus:
    """What a ClusterQueue's status shows after the cycle."""

    allocated: Mapping[str, int]
    pending: int
    admitted: int


class CycleResult:
    """The cycle's decisions. Queue statuses are counted when first read: the controller
    shows them, the simulator never asks."""

    __slots__ = ("_pending", "_pending_from", "_queues", "_statuses", "admissions", "evictions",
                 "fair_share", "next_change", "ranking", "settled", "steady_until")

    def __init__(self, admissions: tuple[Admission, ...], evictions: tuple[Eviction, ...],
                 pending: tuple[Pending, ...] | Callable[[], tuple[Pending, ...]],
                 fair_share: FairShare, next_change: float | None,
                 settled: bool, statuses: Callable[[], Mapping[str, QueueStatus]],
                 ranking: Ranking | None = None, steady_until: float = math.inf) -> None:
        self.admissions = admissions
        self.evictions = evictions
        self._pending: tuple[Pending, ...] = pending if isinstance(pending, tuple) else ()
        self._pending_from: Callable[[], tuple[Pending, ...]] | None = (
            None if isinstance(pending, tuple) else pending)
        self.fair_share = fair_share
        self.next_change = next_change
        """The first moment after `now` at which time alone (usage aside) could change a
        decision for the same workloads: a protection ending under a blocked preemptor, a
        drained node's work reaching the end of its min runtime, the starvation bound, a
        backoff or a pods-ready deadline. None if no such moment. A caller that re-runs the
        cycle only on changes and at this moment misses nothing but usage drift."""
        self.settled = settled
        """Whether the same cycle, run again on the state these decisions leave, would decide
        nothing more. True when it evicted nothing and admitted only by placement, within fair
        shares or unfunded, none of it before the search budget ran out or before a starvation
        reservation, and no unfunded work at all once the budget ran out: such admissions only
        make what failed harder (funded work within its share is protected; unfunded work
        takes idle capacity and yields it to the same preemptors), and a re-run would serve the
        queues before those points in the same order, so the same searches and the same
        reservation. Unfunded work ranks its queue later, so after the budget ran out a queue
        turned away could get a search; a funded borrower can take its queue over its share,
        which makes the queue's other running work reclaimable."""
        self.ranking = ranking
        """The cycle's budgets and ratios (what the status shows as budget and rank)."""
        self.steady_until = steady_until
        """The first moment after `now` at which a comparison of this cycle with `now` could
        come out otherwise that neither `next_change` nor a workload's own moments name (a
        backfill candidate's min runtime ending too late for the drained gang): how long an
        answer that decided nothing stands (`standstill`)."""
        self._statuses: Callable[[], Mapping[str, QueueStatus]] | None = statuses
        self._queues: Mapping[str, QueueStatus] = {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CycleResult):
            return NotImplemented
        return (self.admissions, self.evictions, self.pending, self.fair_share, self.queues,
                self.next_change, self.settled) == (
            other.admissions, other.evictions, other.pending, other.fair_share, other.queues,
            other.next_change, other.settled)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"CycleResult(admissions={self.admissions!r}, evictions={self.evictions!r}, "
                f"pending={self.pending!r}, queues={dict(self.queues)!r})")

    @property
    def pending(self) -> tuple[Pending, ...]:
        """Every workload still waiting, by key, with why; empty for a caller that asked for
        no reasons (`CycleSettings.reasons`). Put in order when first read: sorting thousands
        of keys each cycle is not free."""
        if self._pending_from is not None:
            self._pending = self._pending_from()
            self._pending_from = None
        return self._pending

    @property
    def queues(self) -> Mapping[str, QueueStatus]:
        """Per queue: allocation, pending and admitted counts (parents sum their subtree)."""
        if self._statuses is not None:
            self._queues = self._statuses()
            self._statuses = None
        return self._queues
