"""Running work grouped for victim searches (`preemption`): per queue, everything running in
its subtree in ranking order, split by what a search may take.

Built once per ranking and shared by every search of the cycle: a search walks only the
siblings on the preemptor's path where the paths diverge, so its cost follows the tree's depth,
not the number of queues holding work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from admitter.core.model import Workload
from admitter.core.policy import ShortJobs


class QueueCandidates:
    """Workloads as (position in the ranking, workload): unfunded, funded, and the funded that
    are resumable and not short (what the swap margin, `TimeSlicing.swap_margin`, may take)."""

    __slots__ = ("funded", "swappable", "unfunded")

    def __init__(self) -> None:
        self.unfunded: list[tuple[int, Workload]] = []
        self.funded: list[tuple[int, Workload]] = []
        self.swappable: list[tuple[int, Workload]] = []


class CandidateGroups:
    """Ranked candidates of one kind (evictable now, or protected) under every queue: `below`
    holds each queue's subtree, in ranking order; `children` names, per parent (None for the
    roots), the children with candidates below them."""

    __slots__ = ("below", "children")

    def __init__(self, ordered: Iterable[Workload],
                 path: Callable[[str], tuple[str, ...]], short: ShortJobs) -> None:
        self.below: dict[str, QueueCandidates] = {}
        self.children: dict[str | None, list[str]] = {}
        for position, workload in enumerate(ordered):
            item = (position, workload)
            funded = workload.funded
            swappable = funded and workload.resumable and not short.is_short(workload)
            parent: str | None = None
            for name in path(workload.queue):
                group = self.below.get(name)
                if group is None:
                    group = self.below[name] = QueueCandidates()
                    self.children.setdefault(parent, []).append(name)
                (group.funded if funded else group.unfunded).append(item)
                if swappable:
                    group.swappable.append(item)
                parent = name
