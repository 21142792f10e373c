"""What a search for room (`preemption.RoomFinder`) answers: the victims it proved enough, or
why none could be."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from admitter.core.decisions import EvictionReason
from admitter.core.model import Workload
from admitter.core.placement import Placement


class Search(Enum):
    """What a search may take: ranked victims (`preemption`'s rule), or a drain's."""

    RANKED = "ranked"
    DRAIN = "drain"


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
    """No room could be proved now. Explained (`RoomFinder.find`): `protected` are the
    workloads inside their min runtime whose eviction a search proved would make room, and
    `protected_until` when the last of them ends (both empty when no protection ending would
    make room). Unexplained: no one is named and `protected_until` is when the first
    protected candidate frees up."""

    protected: tuple[Workload, ...]
    protected_until: float | None


NOT_TRIED = Blocked((), None)
"""Blocked without a search (one instance: most preemptors of a busy cycle get it)."""
