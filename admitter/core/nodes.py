"""The node model: what every node still offers, as workloads are assumed and released.

A node offers its allocatable resources minus the pods admitter does not manage (`Node.used`)
minus every admitted workload's pods, bound or merely assumed, so two workloads admitted in one
cycle never count the same free GPUs. Cordoned nodes offer nothing; nodes with a NoSchedule or
NoExecute taint offer nothing to pods that do not tolerate it (nodes are grouped into taint
classes so a pod set's usable nodes are a short tuple of class ids), and nodes its nodeSelector
or required node affinity rejects offer nothing to a pod set (the nodes each distinct selection
admits are computed once per snapshot).

The model keeps no log: within a cycle every change goes through the cycle's `Statement`
(`statement`), which can undo it; a change made here directly is kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from admitter.core.fit import Demand, Shape
from admitter.core.model import (
    ANYWHERE,
    BLOCKING_EFFECTS,
    GPU,
    Node,
    NodeSelection,
    PodSet,
    ShapeKey,
    Taint,
    Toleration,
    Workload,
    recorded_placements,
    tolerates_all,
)
from admitter.core.topology import DomainTree, spans_clusters

Holding = tuple[tuple[int, tuple[int, ...]], ...]

class _Unknown:
    """A shape not met yet (`ClusterState.demand`: None is a known answer)."""


_UNKNOWN = _Unknown()
"""What one workload holds: (node index, amount per resource) for every node it uses."""


class ClusterState:
    """Free capacity per node and per topology domain for one snapshot.

    `levels` are the Topology's node-label keys, coarsest first (`kubernetes.io/hostname`, if
    listed, must be last; each node is its own host domain either way); when the nodes,
    cordoned or not, name more than one cluster, the cluster is a level above them
    (`topology.spans_clusters`), and stays one while a whole cluster is cordoned.
    `admitted` workloads are assumed at construction from `Workload.pod_set_placements` (or
    `placement` when they have one pod set).
    Pods on nodes missing from the snapshot are ignored (the node and its pods are gone), as
    are requests for resources a node does not have.
    """

    def __init__(self, nodes: Sequence[Node], levels: Sequence[str] = (),
                 admitted: Iterable[Workload] = ()) -> None:
        ordered = sorted(nodes, key=lambda n: n.name)
        self._nodes, self._levels = ordered, tuple(levels)
        self._idle: ClusterState | None = None
        self.never: dict[object, str | None] = {}
        """On an `idle` model: why a workload shape fits nowhere, None if it fits (the cycle's
        `_never_fits` fills it; kept as long as the model)."""
        self.names: tuple[str, ...] = tuple(n.name for n in ordered)
        if len(set(self.names)) != len(self.names):
            raise ValueError("node names must be unique")
        self._index = {name: i for i, name in enumerate(self.names)}
        self.resources: tuple[str, ...] = tuple(sorted(
            {r for n in ordered for r in (*n.allocatable, *n.used)}, key=lambda r: (r != GPU, r)))
        """Every resource any node has, GPU first: the order that ranks domains and nodes."""
        self._resource_index = {r: i for i, r in enumerate(self.resources)}
        self._raw = [[n.allocatable.get(r, 0) - n.used.get(r, 0) for r in self.resources]
                     for n in ordered]
        self._capacity = [sum(row[r] for i, row in enumerate(self._raw)
                              if row[r] > 0 and not ordered[i].unschedulable)
                          for r in range(len(self.resources))]
        self._held: dict[str, Holding] = {}
        for workload in admitted:  # subtracted before the tree sums anything: one pass
            holding = self._holding(workload.pod_sets, recorded_placements(workload))
            if workload.key in self._held:
                raise ValueError(f"workload {workload.key} is already assumed")
            self._held[workload.key] = holding
            for node, amounts in holding:
                raw = self._raw[node]
                for resource, amount in enumerate(amounts):
                    raw[resource] -= amount
        self._owed = [sum(-row[r] for row in self._raw if row[r] < 0)
                      for r in range(len(self.resources))]
        """Per resource, what admitted pods hold beyond their nodes' amounts (`owed`)."""
        schedulable = {i: n for i, n in enumerate(ordered) if not n.unschedulable}
        self._schedulable = schedulable
        taint_sets = {i: _blocking(n.taints) for i, n in schedulable.items()}
        self.class_taints: tuple[tuple[Taint, ...], ...] = tuple(
            sorted({(), *taint_sets.values()}, key=lambda ts: [_taint_key(t) for t in ts]))
        """Blocking taints of each taint class; class 0 is the untainted one."""
        class_of = {taints: c for c, taints in enumerate(self.class_taints)}
        sizes = Counter(taint_sets.values())
        self.class_sizes = tuple(sizes[taints] for taints in self.class_taints)
        """Schedulable nodes in each taint class."""
        self.tree = DomainTree(levels, schedulable,
                               {i: class_of[t] for i, t in taint_sets.items()},
                               len(self.class_taints),
                               {i: [a if a > 0 else 0 for a in self._raw[i]]
                                for i in schedulable},
                               len(self.resources), spans_clusters(ordered))
        self._tolerated: dict[tuple[Toleration, ...], tuple[int, ...]] = {}
        self._selected: dict[NodeSelection, frozenset[int]] = {}
        self._shapes: dict[tuple[object, ...], Shape | None] = {}
        self._demands: dict[ShapeKey, Demand | None] = {}

    def idle(self) -> ClusterState:
        """These nodes with nothing running on them (no admitted work, no pods admitter does
        not manage) and none cordoned: what only a change to the nodes themselves can turn.
        Built on first use and kept with this model, so a model kept between cycles
        (`incremental.IncrementalCore`) builds it once per change of the nodes."""
        if self._idle is None:
            self._idle = ClusterState([replace(node, used={}, unschedulable=False)
                                       for node in self._nodes], self._levels)
        return self._idle

    def node_index(self, name: str) -> int:
        return self._index[name]

    def resource_index(self, resource: str) -> int | None:
        return self._resource_index.get(resource)

    def free(self, node: str) -> dict[str, int]:
        """What the node offers a pod that tolerates its taints; nothing when cordoned."""
        i = self._index[node]
        schedulable = i in self.tree.leaves
        return {r: max(0, amount) if schedulable else 0 for r, amount in zip(
            self.resources, self._raw[i], strict=True)}

    def free_of(self, node: str, resource: str) -> int:
        """`free(node)[resource]` without building the dict: rankings ask it per node."""
        i = self._index[node]
        index = self._resource_index.get(resource)
        if index is None or i not in self.tree.leaves:
            return 0
        amount = self._raw[i][index]
        return amount if amount > 0 else 0

    def offered(self, node: str, resource: str) -> int:
        """What `node` offers of `resource` with nothing admitted on it: allocatable less the
        pods admitter does not manage; nothing when cordoned."""
        node_model = self._schedulable.get(self._index[node])
        if node_model is None:
            return 0
        return max(0, node_model.allocatable.get(resource, 0) - node_model.used.get(resource, 0))

    def free_total(self, resource: str) -> int:
        """Free amount of `resource` over all schedulable nodes, whatever their taints."""
        index = self._resource_index.get(resource)
        return 0 if index is None else sum(row[index] for row in self.tree.root.free)

    def owed(self, resource: str) -> int:
        """How much of `resource` admitted pods count beyond what their nodes have: pods with
        room on no node, held at their hint (`settle`: kube-scheduler spread other pods into
        the room the model gave them). Until they bind, that much of what stands free
        elsewhere is theirs, or the GPUs admitted would outnumber the cluster's."""
        index = self._resource_index.get(resource)
        return 0 if index is None else self._owed[index]

    def schedulable_capacity(self) -> dict[str, int]:
        """Allocatable of schedulable nodes minus non-admitter pods: what queues can share."""
        return dict(zip(self.resources, self._capacity, strict=True))

    def tolerated(self, tolerations: tuple[Toleration, ...]) -> tuple[int, ...]:
        """Taint classes whose every blocking taint one of `tolerations` tolerates."""
        classes = self._tolerated.get(tolerations)
        if classes is None:
            classes = tuple(c for c, taints in enumerate(self.class_taints)
                            if tolerates_all(tolerations, taints))
            self._tolerated[tolerations] = classes
        return classes

    def selected(self, selection: NodeSelection) -> frozenset[int] | None:
        """Indices of the schedulable nodes `selection` matches; None for no selection."""
        if selection is ANYWHERE or selection == ANYWHERE:
            return None
        nodes = self._selected.get(selection)
        if nodes is None:
            nodes = self._selected[selection] = frozenset(
                i for i, node in self._schedulable.items() if selection.matches(node))
        return nodes

    def demand(self, workload: Workload) -> Demand | None:
        """A gang as an interned `Demand` (its shapes share memo ids with every other gang's);
        None when a pod asks for a resource no node has."""
        signature = workload.shape()
        known = self._demands.get(signature, _UNKNOWN)  # one lookup: a hit compares shapes
        if not isinstance(known, _Unknown):
            return known
        pod_sets = workload.pod_sets
        shapes = [shape for p in pod_sets if (shape := self._shape(p)) is not None]
        counts = [p.count for p in pod_sets]
        demand = (Demand.of(tuple(zip(shapes, counts, strict=True)), len(self._demands))
                  if len(shapes) == len(counts) else None)
        self._demands[signature] = demand
        return demand

    def _shape(self, pod_set: PodSet) -> Shape | None:
        signature = (tuple(pod_set.requests.items()), pod_set.tolerations,
                     pod_set.selection_key())
        if signature not in self._shapes:
            wanted = {r: q for r, q in pod_set.requests.items() if q > 0}
            self._shapes[signature] = None if any(
                r not in self._resource_index for r in wanted) else Shape(
                tuple(sorted((self._resource_index[r], q) for r, q in wanted.items())),
                self.tolerated(pod_set.tolerations), self.selected(pod_set.selection),
                len(self._shapes))
        return self._shapes[signature]

    def assumed(self, key: str) -> bool:
        return key in self._held

    def held_count(self) -> int:
        """How many keys hold capacity (workloads, and a reservation while one is held)."""
        return len(self._held)

    def assume(self, key: str, pod_sets: Sequence[PodSet],
               node_counts: Sequence[Mapping[str, int]]) -> Holding:
        """Hold `node_counts[i][node]` pods of `pod_sets[i]` on each node under `key`; returns
        what `key` now holds."""
        if key in self._held:
            raise ValueError(f"workload {key} is already assumed")
        holding = self._holding(pod_sets, node_counts)
        self.restore(key, holding)
        return holding

    def _holding(self, pod_sets: Sequence[PodSet],
                 node_counts: Sequence[Mapping[str, int]]) -> Holding:
        if len(pod_sets) != len(node_counts):
            raise ValueError("node_counts needs one mapping per pod set")
        per_node: dict[int, list[int]] = {}
        index, width = self._resource_index, len(self.resources)
        for pod_set, counts in zip(pod_sets, node_counts, strict=True):
            request = [(index[r], q) for r, q in pod_set.requests.items() if r in index]
            for name, count in counts.items():
                node = self._index.get(name)
                if node is None:
                    continue
                amounts = per_node.get(node)
                if amounts is None:
                    amounts = per_node[node] = [0] * width
                for resource, quantity in request:
                    amounts[resource] += quantity * count
        return tuple([(node, tuple(per_node[node])) for node in sorted(per_node)])

    def release(self, key: str) -> Holding:
        """Give back everything `key` holds, e.g. to simulate evicting it; returns it."""
        holding = self._held.pop(key)
        self._apply(holding, -1)
        return holding

    def restore(self, key: str, holding: Holding) -> None:
        """Hold `holding` under `key` again, as `release` returned it: the exact undo."""
        self._apply(holding, 1)
        self._held[key] = holding

    def _apply(self, holding: Holding, sign: int) -> None:
        """Subtract (sign 1) or add back (sign -1) a holding; domains see clamped changes."""
        leaves = self.tree.leaves
        changes: list[tuple[int, list[int]]] = []
        for node, amounts in holding:
            raw = self._raw[node]
            delta = [0] * len(amounts)
            for resource, amount in enumerate(amounts):
                if amount:
                    old = raw[resource]
                    raw[resource] = new = old - sign * amount
                    delta[resource] = (new if new > 0 else 0) - (old if old > 0 else 0)
                    if new < 0 or old < 0:
                        self._owed[resource] += (-new if new < 0 else 0) - (
                            -old if old < 0 else 0)
            if node in leaves:
                changes.append((node, delta))
        if changes:
            self.tree.update(changes)


def _blocking(taints: Iterable[Taint]) -> tuple[Taint, ...]:
    return tuple(sorted({t for t in taints if t.effect in BLOCKING_EFFECTS}, key=_taint_key))


def _taint_key(taint: Taint) -> tuple[str, str, str]:
    return taint.key, taint.value, taint.effect
