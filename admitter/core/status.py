"""What each ClusterQueue's status reports after a cycle: holdings and workload counts."""

from __future__ import annotations

from collections.abc import Iterable

from admitter.core.decisions import Pending, QueueStatus
from admitter.core.model import Workload
from admitter.core.queue_tree import QueueTree


def queue_statuses(
    tree: QueueTree, allocated: dict[str, dict[str, int]], running: Iterable[Workload],
    pending: Iterable[Pending]
) -> dict[str, QueueStatus]:
    """Counts and allocations of every queue, parents summing their subtree (`allocated`
    already does)."""
    admitted_count: dict[str, int] = {}
    for workload in running:
        admitted_count[workload.queue] = admitted_count.get(workload.queue, 0) + 1
    pending_count: dict[str, int] = {}
    for item in pending:
        if item.queue in tree:
            pending_count[item.queue] = pending_count.get(item.queue, 0) + 1
    admitted = tree.roll_up(admitted_count, 0)
    waiting = tree.roll_up(pending_count, 0)
    return {
        name: QueueStatus(
            allocated={r: a for r, a in allocated[name].items() if a},
            pending=waiting[name],
            admitted=admitted[name],
        )
        for name in tree
    }
