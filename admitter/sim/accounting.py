"""What the report compares, integrated over simulated time in GPU-seconds.

Owed: each leaf's GPU fair share with kValue 0 (pure entitlement: quotas, weights, priorities,
no usage) over funded demand (pending and running funded workloads), of the schedulable
capacity. Delivered: the GPUs its funded workloads hold. Unfunded: what its unfunded ones hold.
Occupancy: GPUs held on schedulable nodes over the GPUs of schedulable nodes (a cordoned node
leaves both until it is uncordoned, even while it still drains).

Every rate is piecewise constant between the simulator's moments, so the integrals are exact.

Owed shares change only when demand or capacity does, and most demand changes cannot move
them: a queue that wants more than its share before and after the change (and every ancestor
likewise) is never satisfied in the division's rounds, so the division never reads how much
more it wants (`fairshare`: deserved is its quota, and each round it takes its floor and
stays wanting). Such changes keep the last division; the rest recompute it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from admitter.core.fairshare import compute_fair_share
from admitter.core.model import GPU, UNLIMITED, Node, Workload
from admitter.core.queue_tree import QueueTree


@dataclass(frozen=True, slots=True)
class Mark:
    """From `at` until the next mark: GPUs held per leaf (in `leaves` order) and capacity."""

    at: float
    held: tuple[int, ...]
    capacity: int


class Accounting:
    """Call `advance(now)` before changing anything at `now`; the change then counts from now."""

    def __init__(self, tree: QueueTree, nodes: Iterable[Node]) -> None:
        self._tree = tree
        self.leaves = tree.leaves()
        self._node_gpus = {node.name: node.allocatable.get(GPU, 0) for node in nodes}
        self._cordoned: set[str] = set()
        self._on_node: dict[str, int] = {}
        self.gpus = sum(self._node_gpus.values())
        """GPUs of every node, cordoned or not."""
        self.capacity = self.gpus
        """GPUs of schedulable nodes."""
        self._occupied = 0
        """GPUs held on schedulable nodes."""
        zero = dict.fromkeys(self.leaves, 0)
        self._funded, self._unfunded, self._demand = dict(zero), dict(zero), dict(zero)
        self._share: dict[str, int] = dict(zero)
        self._share_stale = False
        self._requestable: dict[str, int] = dict.fromkeys(tree, 0)
        """Per queue (parents too), what the last division saw it request, kept current while
        demand changes leave that division standing."""
        self._divided: dict[str, int] = dict.fromkeys(tree, 0)
        """Per queue, its share in the last division."""
        self._unlimited = {leaf: all(tree.queue(name).knobs(GPU).limit == UNLIMITED
                                     for name in tree.path(leaf)) for leaf in self.leaves}
        """Leaves with no GPU limit on their path, where a queue requests all it demands."""
        self.owed = dict.fromkeys(self.leaves, 0.0)
        self.delivered = dict.fromkeys(self.leaves, 0.0)
        self.unfunded = dict.fromkeys(self.leaves, 0.0)
        self.occupied = 0.0
        self.capacity_time = 0.0
        self.timeline: list[Mark] = []
        self._now = 0.0
        self._changed = True

    def advance(self, now: float) -> None:
        """Integrate the current rates from the last moment up to `now`."""
        if self._changed:
            self._mark()
        elapsed = now - self._now
        if elapsed <= 0:
            return
        if self._share_stale:
            self._share = self._entitlement()
            self._share_stale = False
        for leaf in self.leaves:
            self.owed[leaf] += self._share[leaf] * elapsed
            self.delivered[leaf] += self._funded[leaf] * elapsed
            self.unfunded[leaf] += self._unfunded[leaf] * elapsed
        self.occupied += self._occupied * elapsed
        self.capacity_time += self.capacity * elapsed
        self._now = now

    def demand(self, workload: Workload, sign: int) -> None:
        """A funded workload joins (1) or leaves (-1) the demand that owed shares divide."""
        if workload.funded:
            gpus = sign * workload.requests().get(GPU, 0)
            self._demand[workload.queue] += gpus
            if not self._share_stale and not self._keeps_shares(workload.queue, gpus):
                self._share_stale = True

    def hold(self, workload: Workload, nodes: Mapping[str, int], sign: int) -> None:
        """A workload starts (1) or stops (-1) holding its pods' GPUs on `nodes`."""
        per_pod = workload.pod_sets[0].requests.get(GPU, 0)
        total = 0
        for node, pods in nodes.items():
            gpus = sign * pods * per_pod
            self._on_node[node] = self._on_node.get(node, 0) + gpus
            if node not in self._cordoned:
                self._occupied += gpus
            total += pods * per_pod
        held = self._funded if workload.funded else self._unfunded
        held[workload.queue] += sign * total
        self._changed = True

    def cordon(self, node: str, cordoned: bool) -> None:
        """The node leaves (or rejoins) the schedulable capacity, with what it holds."""
        if cordoned == (node in self._cordoned):
            return
        sign = -1 if cordoned else 1
        if cordoned:
            self._cordoned.add(node)
        else:
            self._cordoned.discard(node)
        self.capacity += sign * self._node_gpus[node]
        self._occupied += sign * self._on_node.get(node, 0)
        self._share_stale = self._changed = True

    def _mark(self) -> None:
        held = tuple(self._funded[leaf] + self._unfunded[leaf] for leaf in self.leaves)
        mark = Mark(self._now, held, self.capacity)
        if self.timeline and self.timeline[-1].at == self._now:
            self.timeline[-1] = mark
        else:
            self.timeline.append(mark)
        self._changed = False

    def _keeps_shares(self, leaf: str, change: int) -> bool:
        """Whether `change` GPUs more demand on `leaf` leaves the last division standing (see
        the module's docstring); if so, the requests it saw are updated."""
        if not change or not self._unlimited[leaf]:
            return not change
        path = self._tree.path(leaf)
        for name in path:
            share, requested = self._divided[name], self._requestable[name]
            if requested <= share or requested + change <= share:
                return False
        for name in path:
            self._requestable[name] += change
        return True

    def _entitlement(self) -> dict[str, int]:
        demand = {leaf: {GPU: gpus} for leaf, gpus in self._demand.items() if gpus > 0}
        fair = compute_fair_share(self._tree, {GPU: self.capacity}, demand, {}, 0.0)
        for name in self._tree:
            division = fair.of(name, GPU)
            self._divided[name], self._requestable[name] = division.fair_share, division.requestable
        return {leaf: self._divided[leaf] for leaf in self.leaves}
