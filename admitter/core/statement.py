"""The cycle's one operation log: every virtual allocation and eviction, with one checkpoint and
one rollback (KAI's `framework/statement.go`).

A cycle decides on three things that must agree at every step: the node model (where capacity
is free, `nodes.ClusterState`), the books per queue (what every queue's subtree holds and what
its funded work holds, `quota.Allocations`) and the short jobs' headroom (GPUs held by unfunded
work, `headroom.Headroom`). Each change goes through one `Statement`, which applies it to all
that it concerns and logs it; `rollback(mark)` undoes everything since `checkpoint()`, newest
first, so a preemption search that proves nothing leaves no trace, and `run_kept_cycle` hands back
the kept node model and allocations exactly as it got them. (Kueue's `SimulateUsageAddition`
returns its own undo; here a mark is the undo of everything after it.)

Hazards:
- A change made on the node model or the allocations directly, not through the statement, is
  not undone by a rollback: a caller that keeps them between cycles (the simulator) would then
  see a failed search's evictions as real, and the next cycle would be refused (its admitted
  workloads no longer match) or, worse, decide on capacity that does not exist; and a logged
  change undone after an unlogged one on the same key fails (releasing what is not held).
  Outside a cycle (the simulator applying decisions) changes go to the models directly, and
  nothing rolls them back. Inside, the one exception is `placement`'s trial holds, released
  before `place` returns.
- An admitted workload must be both assumed (node model) and counted (books, headroom), or
  neither, whenever the cycle reads the state. `allocate` and `evict` do both; the halves exist
  for the preemption search, which asks the books first (cheap) and touches the node model only
  once they allow it, and which leaves no half-done workload behind (it rolls back or
  completes each victim).
- The headroom's count of yielding GPUs (`headroom.yielded_gpus`) moves with the books: evicting
  yielding work frees GPUs on the node model but shrinks that count by as much, so the pool
  (free plus yielding) does not grow; a change that skipped the count would let a long start
  take the short jobs' GPUs.
- Marks are positions in the log: rolling back to a mark undoes every later mark too, so an
  inner mark must be rolled back (or abandoned) before an outer one, never after.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from admitter.core.headroom import Headroom
from admitter.core.model import PodSet, Workload
from admitter.core.nodes import ClusterState, Holding
from admitter.core.quota import Allocations

_NO_HOLDING: Holding = ()

Entry = tuple[int, str, Holding, Workload | None]
"""One logged change: sign (1 added, -1 taken away), key, what the key holds on the node model
(node-model changes) and the workload (changes to the books; None for node-model changes)."""


class Statement:
    """The node model, the allocations and the headroom's count, changed together under one
    log. `headroom` is None where nothing reads it (a caller that only keeps the models)."""

    def __init__(self, nodes: ClusterState, allocations: Allocations,
                 headroom: Headroom | None = None) -> None:
        self.nodes = nodes
        self.allocations = allocations
        self.headroom = headroom
        self._log: list[Entry] = []

    # Whole workloads -----------------------------------------------------------------------

    def allocate(self, workload: Workload, node_counts: Sequence[Mapping[str, int]]) -> None:
        """`workload` starts with `node_counts[i][node]` pods of pod set i on each node."""
        self.assume(workload.key, workload.pod_sets, node_counts)
        self.count(workload)

    def evict(self, workload: Workload) -> None:
        """`workload` stops: everything it holds is given back."""
        self.release(workload.key)
        self.uncount(workload)

    # The node model alone ------------------------------------------------------------------

    def assume(self, key: str, pod_sets: Sequence[PodSet],
               node_counts: Sequence[Mapping[str, int]]) -> None:
        """Hold capacity under `key` on the node model: a workload's pods (the first half of
        `allocate`) or capacity held for no workload (a drain's reservation)."""
        holding = self.nodes.assume(key, pod_sets, node_counts)
        self._log.append((1, key, holding, None))

    def release(self, key: str) -> None:
        """Give back what `key` holds on the node model."""
        holding = self.nodes.release(key)
        self._log.append((-1, key, holding, None))

    # The books alone -----------------------------------------------------------------------

    def count(self, workload: Workload) -> None:
        """Count `workload` as holding its requests in its queues (and in the headroom)."""
        self._book(workload, 1)
        self._log.append((1, workload.key, _NO_HOLDING, workload))

    def uncount(self, workload: Workload) -> None:
        self._book(workload, -1)
        self._log.append((-1, workload.key, _NO_HOLDING, workload))

    def _book(self, workload: Workload, sign: int) -> None:
        self.allocations.add(workload, sign)
        if self.headroom is not None:
            self.headroom.change(workload, sign)

    # The log -------------------------------------------------------------------------------

    def checkpoint(self) -> int:
        """A mark to roll back to: the number of changes so far."""
        return len(self._log)

    def rollback(self, mark: int) -> None:
        """Undo every change since `mark`, newest first."""
        log = self._log
        if mark > len(log):
            raise ValueError(f"mark {mark} is past the log's {len(log)} changes: an inner mark "
                             "rolled back after an outer one")
        while len(log) > mark:
            sign, key, holding, workload = log.pop()
            if workload is not None:
                self._book(workload, -sign)
            elif sign > 0:
                self.nodes.release(key)
            else:
                self.nodes.restore(key, holding)
