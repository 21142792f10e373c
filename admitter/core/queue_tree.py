"""The queue hierarchy, validated once so the rest of the core can walk it without checks.

Siblings are always listed in creation order (`Queue.order`, then name): that order is the
last tie-break of both fair-share division and queue ordering, so every walk must agree on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

from admitter.core.model import Queue

_Amount = TypeVar("_Amount", int, float)


class QueueTreeError(ValueError):
    """A queue the tree cannot accept or a workload naming the wrong kind of queue."""

    def __init__(self, queue_name: str, message: str) -> None:
        super().__init__(f"queue {queue_name!r}: {message}")
        self.queue_name = queue_name


def _creation_key(queue: Queue) -> tuple[int, str]:
    return (queue.order, queue.name)


class QueueTree:
    """Immutable parent/child structure over a set of `Queue` values, keyed by name."""

    def __init__(self, queues: Iterable[Queue]) -> None:
        ordered = sorted(queues, key=_creation_key)
        by_name: dict[str, Queue] = {}
        for queue in ordered:
            if queue.name in by_name:
                raise QueueTreeError(queue.name, "defined twice")
            by_name[queue.name] = queue
        children: dict[str, list[str]] = {name: [] for name in by_name}
        roots: list[str] = []
        for queue in ordered:
            if queue.parent is None:
                roots.append(queue.name)
            elif queue.parent not in by_name:
                raise QueueTreeError(queue.name, f"unknown parent {queue.parent!r}")
            else:
                children[queue.parent].append(queue.name)
        self._queues = by_name
        self._children = {name: tuple(kids) for name, kids in children.items()}
        self._roots = tuple(roots)
        self._top_down = self._walk_top_down()
        if len(self._top_down) != len(by_name):
            self._raise_cycle()
        self._leaves = tuple(name for name in self._top_down if not self._children[name])
        self._paths: dict[str, tuple[str, ...]] = {}
        for name in self._top_down:  # parents first, so a parent's path is always there
            parent = by_name[name].parent
            self._paths[name] = (name,) if parent is None else (*self._paths[parent], name)

    def _walk_top_down(self) -> tuple[str, ...]:
        """Breadth first from the roots; queues caught in a parent cycle are never reached."""
        order = list(self._roots)
        for name in order:
            order.extend(self._children[name])
        return tuple(order)

    def _raise_cycle(self) -> None:
        """Name a queue on the cycle that the first unreachable queue leads into."""
        reached = set(self._top_down)
        start = next(name for name in self._queues if name not in reached)
        chain = [start]
        parent = self._queues[start].parent
        while parent is not None and parent not in chain:
            chain.append(parent)
            parent = self._queues[parent].parent
        assert parent is not None, "an unreached queue always leads into a cycle"
        cycle = chain[chain.index(parent) :]
        raise QueueTreeError(cycle[0], "parent cycle " + " -> ".join([*cycle, cycle[0]]))

    def __contains__(self, name: object) -> bool:
        return name in self._queues

    def __len__(self) -> int:
        return len(self._queues)

    def __iter__(self) -> Iterator[str]:
        """Every queue name, parents before their children."""
        return iter(self._top_down)

    @property
    def roots(self) -> tuple[str, ...]:
        return self._roots

    def queue(self, name: str) -> Queue:
        return self._queues[self._known(name)]

    def children(self, name: str) -> tuple[str, ...]:
        return self._children[self._known(name)]

    def parent(self, name: str) -> str | None:
        return self._queues[self._known(name)].parent

    def is_leaf(self, name: str) -> bool:
        return not self.children(name)

    def leaves(self) -> tuple[str, ...]:
        """Leaf queues, shallower first, siblings in creation order."""
        return self._leaves

    def ancestors(self, name: str) -> tuple[str, ...]:
        """Parent, grandparent, … up to the root; empty for a root."""
        chain: list[str] = []
        parent = self.parent(name)
        while parent is not None:
            chain.append(parent)
            parent = self._queues[parent].parent
        return tuple(chain)

    def path(self, name: str) -> tuple[str, ...]:
        """Root first, ending with `name` itself."""
        return self._paths[self._known(name)]

    def validate_leaf(self, queue_name: str) -> None:
        """Workloads may only name leaf queues: parents exist to divide, not to run."""
        children = self.children(queue_name)
        if children:
            raise QueueTreeError(
                queue_name,
                f"is a parent queue (children: {', '.join(children)}); "
                "workloads must name a leaf queue",
            )

    def roll_up(self, own: Mapping[str, _Amount], zero: _Amount) -> dict[str, _Amount]:
        """Each queue's own amount plus everything below it; names not in the tree are ignored."""
        total = {name: own.get(name, zero) for name in self._top_down}
        for name in reversed(self._top_down):
            parent = self._queues[name].parent
            if parent is not None:  # mypyc types the sum as int | float, mypy per constraint
                total[parent] = total[parent] + total[name]  # type: ignore[assignment, unused-ignore]
        return total

    def sibling_groups(self) -> Sequence[tuple[str | None, tuple[str, ...]]]:
        """(parent, children) for the roots (parent None) and then every parent, top down."""
        groups: list[tuple[str | None, tuple[str, ...]]] = [(None, self._roots)]
        groups.extend(
            (name, self._children[name]) for name in self._top_down if self._children[name]
        )
        return groups

    def _known(self, name: str) -> str:
        if name not in self._queues:
            raise QueueTreeError(name, "no such queue")
        return name
