"""Draining for a starving gang: a large gang must not wait forever behind a stream of small jobs,
nor hoard idle GPUs while it waits.

The cycle picks the gang (`steps.step3_drain_for_starving`); here the nodes are chosen and held.
Inside the domain its required topology allows (without one, a cluster of a fleet or the whole
cluster), the domain cheapest to empty for this gang wins: the most GPUs that are free or that its
drain could take now (unfunded
work's, and what the eviction rule lets a drain take past its min runtime,
`eviction.EvictionRule.drain_takes`: a domain full of better-ranked work would empty only as that
work finishes);
a domain that could not be emptied even once every protection ends (long non-resumable,
non-preemptible or better-ranked work holds too much; see `EvictionRule.drain_waits_for`) is not
chosen. In the domain, nodes that could be emptied come first, those with the most such GPUs first,
and are picked until their allocatable capacity could hold the gang (`_enough`). Whatever is free
on them is then held back from every long funded admission of the cycle (short jobs come before it,
and unfunded work may use it: the gang evicts it at once). Nothing long lands there but work that
cannot delay the gang (`backfill`), and occupants leave as their protections end, so the choice is
stable: the chosen nodes only gain free capacity while other nodes keep being filled. Nothing is
held for a gang the short jobs' room would keep off the chosen nodes (`Headroom.refuses_on`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping

from admitter.core.eviction import EvictionRule
from admitter.core.model import GPU, Node, PodSet, Workload, held_per_node
from admitter.core.nodes import ClusterState
from admitter.core.statement import Statement
from admitter.core.topology import Domain

RESERVATION_KEY = "\0reservation"


def choose(state: ClusterState, nodes: dict[str, Node], workload: Workload,
           displaceable: dict[str, int], drainable: dict[str, int]) -> list[str]:
    """The nodes to drain for `workload`, most free first; none when no domain could ever hold
    it. `displaceable` is GPUs per node a drain could take now, `drainable` those it could take
    once protections end: a domain where free and drainable GPUs together fall short of the
    gang (non-resumable or non-preemptible work holds the rest) would stand idle for as long
    as that work runs, and is not chosen."""
    return _nodes_for(state, nodes, workload, displaceable, drainable)


def drainable_gpus(running: Iterable[Workload], unfunded: dict[str, int], now: float,
                   takes: Callable[[Workload], bool], waits_for: Callable[[Workload], bool],
                   alike: Callable[[Workload], Hashable]
                   ) -> tuple[dict[str, int], dict[str, int]]:
    """GPUs per node a drain for a gang could take now: unfunded work's (`unfunded_gpus`), and
    the funded work past its min runtime that it `takes` (`EvictionRule.drain_takes`); and
    what leaves once every protection has ended: what it takes, and what it `waits_for`
    besides (`EvictionRule.drain_waits_for`). The two maps `choose` reads, in one pass.

    Both questions read of a funded workload only what `alike` keys (`drain_alike`), and the
    ranking they ask does not move during the pass: each is asked once per such key, not once
    per running workload (thousands run, of far fewer kinds and teams)."""
    now_held, later_held = dict(unfunded), dict(unfunded)
    judged: dict[Hashable, tuple[bool, bool]] = {}
    for workload in running:
        until = workload.protected_until()
        if until is None:  # unfunded work too: `unfunded` counts it
            continue
        key = alike(workload)
        judgement = judged.get(key)
        if judgement is None:
            taken = takes(workload)
            judgement = judged[key] = taken, taken or waits_for(workload)
        taken, leaves = judgement
        if not leaves:
            continue
        per_node = held_per_node(workload, GPU)
        for node, gpus in per_node.items():
            later_held[node] = later_held.get(node, 0) + gpus
        if taken and until <= now:
            for node, gpus in per_node.items():
                now_held[node] = now_held.get(node, 0) + gpus
    return now_held, later_held


def drain_alike(rule: EvictionRule, gang: Workload
                ) -> Callable[[Workload], tuple[bool, str, int, int, int]]:
    """What the questions of a drain for `gang` (`EvictionRule.drain_takes` and
    `drain_waits_for`) read of a funded running workload: whether it is of the gang's queue,
    the side its queue compares on with the gang's in the ranking (`Ranking.side`: where their
    paths diverge, so every leaf under another team compares alike), its priority, GPUs and
    kind (which holds whether it is short, resumable and preemptible). Workloads alike in these
    get the same answers while the ranking stands."""
    ranking, kind, queue = rule.ranking, rule.kind, gang.queue
    sides: dict[str, str] = {}

    def alike(workload: Workload) -> tuple[bool, str, int, int, int]:
        side = sides.get(workload.queue)
        if side is None:
            side = sides[workload.queue] = ranking.side(workload.queue, queue)
        return (workload.queue == queue, side, workload.priority,
                workload.requests().get(GPU, 0), kind(workload))

    return alike


def unfunded_gpus(running: Iterable[Workload]) -> dict[str, int]:
    """GPUs per node held by unfunded work, which yields to any funded workload at once."""
    held: dict[str, int] = {}
    for workload in running:
        if not workload.funded:
            for node, gpus in held_per_node(workload, GPU).items():
                held[node] = held.get(node, 0) + gpus
    return held


def hold(statement: Statement, chosen: list[str]) -> None:
    """Hold what is free on `chosen` (as `RESERVATION_KEY`, released by the caller through the
    same statement)."""
    free = {name: statement.nodes.free(name) for name in chosen}
    held = [name for name in chosen if any(free[name].values())]
    statement.assume(
        RESERVATION_KEY,
        [PodSet(name, 1, free[name]) for name in held],
        [{name: 1} for name in held],
    )


def describe(workload: Workload, chosen: list[str]) -> str:
    return f"{len(chosen)} node(s) reserved for {workload.key}: {', '.join(chosen[:4])}" + (
        ", …" if len(chosen) > 4 else "")


def _nodes_for(state: ClusterState, nodes: dict[str, Node], workload: Workload,
               displaceable: dict[str, int], drainable: dict[str, int]) -> list[str]:
    level = state.tree.enclosing(workload.topology.required)
    domains: list[Domain] = state.tree.domains(level) if level else [state.tree.root]
    gpu = state.resource_index(GPU)

    def free_gpus(domain: Domain) -> int:
        return 0 if gpu is None else sum(row[gpu] for row in domain.free)

    # Domains by an upper bound of their score, best first: the exact score (which counts
    # displaceable GPUs on picked nodes only) is computed until no bound can beat the best.
    need = workload.requests().get(GPU, 0)
    bounded = sorted(((free_gpus(d) + sum(displaceable.get(n, 0) for n in d.nodes), d.order, d)
                      for d in domains
                      if free_gpus(d) + sum(drainable.get(n, 0) for n in d.nodes) >= need),
                     key=lambda item: (-item[0], item[1]))
    best: tuple[int, int, list[str]] | None = None
    for bound, order, domain in bounded:
        if best is not None and (bound, -order) < (best[0], -best[1]):
            break
        picked = _enough(state, nodes, domain, workload, displaceable, drainable)
        if picked is None:
            continue
        score = free_gpus(domain) + sum(displaceable.get(name, 0) for name in picked)
        if best is None or score > best[0] or (score == best[0] and order < best[1]):
            best = (score, order, picked)
    return best[2] if best else []


def _enough(state: ClusterState, nodes: dict[str, Node], domain: Domain, workload: Workload,
            displaceable: dict[str, int], drainable: dict[str, int]) -> list[str] | None:
    """The domain's nodes until their allocatable holds every pod set: first those that could
    be emptied (every GPU in use there `drainable`), then those holding work that stays; in
    each group, most free and displaceable GPUs first. A node whose work the drain neither
    takes nor waits for (long non-resumable, better-ranked, non-preemptible) keeps the gang
    waiting for as long as that work runs, while the idle GPUs held beside it stand unused;
    the domain's emptiable nodes, held instead, only gain free capacity until the gang fits."""
    ranked: list[tuple[bool, int, str]] = []
    for name in domain.nodes:
        node, free = nodes[name], state.free_of(name, GPU)
        staying = (node.allocatable.get(GPU, 0) - node.used.get(GPU, 0) - free
                   - drainable.get(name, 0))
        ranked.append((staying > 0, -free - displaceable.get(name, 0), name))
    ranked.sort()
    remaining = [pod_set.count for pod_set in workload.pod_sets]
    picked: list[str] = []
    for _, _, name in ranked:
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
                    if amount:  # a request of 0 may name a resource the node lacks
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
