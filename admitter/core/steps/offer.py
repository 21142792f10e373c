"""Offering capacity to waiting work: the loop the admitting steps share.

Leaf by leaf, best-ranked allocation first (`selection.QueueSelector`), each workload once, in
queue order. A failed attempt changes no queue's allocation, so the leaf stays the best one:
its workloads are tried one after another until one is admitted, and only then is the best leaf
asked for again (the admission, and any eviction it made, moved the ranking).
"""

from __future__ import annotations

from collections.abc import Callable

from admitter.core.cycle_state import CycleState
from admitter.core.model import GPU, Workload
from admitter.core.selection import QueueSelector

Work = dict[str, list[Workload]]
"""Per leaf, workloads in queue order."""


def serve(cycle: CycleState, work: Work, try_one: Callable[[Workload], bool],
          once_gpus_run_out: Callable[[Work], Work] | None = None) -> None:
    """Offer capacity to `work`, admitting through `try_one` (True once admitted). With
    `once_gpus_run_out` (only where nothing is evicted): once no GPU is idle, what is left is
    passed through it (it names the reason without a search) and served what it keeps."""
    cursor = dict.fromkeys(work, 0)
    selector = QueueSelector(cycle.tree, cycle.ranking, cycle.usage, cycle.ledger,
                             [leaf for leaf, ws in work.items() if ws], cycle.standing)
    while (leaf := selector.best()) is not None:
        workloads, at = work[leaf], cursor[leaf]
        admitted = False
        while at < len(workloads) and not admitted:
            evictions = len(cycle.evictions)
            admitted = try_one(workloads[at])
            at += 1
        cursor[leaf] = at
        if admitted:
            selector.refresh(leaf)
            for eviction in cycle.evictions[evictions:]:
                selector.refresh(eviction.queue)
            if once_gpus_run_out is not None and cycle.state.free_total(GPU) == 0:
                rest = {name: ws[cursor[name]:] for name, ws in work.items()}
                serve(cycle, once_gpus_run_out(rest), try_one)
                return
        if at == len(workloads):
            selector.retire(leaf)
