"""Which leaf queue is offered capacity next, kept current as allocations change.

The order is `ranking.Ranking.key` (budgeted first, lower use / budget) and then
`queue_order.standing_key`, applied level by level. Re-sorting every queue after
every admission would cost O(queues) per decision; instead each parent keeps a heap of its
children and an admission re-keys only the admitted leaf and its ancestors (O(depth · log
fan-out)). Stale heap entries are skipped lazily by a version stamp.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from admitter.core.queue_order import standing_key
from admitter.core.queue_tree import QueueTree
from admitter.core.quota import QuotaLedger
from admitter.core.ranking import Ranking

_Entry = tuple[tuple[bool, float, float, int, float, int, str], int, str]


class QueueSelector:
    """Best leaf first among leaves that still have work to offer."""

    def __init__(
        self,
        tree: QueueTree,
        ranking: Ranking,
        usage: Mapping[str, float],
        ledger: QuotaLedger,
        leaves: Iterable[str],
        standing: dict[str, tuple[tuple[int, float, int, str], str | None, bool]] | None = None,
    ) -> None:
        """`standing` caches, per queue, what does not change during a cycle (its
        `standing_key`, parent, and whether it is a leaf); a cycle shares one between its
        passes."""
        self._ranking = ranking
        self._ledger = ledger
        self._version: dict[str, int] = {}
        self._active: dict[str, int] = {}
        self._heaps: dict[str | None, list[_Entry]] = {}
        self._standing = {} if standing is None else standing
        for leaf in leaves:
            for name in self._ledger.path(leaf):
                self._active[name] = self._active.get(name, 0) + 1
        for name in self._active:
            if name not in self._standing:
                self._standing[name] = (standing_key(tree, usage, name), tree.parent(name),
                                        tree.is_leaf(name))
            self._version[name] = 1
            self._heaps.setdefault(self._standing[name][1], []).append(self._entry(name, 1))
        for heap in self._heaps.values():  # one heapify, not a push per queue
            heapq.heapify(heap)

    def best(self) -> str | None:
        """The leaf to serve next, or None when no leaf has work left."""
        parent: str | None = None
        version, active = self._version, self._active
        while True:
            heap = self._heaps.get(parent)
            while heap:
                _, stamp, name = heap[0]
                if version.get(name) == stamp and active.get(name, 0) > 0:
                    break
                heapq.heappop(heap)
            else:
                return None
            if self._standing[name][2]:
                return name
            parent = name

    def refresh(self, leaf: str) -> None:
        """Re-key a leaf and its ancestors after its allocation changed."""
        for name in self._ledger.path(leaf):
            if self._active.get(name, 0) > 0:
                self._push(name)

    def retire(self, leaf: str) -> None:
        """The leaf has nothing more to offer in this pass. Nobody is re-keyed (no allocation
        changed): queues left with nothing active drop out as their heap entries surface."""
        if self._active.get(leaf, 0) <= 0:
            return
        for name in self._ledger.path(leaf):
            self._active[name] -= 1

    def _push(self, name: str) -> None:
        version = self._version.get(name, 0) + 1
        self._version[name] = version
        heapq.heappush(self._heaps.setdefault(self._standing[name][1], []),
                       self._entry(name, version))

    def _entry(self, name: str, version: int) -> _Entry:
        """The heap entry of `name` as ranked now: entries are unique (a name's versions
        differ), so the best one does not depend on how the heap was built."""
        return (*self._ranking.key(name), *self._standing[name][0]), version, name
