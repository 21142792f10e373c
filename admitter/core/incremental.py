"""The decision core kept between cycles, fed events.

`run_cycle` builds everything from a snapshot: the queue tree, the waiting lists sorted per
leaf, the demand summed, the node model with every admitted workload assumed, the allocation
sums. On a cluster where thousands wait and a cycle follows each change, that rebuild is paid
again for every workload each cycle. `IncrementalCore` keeps them instead, changed by what
happened since the last cycle (a workload added, changed or gone; the nodes or the queues
replaced), and hands them to the same cycle (`cycle.run_kept_cycle`), which rolls its own
changes back. Its decisions are exactly `run_cycle`'s on the equivalent snapshot
(`snapshot`): `tests/core/test_incremental.py` runs random event sequences through both.
When nothing changed since a cycle that admitted and evicted nothing, and time crossed none of
the moments its answer depends on, that answer stands and no workload is tried again
(`standstill`): every event that changes something is counted, and a cycle reuses the last
answer only while the count, the usage, the short jobs' GPUs and the settings are the same.

Hazards, named where they are handled:
- A waiting list must stay in queue order (`workload_key`) with every insertion and removal,
  and positions are recounted for each leaf that changed, before the next cycle reads them.
- Demand must be exactly what a scan sums: a resource a funded workload names with amount 0
  still appears (fair share divides every resource that appears), so each resource keeps a
  count of the workloads naming it and leaves only when the last one does.
- The node model and the allocations hold exactly the admitted workloads; a workload that
  changes is taken out with what it held before and put back as it is now.
- Replacing the queues re-arranges everything (leaves may appear or go); replacing the nodes
  rebuilds the node model only.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter

from admitter.core.cycle import run_kept_cycle
from admitter.core.cycle_state import CycleInputs
from admitter.core.decisions import CycleResult, CycleSettings, Snapshot
from admitter.core.model import Node, Phase, Queue, Workload, recorded_placements
from admitter.core.nodes import ClusterState
from admitter.core.queue_order import workload_key
from admitter.core.queue_tree import QueueTree
from admitter.core.quota import Allocations
from admitter.core.standstill import Standing

_BY_KEY = attrgetter("key")


class IncrementalCore:
    """What cycles decide on, kept current by events between them (module docstring)."""

    tree: QueueTree
    node_model: ClusterState
    """Holds every admitted workload."""
    allocations: Allocations
    """Sums the admitted workloads of leaf queues."""
    _funded: dict[str, list[Workload]]
    """Per leaf, pending funded workloads in queue order; `_unfunded` likewise."""
    _unfunded: dict[str, list[Workload]]
    _position: dict[str, int]
    _dirty: set[str]
    """Leaves whose positions are to be recounted before the next cycle."""
    _admitted: dict[str, Workload]
    _admitted_sorted: list[Workload] | None
    """`_admitted` by key, until it changes."""
    _holding: dict[str, Workload]
    _invalid: dict[str, Workload]
    _demand: dict[str, dict[str, int]]
    _naming: dict[str, dict[str, int]]
    """Per leaf and resource, how many funded workloads name it (see the hazards)."""

    def __init__(self, nodes: Sequence[Node], topology: Sequence[str],
                 queues: Sequence[Queue], settings: CycleSettings,
                 workloads: Iterable[Workload] = ()) -> None:
        self.settings = settings
        self._nodes = tuple(nodes)
        self._topology = tuple(topology)
        self._queues = tuple(queues)
        self._workloads: dict[str, Workload] = {w.key: w for w in workloads}
        self._stale = False
        """Whether a `decide` failed before its end (see there)."""
        self._changes = 0
        """Events that changed something; a cycle's answer stands only while this holds."""
        self._standing: Standing | None = None
        """The last cycle's answer, if it admitted and evicted nothing (`standstill`)."""
        self._arrange()

    # Events -------------------------------------------------------------------------------

    def put(self, workload: Workload) -> None:
        """A workload arrived, or changed (admitted, evicted, requeued, edited). One equal to
        the known one changes nothing: the controller translates each new version of a
        Workload object afresh, and most versions change only what the core does not read (the
        status it wrote itself), which must not keep an answer from standing."""
        known = self._workloads.get(workload.key)
        if known is workload or known == workload:
            return
        if known is not None:
            self._leave(known)
        self._changes += 1
        self._workloads[workload.key] = workload
        self._enter(workload)

    def remove(self, key: str) -> None:
        """A workload finished or was deleted; unknown keys are ignored."""
        known = self._workloads.pop(key, None)
        if known is not None:
            self._changes += 1
            self._leave(known)

    def set_nodes(self, nodes: Sequence[Node]) -> None:
        """The nodes changed (added, removed, cordoned, relabelled): the node model is rebuilt
        around the admitted workloads."""
        self._nodes = tuple(nodes)
        self._changes += 1
        self.node_model = ClusterState(self._nodes, self._topology, self._holding.values())

    def set_queues(self, queues: Sequence[Queue]) -> None:
        """The queues changed: the tree and everything arranged by leaf are rebuilt."""
        self._queues = tuple(queues)
        self._arrange()

    def sync(self, snapshot: Snapshot) -> None:
        """Become `snapshot` (its workloads, nodes and queues). Objects are compared identity
        first, so a caller that keeps its objects between snapshots pays for what changed."""
        queues, nodes = tuple(snapshot.queues), tuple(snapshot.nodes)
        if queues != self._queues or tuple(snapshot.topology) != self._topology:
            self._topology = tuple(snapshot.topology)
            self._workloads = {w.key: w for w in snapshot.workloads}
            self._nodes = nodes
            self.set_queues(queues)
            return
        self._queues = queues
        if nodes != self._nodes:
            self.set_nodes(nodes)
        self._nodes = nodes
        seen: set[str] = set()
        for workload in snapshot.workloads:
            seen.add(workload.key)
            self.put(workload)
        for key in [key for key in self._workloads if key not in seen]:
            self.remove(key)

    # Cycles -------------------------------------------------------------------------------

    def cycle(self, now: float, usage: Mapping[str, float] | None = None,
              short_gpus: float = 0.0) -> CycleResult:
        """One cycle at `now`, with the window's usage per leaf and short jobs' mean GPUs as
        in `Snapshot`: the decisions `run_cycle(self.snapshot(now, usage, short_gpus))` makes.
        The last answer, if it stands (`standstill`), without trying anything again."""
        usage = {} if usage is None else usage
        standing = self._standing
        if standing is not None and standing.stands_at(self._changes, now, usage, short_gpus,
                                                       self.settings):
            return standing.result_at(now)
        for leaf in self._dirty:  # positions first: the cycle reads them
            self._count_positions(leaf)
        self._dirty.clear()
        if self._admitted_sorted is None:
            self._admitted_sorted = sorted(self._admitted.values(), key=_BY_KEY)
        inputs = CycleInputs(self._funded, self._unfunded, self._position,
                             self._admitted_sorted, list(self._holding.values()),
                             list(self._invalid.values()), self._demand)
        moment = Snapshot(now, self._nodes, self._topology, self._queues, (), usage,
                          self.settings, short_gpus)
        result = run_kept_cycle(moment, self.tree, inputs, self.node_model, self.allocations)
        self._standing = None if result.admissions or result.evictions else Standing(
            result, self._changes, now, dict(usage), short_gpus, self.settings, inputs)
        return result

    def decide(self, snapshot: Snapshot) -> CycleResult:
        """`sync` to `snapshot`, then its cycle: `run_cycle`'s signature, for a caller that
        builds snapshots (the controller). Hazard: an error halfway through `sync` (a snapshot
        the node model refuses) would leave the kept state half changed, so the next call
        rebuilds it from its snapshot instead."""
        if self._stale:
            self._queues = ()  # `sync` rebuilds everything when the queues differ
        self._stale = True
        self.settings = snapshot.settings
        self.sync(snapshot)
        result = self.cycle(snapshot.now, snapshot.usage, snapshot.short_gpus)
        self._stale = False
        return result

    def snapshot(self, now: float, usage: Mapping[str, float] | None = None,
                 short_gpus: float = 0.0) -> Snapshot:
        """The snapshot a from-scratch cycle would need to decide as `cycle` does."""
        return Snapshot(now, self._nodes, self._topology, self._queues,
                        tuple(self._workloads.values()), {} if usage is None else usage,
                        self.settings, short_gpus)

    # Keeping it current -------------------------------------------------------------------

    def _arrange(self) -> None:
        self._changes += 1
        self.tree = QueueTree(self._queues)
        leaves = self.tree.leaves()
        self._funded = {leaf: [] for leaf in leaves}
        self._unfunded = {leaf: [] for leaf in leaves}
        self._position = {}
        self._dirty = set()
        self._admitted = {}
        self._admitted_sorted = None
        self._holding = {}
        self._invalid = {}
        self._demand = {}
        self._naming = {}
        self.node_model = ClusterState(self._nodes, self._topology)
        self.allocations = Allocations(self.tree)
        for workload in self._workloads.values():
            self._enter(workload)

    def _enter(self, workload: Workload) -> None:
        leaf = workload.queue
        queued = leaf in self._funded
        if workload.phase is Phase.ADMITTED:
            self._holding[workload.key] = workload
            self.node_model.assume(workload.key, workload.pod_sets,
                                   recorded_placements(workload))
            if queued:
                self._admitted[workload.key] = workload
                self._admitted_sorted = None
                self.allocations.add(workload)
        elif workload.phase is Phase.PENDING:
            if queued:
                insort(self._waiting(workload), workload, key=workload_key)
                self._dirty.add(leaf)
            else:
                self._invalid[workload.key] = workload
        if queued and workload.funded:
            self._count_demand(workload, 1)

    def _leave(self, workload: Workload) -> None:
        leaf = workload.queue
        queued = leaf in self._funded
        if workload.phase is Phase.ADMITTED:
            del self._holding[workload.key]
            self.node_model.release(workload.key)
            if queued:
                del self._admitted[workload.key]
                self._admitted_sorted = None
                self.allocations.remove(workload)
        elif workload.phase is Phase.PENDING:
            if queued:
                waiting = self._waiting(workload)
                at = bisect_left(waiting, workload_key(workload), key=workload_key)
                if waiting[at] is not workload:
                    raise ValueError(f"workload {workload.key} is not where its queue "
                                     "order puts it")
                del waiting[at]
                self._position.pop(workload.key, None)
                self._dirty.add(leaf)
            else:
                del self._invalid[workload.key]
        if queued and workload.funded:
            self._count_demand(workload, -1)

    def _waiting(self, workload: Workload) -> list[Workload]:
        return (self._funded if workload.funded else self._unfunded)[workload.queue]

    def _count_demand(self, workload: Workload, sign: int) -> None:
        leaf = workload.queue
        sums = self._demand.get(leaf)
        if sums is None:
            sums = self._demand[leaf] = {}
            self._naming[leaf] = {}
        naming = self._naming[leaf]
        for resource, amount in workload.requests().items():
            left = naming.get(resource, 0) + sign
            if left:
                naming[resource] = left
                sums[resource] = sums.get(resource, 0) + sign * amount
            else:
                del naming[resource]
                del sums[resource]

    def _count_positions(self, leaf: str) -> None:
        position = self._position
        merged = heapq.merge(self._funded[leaf], self._unfunded[leaf], key=workload_key)
        for i, workload in enumerate(merged, 1):
            position[workload.key] = i

