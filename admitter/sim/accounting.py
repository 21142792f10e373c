"""What the report compares, integrated over simulated time in GPU-seconds.

Delivered: the GPUs a leaf's funded workloads hold. Unfunded: what its unfunded ones hold.
Occupancy: GPUs held on schedulable nodes over the GPUs of schedulable nodes (a cordoned node
leaves both until it is uncordoned, even while it still drains). `capacity_time` is the run's
schedulable GPU-time, which `owed` divides among the teams once the run is over.

Every rate is piecewise constant between the simulator's moments, so the integrals are exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from admitter.core.model import GPU, Node, Workload
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
        self.tree = tree
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
        self._funded, self._unfunded = dict(zero), dict(zero)
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
        for leaf in self.leaves:
            self.delivered[leaf] += self._funded[leaf] * elapsed
            self.unfunded[leaf] += self._unfunded[leaf] * elapsed
        self.occupied += self._occupied * elapsed
        self.capacity_time += self.capacity * elapsed
        self._now = now

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
        self._changed = True

    def _mark(self) -> None:
        held = tuple(self._funded[leaf] + self._unfunded[leaf] for leaf in self.leaves)
        mark = Mark(self._now, held, self.capacity)
        if self.timeline and self.timeline[-1].at == self._now:
            self.timeline[-1] = mark
        else:
            self.timeline.append(mark)
        self._changed = False
