"""The domain tree: topology levels (coarsest first, host last) as nested node-label domains.

Built once per snapshot. A domain at level i is identified by the label values of levels 0..i,
so rack `r3` under block `b1` and rack `r3` under block `b2` are different racks, and the
affinity hint (all labels on the path) selects exactly the domain's nodes. A node that lacks a
level's label belongs to no domain of that level or any finer one: it hangs directly under its
deepest complete ancestor (ultimately the root), so only workloads with no constraint at
those levels can use it. Every schedulable node is its own host domain, a leaf.

Over a fleet (nodes whose `CLUSTER` labels name more than one cluster) the cluster is a level
above the Topology's: every gang lies inside one cluster, as a gang that requires a block lies
inside one block, whatever it asks for below (`DomainTree.enclosing`). A node that names no
cluster then belongs to none and takes no gang, as a node without a block label takes no gang
that requires a block. With one cluster, or none named, there is no cluster level at all.

Each domain keeps its free capacity per taint class and resource, summed over its nodes, and a
memo of fit queries (see `fit`); `DomainTree.update` keeps the sums current and drops the memos
on one leaf-to-root path, O(depth).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from admitter.core.model import Node

HOSTNAME = "kubernetes.io/hostname"
CLUSTER = "admitter.dev/cluster"
"""The node label naming the cluster a node belongs to, in a fleet of clusters."""


def spans_clusters(nodes: Iterable[Node]) -> bool:
    """Whether `nodes` name more than one cluster: a fleet, where no gang spans two."""
    named: set[str] = set()
    for node in nodes:
        cluster = node.labels.get(CLUSTER)
        if cluster is not None:
            named.add(cluster)
            if len(named) > 1:
                return True
    return False


def placement_levels(label_keys: Sequence[str], fleet: bool) -> tuple[str, ...]:
    """The levels placement uses: the Topology's with the host level last (`with_host_level`),
    under the cluster level over a fleet."""
    if not fleet:
        return with_host_level(label_keys)
    return (CLUSTER, *with_host_level([key for key in label_keys if key != CLUSTER]))


def enclosing_level(required: str | None, fleet: bool) -> str | None:
    """The level whose one domain a gang must lie in: the level it requires, else over a fleet
    the cluster, else none (the whole cluster)."""
    return CLUSTER if required is None and fleet else required


def with_host_level(label_keys: Sequence[str]) -> tuple[str, ...]:
    """The levels a Topology's node-label keys (coarsest first) give placement: the keys with
    the host level last, listed or not, since every node is a domain of its own. The one rule
    the webhook, the controller, the scenario loader and the domain tree share, so a level one
    accepts is never unknown to another."""
    if HOSTNAME in label_keys[:-1]:
        raise ValueError(f"{HOSTNAME} can only be the finest topology level")
    return (*[key for key in label_keys if key != HOSTNAME], HOSTNAME)


class Domain:
    """One domain: the root (level None), a label domain such as a rack, or a host leaf."""

    __slots__ = (
        "affinity", "children", "depth", "free", "level", "memo", "node", "nodes", "order",
        "parent", "taint_class", "value",
    )

    def __init__(self, level: str | None, value: str | None, depth: int,
                 affinity: dict[str, str], parent: Domain | None, classes: int,
                 resources: int) -> None:
        self.level = level
        self.value = value
        self.depth = depth
        """Index of `level` in `DomainTree.levels`; -1 for the root."""
        self.affinity = affinity
        """Labels that select exactly this domain's nodes: every level on its path."""
        self.parent = parent
        self.children: list[Domain] = []
        self.node = -1
        """Node index for a host leaf, -1 otherwise."""
        self.taint_class = -1
        """Taint class of a host leaf's node, -1 otherwise."""
        self.nodes: tuple[str, ...] = ()
        self.order = 0
        """Position in a deterministic depth-first walk; the last tie-break between domains."""
        self.free = [[0] * resources for _ in range(classes)]
        """Free amount per taint class and resource over the domain's nodes (never negative)."""
        self.memo: dict[int, Any] = {}
        """Fit query results (see `fit`) by query key, dropped whenever free capacity under it
        changes."""


class DomainTree:
    """Level → domains over the schedulable nodes, which `nodes` maps by node index, with
    each node's taint class and initial free amount per resource (never negative); `fleet`
    puts the cluster level above `levels` (`spans_clusters`)."""

    def __init__(self, levels: Sequence[str], nodes: Mapping[int, Node],
                 classes: Mapping[int, int], class_count: int,
                 offers: Mapping[int, Sequence[int]], resources: int,
                 fleet: bool = False) -> None:
        self.fleet = fleet
        self.levels: tuple[str, ...] = placement_levels(levels, fleet)
        label_levels = self.levels[:-1]
        self.depth = {level: depth for depth, level in enumerate(self.levels)}
        """Level → depth of its domains (the root is at -1)."""
        self.root = Domain(None, None, -1, {}, None, class_count, resources)
        self._query_keys: dict[Hashable, int] = {}
        self.leaves: dict[int, Domain] = {}
        self._by_level: dict[str, list[Domain]] = {level: [] for level in self.levels}
        index: dict[tuple[str, ...], Domain] = {}
        for node_index, node in nodes.items():
            parent = self.root
            path: tuple[str, ...] = ()
            for depth, key in enumerate(label_levels):
                if key not in node.labels:
                    break
                path = (*path, node.labels[key])
                child = index.get(path)
                if child is None:
                    affinity = {**parent.affinity, key: path[-1]}
                    child = Domain(key, path[-1], depth, affinity, parent, class_count, resources)
                    parent.children.append(child)
                    self._by_level[key].append(child)
                    index[path] = child
                parent = child
            host = node.labels.get(HOSTNAME, node.name)
            leaf = Domain(HOSTNAME, host, len(label_levels), {**parent.affinity, HOSTNAME: host},
                          parent, class_count, resources)
            leaf.node = node_index
            leaf.taint_class = classes[node_index]
            leaf.free[leaf.taint_class] = list(offers[node_index])
            leaf.nodes = (node.name,)
            parent.children.append(leaf)
            self._by_level[HOSTNAME].append(leaf)
            self.leaves[node_index] = leaf
        self._finish(self.root, 0)
        for domains in self._by_level.values():
            domains.sort(key=lambda d: d.order)

    def _finish(self, domain: Domain, order: int) -> int:
        """Sort children (label domains by value, then hosts by node name), number domains
        depth-first, collect node names and sum free capacity."""
        domain.order = order
        order += 1
        domain.children.sort(key=lambda d: (d.node >= 0, "" if d.node >= 0 else d.value, d.node))
        for child in domain.children:
            order = self._finish(child, order)
        if domain.children:
            domain.nodes = tuple(name for child in domain.children for name in child.nodes)
            domain.free = [
                list(map(sum, zip(*(child.free[c] for child in domain.children), strict=True)))
                for c in range(len(domain.free))]
        return order

    def query_key(self, query: Hashable) -> int:
        """A memo key for a fit query: negative, so it never meets a shape's own keys."""
        key = self._query_keys.get(query)
        if key is None:
            key = self._query_keys[query] = -1 - len(self._query_keys)
        return key

    def enclosing(self, required: str | None) -> str | None:
        """The level whose one domain a gang that requires `required` must lie in (None: the
        whole cluster); see `enclosing_level`."""
        return enclosing_level(required, self.fleet)

    def domains(self, level: str) -> list[Domain]:
        """Every domain of one level, in tree order."""
        return self._by_level[level]

    def update(self, changes: Sequence[tuple[int, Sequence[int]]]) -> None:
        """Add each (node, delta per resource) to the free capacity of the node's leaf and
        every domain above it, dropping their memos; a domain above several changed nodes (a
        gang's rack) is updated once with their summed delta."""
        if len(changes) == 1:
            node, delta = changes[0]
            leaf = self.leaves[node]
            row = leaf.taint_class
            domain: Domain | None = leaf
            while domain is not None:
                free = domain.free[row]
                for resource, amount in enumerate(delta):
                    free[resource] += amount
                domain.memo.clear()
                domain = domain.parent
            return
        rising: dict[tuple[Domain, int], list[int]] = {}
        for node, delta in changes:
            leaf = self.leaves[node]
            rising = _apply(leaf, leaf.taint_class, delta, rising)
        while rising:
            above: dict[tuple[Domain, int], list[int]] = {}
            for (domain, row), delta in rising.items():
                above = _apply(domain, row, delta, above)
            rising = above


def _apply(domain: Domain, row: int, delta: Sequence[int],
           above: dict[tuple[Domain, int], list[int]]) -> dict[tuple[Domain, int], list[int]]:
    """Add `delta` to one domain, drop its memo, and add it to the parent's pending sum."""
    free = domain.free[row]
    for resource, amount in enumerate(delta):
        free[resource] += amount
    domain.memo.clear()
    parent = domain.parent
    if parent is not None:
        total = above.get((parent, row))
        if total is None:
            above[parent, row] = list(delta)
        else:
            for resource, amount in enumerate(delta):
                total[resource] += amount
    return above
