"""Running work grouped for victim searches (`preemption`): per queue, everything running in
its subtree in ranking order, split by kind (`eviction.kind_of`), so a search asks the eviction
rule once per kind and subtree rather than once per workload.

Built once per ranking and shared by every search of the cycle: a search walks only the
siblings on the preemptor's path where the paths diverge, so its cost follows the tree's depth,
not the number of queues holding work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from admitter.core.model import Workload

Candidate = tuple[int, Workload]
"""A workload and its position in the ranking."""


class CandidateGroups:
    """Ranked candidates of one kind of search list (evictable now, or protected) under every
    queue: `below` holds each queue's subtree, per workload kind, in ranking order; `children`
    names, per parent (None for the roots), the children with candidates below them."""

    __slots__ = ("below", "children")

    def __init__(self, ordered: Iterable[Workload],
                 path: Callable[[str], tuple[str, ...]], kind: Callable[[Workload], int]
                 ) -> None:
        self.below: dict[str, dict[int, list[Candidate]]] = {}
        self.children: dict[str | None, list[str]] = {}
        for position, workload in enumerate(ordered):
            item = (position, workload)
            of_kind = kind(workload)
            parent: str | None = None
            for name in path(workload.queue):
                group = self.below.get(name)
                if group is None:
                    group = self.below[name] = {}
                    self.children.setdefault(parent, []).append(name)
                same = group.get(of_kind)
                if same is None:
                    group[of_kind] = [item]
                else:
                    same.append(item)
                parent = name
