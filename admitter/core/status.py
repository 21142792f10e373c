"""What each ClusterQueue's status reports after a cycle: holdings and workload counts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from admitter.core.decisions import Pending, QueueStatus
from admitter.core.model import Workload
from admitter.core.queue_tree import QueueTree


def queue_statuses(
    tree: QueueTree, allocated: dict[str, dict[str, int]], running: Iterable[Workload],
    waiting: Mapping[str, int]
) -> dict[str, QueueStatus]:
    """Counts and allocations of every queue, parents summing their subtree (`allocated`
    already does); `waiting` counts each queue's own waiting workloads (`per_queue`)."""
    admitted = tree.roll_up(per_queue(running), 0)
    pending = tree.roll_up({name: count for name, count in waiting.items() if name in tree}, 0)
    return {
        name: QueueStatus(
            allocated={r: a for r, a in allocated[name].items() if a},
            pending=pending[name],
            admitted=admitted[name],
        )
        for name in tree
    }


def per_queue(items: Iterable[Workload | Pending]) -> dict[str, int]:
    """How many of `items` each queue names."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.queue] = counts.get(item.queue, 0) + 1
    return counts
