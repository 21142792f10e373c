"""Gang fit with topology: where a whole workload goes, or the one fact that blocks it.

A workload is placed all or nothing. Its topology request picks the levels to try: `required`
alone, or `preferred` first and then each coarser level up to `required` (or one cluster of a
fleet, or the whole cluster). At each level the fitting domain with the least free capacity
wins (bin-pack, keeps big domains whole), and inside it pods go to the most-allocated nodes
first. Pod sets are packed one after another in the chosen domain, each seeing the ones before
it as used. A pod set with a topology request of its own goes, by the same levels and the same
bin-pack, into one domain inside the workload's (a JobSet's workers in one rack, its leader
anywhere in the block); the first pod set's choice is not revisited for the next one. A
preferred level no finer than the required one adds nothing. See docs/gang-fit.md for why the
per-node floor sum is a sound check.
"""

from __future__ import annotations

from dataclasses import dataclass

from admitter.core.fit import Demand, Shape, capacity, fill, fits, free_key, largest, ranked
from admitter.core.model import NO_TOPOLOGY, PodSet, TopologyRequest, Workload
from admitter.core.nodes import ClusterState
from admitter.core.topology import CLUSTER, HOSTNAME, Domain, DomainTree

_TRIAL = "\0trial/"
"""Key prefix for pod sets assumed while `place` tries a domain; always rolled back."""


@dataclass(slots=True)  # not frozen: see docs/admission-cycle.md, Speed
class Placement:
    """The decision: a domain, the affinity that pins pods to it, and the assumed pod counts.

    `affinity` holds every topology label on the domain's path (empty for the whole cluster),
    to inject as a required nodeAffinity term; `node_counts[i]` maps node name to pods of pod
    set i, what `ClusterState.assume` takes; `pod_set_affinity[i]` is pod set i's own,
    narrower or the same.
    """

    domain_level: str | None
    domain_value: str | None
    affinity: dict[str, str]
    node_counts: tuple[dict[str, int], ...]
    pod_set_affinity: tuple[dict[str, str], ...]


@dataclass(slots=True)  # not frozen: see docs/admission-cycle.md, Speed
class PlacementFailure:
    """Why the workload does not fit now, naming the blocking fact."""

    reason: str


UNEXPLAINED = PlacementFailure("")
"""What `place` answers without `explain`: a search that only asks whether a plan fits (a
victim search, held capacity) discards the reason, and naming the blocking fact walks the
domains again (`_explain`)."""


def place(state: ClusterState, workload: Workload, explain: bool = True
          ) -> Placement | PlacementFailure:
    """Find a placement for every pod of `workload`; leaves `state` as it was. Without
    `explain`, a workload that fits no domain gets `UNEXPLAINED`."""
    demand = state.demand(workload)
    if demand is None:
        return PlacementFailure(_unknown_resource(state, workload))
    owed = _owed(state, workload)
    if owed is not None:
        return owed
    depths = _depths(state.tree, workload.topology)
    if isinstance(depths, PlacementFailure):
        return depths
    for pod_set in workload.pod_sets:
        if pod_set.topology is not NO_TOPOLOGY:
            unknown = _depths(state.tree, pod_set.topology)
            if isinstance(unknown, PlacementFailure):
                return PlacementFailure(_label(workload, pod_set.name) + unknown.reason)
    if fits(state.tree.root, demand):
        within = _within(state.tree, depths[-1])
        for depth in depths:
            for domain in ranked(state.tree, depth, within, demand):
                packed = _pack(state, workload, domain, demand)
                if packed is not None:
                    counts, affinities = packed
                    return Placement(domain.level, domain.value, dict(domain.affinity), counts,
                                     affinities)
    if not explain:
        return UNEXPLAINED
    return PlacementFailure(_explain(state, workload, demand, depths[-1]))


def _within(tree: DomainTree, required: int) -> int:
    """The depth whose one domain a placement must lie in: the required level's, but over a
    fleet, for a gang required on one host, the cluster's. Hazard: a host is its own host-level
    domain, so the host level alone let a host naming no cluster (hung under the root) take a
    gang, which over a fleet no host outside a cluster may."""
    return 0 if tree.fleet and required == len(tree.levels) - 1 else required


def _owed(state: ClusterState, workload: Workload) -> PlacementFailure | None:
    """Refused when what stands free, less what admitted pods with room nowhere are owed
    (`ClusterState.owed`), is less than the workload asks for."""
    for resource, amount in workload.requests().items():
        owed = state.owed(resource) if amount > 0 else 0
        if owed and state.free_total(resource) - owed < amount:
            return PlacementFailure(
                f"{owed} {resource} of the {state.free_total(resource)} idle are owed to "
                f"admitted pods that found room on no node; {amount} needed")
    return None


def _unknown_resource(state: ClusterState, workload: Workload) -> str:
    pod_set, resource = next((p, r) for p in workload.pod_sets for r, q in p.requests.items()
                             if q > 0 and state.resource_index(r) is None)
    return (f"{_label(workload, pod_set.name)}no node offers {pod_set.requests[resource]} "
            f"{resource} per pod; no node has {resource}")


def _depths(tree: DomainTree, request: TopologyRequest) -> list[int] | PlacementFailure:
    """Tree depths to try in order: preferred, coarser levels, down to required, else the
    cluster over a fleet, else the root."""
    depth = tree.depth
    for level in (request.required, request.preferred):
        if level is not None and level not in depth:
            return PlacementFailure(f"topology level {level} is not one of the cluster's "
                                    f"levels ({', '.join(tree.levels)})")
    enclosing = tree.enclosing(request.required)
    required = -1 if enclosing is None else depth[enclosing]
    preferred = required if request.preferred is None else depth[request.preferred]
    return list(range(max(preferred, required), required - 1, -1))


def _pack(state: ClusterState, workload: Workload, domain: Domain, demand: Demand,
          ) -> tuple[tuple[dict[str, int], ...], tuple[dict[str, str], ...]] | None:
    """Pack pod sets in turn into `domain` (each into its own domain inside it, if it asks
    for one), assuming each while packing the next: pods per node and the affinity of each.

    The trial holds are the one change to the node model that bypasses the cycle's `Statement`:
    they never outlive this call (each is released on the way out, whatever happens), so no
    log needs to see them."""
    trials: list[str] = []
    try:
        packed: list[dict[str, int]] = []
        affinities: list[dict[str, str]] = []
        for pod_set, (shape, count) in zip(workload.pod_sets, demand.pod_sets, strict=True):
            where: Domain | None = domain
            if pod_set.topology is not NO_TOPOLOGY:
                where = _inner_domain(state.tree, domain, pod_set, shape, count)
            if where is None or capacity(where, shape) < count:
                return None
            nodes = fill(where, shape, count) if count > 0 else {}
            packed.append({state.names[node]: nodes[node] for node in sorted(nodes)})
            affinities.append(dict(where.affinity))
            if len(packed) < len(demand.pod_sets):
                trials.append(f"{_TRIAL}{len(packed)}")
                state.assume(trials[-1], (pod_set,), (packed[-1],))
        return tuple(packed), tuple(affinities)
    finally:
        for key in reversed(trials):
            state.release(key)


def _inner_domain(tree: DomainTree, domain: Domain, pod_set: PodSet, shape: Shape,
                  count: int) -> Domain | None:
    """Where inside `domain` a pod set with a topology request of its own goes: its levels
    tried as a workload's are (preferred, then coarser down to required), at each the least
    free domain that holds it; `domain` itself once a level is no finer than it."""
    depths = _depths(tree, pod_set.topology)
    assert not isinstance(depths, PlacementFailure)  # place() checked every pod set's levels
    required = depths[-1]
    resources = tuple(resource for resource, _ in shape.request)
    for depth in depths:
        if depth <= domain.depth:
            if _ancestor(domain, depth) is not None and _ancestor(domain, required) is not None:
                return domain
            continue  # a host whose labels stop above the level
        inside = [d for d in tree.domains(tree.levels[depth])
                  if _ancestor(d, domain.depth) is domain
                  and _ancestor(d, required) is not None and capacity(d, shape) >= count]
        if inside:
            return min(inside, key=lambda d: (
                free_key(d, resources, shape.classes, shape.nodes), d.order))
    return None


def _ancestor(domain: Domain, depth: int) -> Domain | None:
    """The domain at `depth` that `domain` is or lies in (the root at -1); None for a host
    whose labels stop above that level."""
    found: Domain | None = domain
    while found is not None and found.depth > depth:
        found = found.parent
    return found if found is not None and found.depth == depth else None


def _explain(state: ClusterState, workload: Workload, demand: Demand, depth: int) -> str:
    """The first blocking fact: a pod no node takes, a gang the cluster cannot hold, or no
    domain of the required level (`depth`) that holds it. Over a fleet, what no cluster holds
    is told of the clusters, naming the one with the most room."""
    root = state.tree.root
    if not root.children:
        return "no schedulable node"
    for pod_set, (shape, count) in zip(workload.pod_sets, demand.pod_sets, strict=True):
        label = _label(workload, pod_set.name)
        if capacity(root, shape) == 0:
            return label + _no_node(state, shape)
        if capacity(root, shape) < count and not state.tree.fleet:
            return label + _short(state, shape, count, [root], None)
    inner = _inner_short(state, workload, demand)
    if inner is not None:
        return inner
    if depth < 0:
        return f"pod sets {', '.join(p.name for p in workload.pod_sets)} do not fit together"
    level = state.tree.levels[depth]
    domains = state.tree.domains(level)
    if not domains:
        return f"no node has the topology label {level}"
    for pod_set, (shape, count) in zip(workload.pod_sets, demand.pod_sets, strict=True):
        if max(capacity(d, shape) for d in domains) < count:
            return _label(workload, pod_set.name) + _short(state, shape, count, domains, level)
    names = ", ".join(p.name for p in workload.pod_sets)
    return f"{_none_of(state, level)} fits pod sets {names} together{_inside(state, level)}"


def _inner_short(state: ClusterState, workload: Workload, demand: Demand) -> str | None:
    """Why a pod set's own required level holds it nowhere, if no domain of it does."""
    for pod_set, (shape, count) in zip(workload.pod_sets, demand.pod_sets, strict=True):
        level = pod_set.topology.required
        if level is None:
            continue
        domains = state.tree.domains(level)
        if not domains:
            return f"{_label(workload, pod_set.name)}no node has the topology label {level}"
        if max(capacity(d, shape) for d in domains) < count:
            return _label(workload, pod_set.name) + _short(state, shape, count, domains, level)
    return None


def _no_node(state: ClusterState, shape: Shape) -> str:
    """Why no single node takes one pod of `shape`."""
    selected = shape.nodes
    if selected is not None and not selected:
        return "no schedulable node matches the pods' nodeSelector and required node affinity"
    if not any(state.class_sizes[c] for c in shape.classes) or (
            selected is not None and not any(state.tree.leaves[i].taint_class in shape.classes
                                             for i in selected)):
        which = "schedulable node" if selected is None else "node the pods' selection matches"
        return f"every {which} has a taint the pods do not tolerate"
    usable = _usable(state, shape)
    big = largest(state.tree, shape)
    for resource, amount in shape.request:
        if big[resource] < amount:
            return (f"no {usable} offers {amount} {state.resources[resource]} per pod;"
                    f" the largest node has {big[resource]}")
    return f"no {usable} offers {_pods(state, shape, 1)} at once"


def _usable(state: ClusterState, shape: Shape) -> str:
    """The nodes a shape may use, as a reason names them."""
    if shape.nodes is not None:
        return "node the pods' nodeSelector and affinity match"
    return "node" if len(shape.classes) == len(state.class_taints) else "node the pods tolerate"


def _short(state: ClusterState, shape: Shape, count: int, domains: list[Domain],
           level: str | None) -> str:
    """Why no domain of `level` (or the whole cluster, for None) holds `count` pods: the first
    resource short of the gang's total, else fragmentation across nodes."""
    where, has, fit = (("the cluster", "has", "fits") if shape.nodes is None
                       else ("the nodes the pods may use", "have", "fit"))
    for resource, amount in shape.request:
        most, _, largest = max((free_key(d, (resource,), shape.classes, shape.nodes)[0],
                                -d.order, d) for d in domains)
        total, name = amount * count, state.resources[resource]
        if most < total:
            if level is None:
                return (f"{where} {has} {most} free {name}; {_count(count)} × {amount} "
                        f"need {total}")
            return (f"{_none_of(state, level)} has {total} free {name}{_inside(state, level)} "
                    f"for {_count(count)} × {amount}; {_largest(state, most, largest)}")
    best, _, fullest = max((capacity(d, shape), -d.order, d) for d in domains)
    if level is None:
        return (f"free capacity is fragmented: {where} {fit} {best} of "
                f"{_pods(state, shape, count)}")
    return (f"{_none_of(state, level)} fits {_pods(state, shape, count)}"
            f"{_inside(state, level)}: free capacity is fragmented, the best fits {best}"
            f"{_in_cluster(state, fullest)}")


def _none_of(state: ClusterState, level: str) -> str:
    """Whose failure a reason tells: "no rack (…/rack)", or over a fleet "no cluster"."""
    return "no cluster" if state.tree.fleet else f"no {_noun(level)} ({level})"


def _inside(state: ClusterState, level: str) -> str:
    """Over a fleet, the level the gang must lie in inside a cluster: " in one rack (…)"."""
    if not state.tree.fleet or level == CLUSTER:
        return ""
    return f" in one {_noun(level)} ({level})"


def _largest(state: ClusterState, most: int, domain: Domain) -> str:
    """The most room a domain offers; over a fleet, in which cluster."""
    if not state.tree.fleet:
        return f"the largest has {most}"
    return f"the largest room is {most}{_in_cluster(state, domain)}"


def _in_cluster(state: ClusterState, domain: Domain) -> str:
    """Over a fleet, the cluster `domain` lies in: ", in cluster west"."""
    cluster = _ancestor(domain, 0) if state.tree.fleet else None
    return "" if cluster is None else f", in cluster {cluster.value}"


def _pods(state: ClusterState, shape: Shape, count: int) -> str:
    amounts = [f"{amount} {state.resources[r]}" for r, amount in shape.request]
    each = amounts[0] if len(amounts) == 1 else f"({', '.join(amounts)})"
    return f"{_count(count)} × {each}"


def _count(pods: int) -> str:
    return f"{pods} pod" if pods == 1 else f"{pods} pods"


def _noun(level: str) -> str:
    """`topology.admitter.dev/rack` reads as "rack"; the host level as "node"."""
    return "node" if level == HOSTNAME else level.rsplit("/", 1)[-1]


def _label(workload: Workload, pod_set: str) -> str:
    """Name the pod set in a reason only when there are several."""
    return f"pod set {pod_set}: " if len(workload.pod_sets) > 1 else ""
