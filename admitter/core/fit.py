"""Gang-fit queries over the domain tree, memoised per domain until its free capacity changes.

Each query is an exact reduction over a domain's subtree: how many identical pods fit (a sum of
per-node floors: the "largest gang that fits"), the most-allocated node that still takes a pod
and the best-fitting domain of a level (minima); the largest free amount on one node, which only
explains a failure, is a scan of the nodes memoised at the root.
An assume or release drops the memos on one leaf-to-root path only, so the next query for a
shape recomputes O(depth × fan-out) entries per changed path and reads the rest, and a gang
that cannot fit anywhere is rejected from the root's memo in O(1). (Adjusting memos eagerly
on every change measured slower: it pays for shapes that are not asked about again.)

Memo keys are small ints (hashing a nested tuple on every read was a fifth of a cycle): a
shape's capacity query uses 2·`Shape.id`, its first-node query 2·id + 1 (written inline: a
property call costs more than the read), a best-domain query the negative key
`DomainTree.query_key` interns for (depth, within, demand).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

from admitter.core.topology import Domain, DomainTree

UNBOUNDED = 1 << 62
"""Pods that fit on a node when the pod requests nothing the node tracks."""


_UNKNOWN: Final = object()
"""A memo miss, where None is a known answer (nothing fits): one lookup instead of two."""

Ranked = tuple[tuple[int, ...], int, Domain]
"""A target domain with its sort key (free amounts, least first) and a unique tie-break
(domain order, or node index for hosts so equal nodes go by name)."""


class Shape(NamedTuple):
    """One pod: requests as (resource index, amount) in index order, which is significance
    order (GPU first), the taint classes whose nodes it may use, the node indices its node
    selection admits (None: every node), and an id for memos (`ClusterState.demand` interns
    shapes)."""

    request: tuple[tuple[int, int], ...]
    classes: tuple[int, ...]
    nodes: frozenset[int] | None
    id: int


class Demand(NamedTuple):
    """A gang: (shape, count) per pod set; the resources, taint classes and nodes that rank
    domains for it (bin-pack key); `id` identifies it in memos."""

    pod_sets: tuple[tuple[Shape, int], ...]
    resources: tuple[int, ...]
    classes: tuple[int, ...]
    nodes: frozenset[int] | None
    id: int

    @classmethod
    def of(cls, pod_sets: tuple[tuple[Shape, int], ...], id: int) -> Demand:
        selected = [shape.nodes for shape, _ in pod_sets]
        nodes = (None if any(s is None for s in selected)
                 else frozenset().union(*[s for s in selected if s is not None]))
        return cls(pod_sets, tuple(sorted({r for shape, _ in pod_sets for r, _ in shape.request})),
                   tuple(sorted({c for shape, _ in pod_sets for c in shape.classes})), nodes, id)


def _floor(leaf: Domain, shape: Shape) -> int:
    """Pods of `shape` that fit on one node: the minimum over resources of free // request."""
    if leaf.taint_class not in shape.classes or (
            shape.nodes is not None and leaf.node not in shape.nodes):
        return 0
    free = leaf.free[leaf.taint_class]
    fit = UNBOUNDED
    for resource, amount in shape.request:
        room = free[resource] // amount
        if room < fit:
            fit = room
    return fit


def capacity(domain: Domain, shape: Shape) -> int:
    """Pods of `shape` that fit in the domain: the per-node floors summed. Children's memos
    are read inline (no call per host) because refilling a rack's sum is the hot loop."""
    key = 2 * shape.id
    fit: int | None = domain.memo.get(key)
    if fit is None:
        if domain.node >= 0:
            fit = _floor(domain, shape)
        else:
            fit = 0
            for child in domain.children:
                known = child.memo.get(key)
                fit += capacity(child, shape) if known is None else known
        domain.memo[key] = fit
    return fit


def fits(domain: Domain, demand: Demand) -> bool:
    """Every pod set fits on its own; exact for one pod set, necessary for several."""
    for shape, count in demand.pod_sets:  # noqa: SIM110 (a generator costs 2x here)
        if capacity(domain, shape) < count:
            return False
    return True


def free_key(domain: Domain, resources: tuple[int, ...], classes: tuple[int, ...],
             nodes: frozenset[int] | None) -> tuple[int, ...]:
    """The domain's free amounts of `resources` on nodes of `classes` (and among `nodes`, when
    given: summed over those leaves, since the domain keeps sums per taint class only)."""
    if nodes is not None:
        total = [0] * len(resources)
        for leaf in _leaves(domain):
            if leaf.node in nodes and leaf.taint_class in classes:
                free = leaf.free[leaf.taint_class]
                for i, resource in enumerate(resources):
                    total[i] += free[resource]
        return tuple(total)
    if len(classes) == 1:
        free = domain.free[classes[0]]
        return tuple([free[r] for r in resources])
    return tuple([sum(domain.free[c][r] for c in classes) for r in resources])


def _leaves(domain: Domain) -> Iterator[Domain]:
    if domain.node >= 0:
        yield domain
    for child in domain.children:
        yield from _leaves(child)


def first_node(domain: Domain, shape: Shape) -> Ranked | None:
    """The most-allocated host (least free, then by name) that takes one more pod."""
    key = 2 * shape.id + 1
    known = domain.memo.get(key, _UNKNOWN)
    if known is not _UNKNOWN:
        result: Ranked | None = known
        return result
    best: Ranked | None = None
    if domain.node < 0:
        for child in domain.children:
            rank = child.memo.get(key, _UNKNOWN)
            if rank is _UNKNOWN:
                rank = first_node(child, shape)
            if rank is not None and (best is None or rank < best):
                best = rank
    elif capacity(domain, shape) > 0:
        free = domain.free[domain.taint_class]
        best = tuple([free[r] for r, _ in shape.request]), domain.node, domain
    domain.memo[key] = best
    return best


def best_domain(domain: Domain, key: int, depth: int, within: int,
                demand: Demand) -> Ranked | None:
    """Among domains at `depth` under this one that fit and lie inside a domain at depth
    `within` (a host whose labels stop above that level does not), the least free one;
    memoised under `key` (`DomainTree.query_key(depth, within, demand.id)`)."""
    memo = domain.memo
    known = memo.get(key, _UNKNOWN)
    if known is not _UNKNOWN:
        result: Ranked | None = known
        return result
    best: Ranked | None = None
    if domain.depth == depth:
        inside = domain.parent is None or not domain.parent.depth < within < depth
        if inside and fits(domain, demand):
            best = (free_key(domain, demand.resources, demand.classes, demand.nodes),
                    domain.order, domain)
    elif domain.depth < depth and fits(domain, demand):
        for child in domain.children:
            rank = child.memo.get(key, _UNKNOWN)
            if rank is _UNKNOWN:
                rank = best_domain(child, key, depth, within, demand)
            if rank is not None and (best is None or rank < best):
                best = rank
    memo[key] = best
    return best


def largest(tree: DomainTree, shape: Shape) -> tuple[int, ...]:
    """The largest free amount of each resource on any one node the shape may use. Asked only
    to explain a failure, so a scan of the nodes (refilling a memo in every domain on the
    first ask cost ten times the scan), remembered in the root's memo, which any change of
    free capacity drops."""
    key = tree.query_key(("largest", shape.classes, -1 if shape.nodes is None else shape.id))
    known: tuple[int, ...] | None = tree.root.memo.get(key)
    if known is not None:
        return known
    classes, nodes = shape.classes, shape.nodes
    frees = [leaf.free[leaf.taint_class] for leaf in tree.leaves.values()
             if leaf.taint_class in classes and (nodes is None or leaf.node in nodes)]
    # Column by column: one comparison loop per resource inside `max`, not one per amount.
    columns = zip(*frees, strict=True)
    known = tree.root.memo[key] = tuple([max(0, *column) for column in columns]
                                        ) if frees else (0,) * len(tree.root.free[0])
    return known


def ranked(tree: DomainTree, depth: int, within: int, demand: Demand) -> Iterator[Domain]:
    """Domains at `depth`, inside one at depth `within`, that fit `demand`, least free first
    (bin-pack), lazily."""
    key = tree.query_key((depth, within, demand.id))
    return _ascending(tree.root, lambda d: best_domain(d, key, depth, within, demand))


def fill(domain: Domain, shape: Shape, count: int) -> dict[int, int]:
    """Pods per node index, packing most-allocated nodes first; needs capacity >= count."""
    if domain.node >= 0 and 0 < count <= capacity(domain, shape):
        return {domain.node: count}  # a host: no nodes to rank (most pod sets are placed so)
    counts: dict[int, int] = {}
    for leaf in _ascending(domain, lambda d: first_node(d, shape)):
        counts[leaf.node] = take = min(count, capacity(leaf, shape))
        count -= take
        if count == 0:
            return counts
    raise ValueError("fill() called on a domain without room for the pod set")


def _ascending(root: Domain, best: Callable[[Domain], Ranked | None]) -> Iterator[Domain]:
    """Targets in ascending `best` order. The first comes straight from the root's memo; the
    rest from a best-first walk keyed by each subtree's best target, which opens only the
    subtrees it needs."""
    rank = best(root)
    if rank is None:
        return
    first = rank[2]
    yield first
    heap: list[tuple[Ranked, Domain]] = [(rank, root)]
    while heap:
        (_, _, target), domain = heapq.heappop(heap)
        if domain is target:
            if target is not first:
                yield target
            continue
        for child in domain.children:
            rank = best(child)
            if rank is not None:
                heapq.heappush(heap, (rank, child))
