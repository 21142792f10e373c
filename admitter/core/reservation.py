"""Starvation guard: a large gang must not wait forever behind a stream of small jobs.

The rule: once a funded workload has waited longer than `starvation_bound` and still does not
fit, the highest-ranked such workload gets nodes reserved for the rest of the cycle. Inside the
domain its required topology allows (the whole cluster without one), the nodes with the most
free capacity (counting what unfunded work holds as free: it yields at once) are picked until
their *allocatable* capacity could hold the gang; whatever is free on them is held back from
every later funded admission of the cycle, and what runs there from every later preemptor.
Unfunded work may use it meanwhile (the cycle releases the reservation before the unfunded
pass), because the gang evicts it the moment the rest of the nodes is free. Funded work
running there finishes or is preempted, nothing funded lands there, so free capacity
accumulates in one place until the gang fits. The choice is recomputed each cycle and is
stable, because reserved nodes only gain free capacity while other nodes keep being filled.
"""

from __future__ import annotations

from collections.abc import Mapping

from admitter.core.model import GPU, Node, PodSet, Workload
from admitter.core.nodes import ClusterState
from admitter.core.topology import Domain

RESERVATION_KEY = "\0reservation"


def reserve(state: ClusterState, nodes: dict[str, Node], workload: Workload,
            displaceable: dict[str, int]) -> list[str]:
    """Hold free capacity on enough nodes for `workload` and return them, most free first;
    none when no domain could ever hold it. `displaceable` is GPUs held by unfunded work per
    node."""
    chosen = _nodes_for(state, nodes, workload, displaceable)
    free = {name: state.free(name) for name in chosen}
    held = [name for name in chosen if any(free[name].values())]
    if chosen:
        state.assume(
            RESERVATION_KEY,
            [PodSet(name, 1, free[name]) for name in held],
            [{name: 1} for name in held],
        )
    return chosen


def describe(workload: Workload, chosen: list[str]) -> str:
    return f"{len(chosen)} node(s) reserved for {workload.key}: {', '.join(chosen[:4])}" + (
        ", …" if len(chosen) > 4 else "")


def _nodes_for(state: ClusterState, nodes: dict[str, Node], workload: Workload,
               displaceable: dict[str, int]) -> list[str]:
    level = workload.topology.required
    domains: list[Domain] = state.tree.domains(level) if level else [state.tree.root]
    gpu = state.resource_index(GPU)

    def free_gpus(domain: Domain) -> int:
        return 0 if gpu is None else sum(row[gpu] for row in domain.free)

    # Domains by an upper bound of their score, best first: the exact score (which counts
    # displaceable GPUs on picked nodes only) is computed until no bound can beat the best.
    bounded = sorted(((free_gpus(d) + sum(displaceable.get(n, 0) for n in d.nodes), d.order, d)
                      for d in domains), key=lambda item: (-item[0], item[1]))
    best: tuple[int, int, list[str]] | None = None
    for bound, order, domain in bounded:
        if best is not None and (bound, -order) < (best[0], -best[1]):
            break
        picked = _enough(state, nodes, domain, workload, displaceable)
        if picked is None:
            continue
        score = free_gpus(domain) + sum(displaceable.get(name, 0) for name in picked)
        if best is None or score > best[0] or (score == best[0] and order < best[1]):
            best = (score, order, picked)
    return best[2] if best else []


def _enough(state: ClusterState, nodes: dict[str, Node], domain: Domain,
            workload: Workload, displaceable: dict[str, int]) -> list[str] | None:
    """The domain's nodes, most free GPUs first, until their allocatable holds every pod set."""
    ranked = sorted([(-state.free_of(n, GPU) - displaceable.get(n, 0), n) for n in domain.nodes])
    remaining = [pod_set.count for pod_set in workload.pod_sets]
    picked: list[str] = []
    for _, name in ranked:
        if not any(remaining):
            break
        node = nodes[name]
        spare = {r: a - node.used.get(r, 0) for r, a in node.allocatable.items()}
        took = False
        for index, pod_set in enumerate(workload.pod_sets):
            fit = _pods_on(spare, pod_set)
            take = min(fit, remaining[index])
            if take:
                remaining[index] -= take
                for resource, amount in pod_set.requests.items():
                    spare[resource] -= amount * take
                took = True
        if took:
            picked.append(name)
    return picked if not any(remaining) else None


def _pods_on(spare: Mapping[str, int], pod_set: PodSet) -> int:
    fit: int | None = None
    for resource, amount in pod_set.requests.items():
        if amount > 0:
            count = spare.get(resource, 0) // amount
            fit = count if fit is None else min(fit, count)
    return 0 if fit is None else max(fit, 0)
