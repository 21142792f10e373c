"""Where an admitted gang's pods count, once kube-scheduler has had its say.

An admission hints nodes, but only a domain is pinned (or nothing, without topology), so
kube-scheduler may bind a pod elsewhere: its default scoring spreads where the cycle packs.
Counting every pod at its hinted node then over-commits the nodes the scheduler chose and
shows their hinted nodes as free, and a node model that clamps each node at zero would
offer GPUs that do not exist (a restart burst admitted 34 two-GPU Jobs on 64 GPUs so).

So the model counts bound pods where they are bound (facts), nothing for pods that already ran
to completion (their Workload is marked finished a moment later), and each pod not yet bound where
the scheduler can still put it: at its hinted node while that has room, otherwise on the
first node of its admitted domain with room (which node matters less than that every pod is
counted once, and a first fit keeps settling linear in nodes and pods).
A pod with room nowhere stays at its hint: the over-commit is real then (something else
took the room) and the pod waits, bounded by the pods-ready timeout. What it holds beyond its
node is owed to it out of what stands free elsewhere (`ClusterState.owed`): the free GPUs of
other nodes, fragments too small for it, were otherwise admitted to others, and the GPUs
under admission outnumbered the cluster's (the fault soak: 68 on 64).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from admitter.core.model import Node, PodSet

Placement = tuple[Mapping[str, int], ...]
"""Pods per node, one mapping per pod set."""


@dataclass(slots=True)  # not frozen: see docs/admission-cycle.md, Speed
class AdmittedPods:
    """One admitted workload as the controller sees it."""

    key: str
    pod_sets: tuple[PodSet, ...]
    hinted: Placement
    """Where the admission assumed each pod set's pods."""
    bound: Placement
    """Where pods are bound now, per pod set (empty mappings while none is)."""
    domains: tuple[Mapping[str, str], ...]
    """Node labels each pod set's pods are pinned to (empty: anywhere)."""
    done: tuple[int, ...] = ()
    """Pods per pod set that ran to completion: they need no room any more (empty: none)."""


def settle(nodes: Sequence[Node], admitted: Sequence[AdmittedPods]) -> dict[str, Placement]:
    """The placement to count for every admitted workload whose pods are not all where
    their admission hinted; workloads absent from the result count as hinted."""
    free = {n.name: {r: q - n.used.get(r, 0) for r, q in n.allocatable.items()} for n in nodes}
    for workload in admitted:
        for pod_set, bound in zip(workload.pod_sets, workload.bound, strict=True):
            _take(free, bound, pod_set)
    settler = _Settler(free, {n.name: n for n in nodes})
    settled: dict[str, Placement] = {}
    for workload in sorted(admitted, key=lambda w: w.key):
        done = workload.done or (0,) * len(workload.pod_sets)
        placement = tuple(
            settler.place(pod_set, hinted, bound, domain, finished)
            for pod_set, hinted, bound, domain, finished in zip(
                workload.pod_sets, workload.hinted, workload.bound, workload.domains, done,
                strict=True))
        if any(p != h for p, h in zip(placement, workload.hinted, strict=True)):
            settled[workload.key] = placement
    return settled


class _Settler:
    """Free amounts left by bound pods, taken as unbound pods are placed."""

    def __init__(self, free: dict[str, dict[str, int]], nodes: Mapping[str, Node]) -> None:
        self.free = free
        self.nodes = nodes
        self._candidates: dict[tuple[object, ...], list[str]] = {}
        self._cursors: dict[tuple[object, ...], int] = {}

    def place(self, pod_set: PodSet, hinted: Mapping[str, int], bound: Mapping[str, int],
              domain: Mapping[str, str], done: int = 0) -> dict[str, int]:
        """Bound pods plus this pod set's pods still to be bound (neither bound nor done),
        each where it can still go."""
        placed = {node: count for node, count in bound.items() if count > 0}
        unbound = pod_set.count - sum(placed.values()) - done
        if unbound <= 0:
            return placed
        free, nodes = self.free, self.nodes

        def assume(node: str, count: int) -> None:
            nonlocal unbound
            if count > 0:
                placed[node] = placed.get(node, 0) + count
                _take(free, {node: count}, pod_set)
                unbound -= count

        still_hinted = {node: count - bound.get(node, 0) for node, count in sorted(hinted.items())
                        if count > bound.get(node, 0)}
        for node, count in still_hinted.items():
            if unbound > 0 and node in nodes and _accepts(nodes[node], pod_set, domain):
                assume(node, min(count, unbound, _fits(free[node], pod_set)))
        if unbound > 0:
            self._first_fit(pod_set, domain, unbound, assume)
        for node, count in still_hinted.items():  # no room anywhere: the hint stands
            if unbound > 0:
                assume(node, min(unbound, count - (placed.get(node, 0) - bound.get(node, 0))))
        return placed

    def _first_fit(self, pod_set: PodSet, domain: Mapping[str, str], unbound: int,
                   assume: Callable[[str, int], None]) -> None:
        """Fill the first nodes of the domain that take a pod, in name order. Free amounts
        only shrink within one settling, so a node that took no more pods of this shape
        never will: a cursor per shape skips it, and settling thousands of pods stays linear."""
        group = (tuple(sorted(domain.items())), pod_set.tolerations, pod_set.selection)
        candidates = self._candidates.get(group)
        if candidates is None:
            candidates = sorted(n.name for n in self.nodes.values()
                                if _accepts(n, pod_set, domain))
            self._candidates[group] = candidates
        shape = (group, tuple(sorted(pod_set.requests.items())))
        cursor = self._cursors.get(shape, 0)
        while unbound > 0 and cursor < len(candidates):
            fits = _fits(self.free[candidates[cursor]], pod_set)
            if fits == 0:
                cursor += 1
                continue
            take = min(unbound, fits)
            assume(candidates[cursor], take)
            unbound -= take
        self._cursors[shape] = cursor


def _take(free: dict[str, dict[str, int]], counts: Mapping[str, int], pod_set: PodSet) -> None:
    for node, count in counts.items():
        amounts = free.get(node)
        if amounts is None:
            continue  # a node gone from the snapshot; its pods with it
        for resource, quantity in pod_set.requests.items():
            amounts[resource] = amounts.get(resource, 0) - quantity * count


def _fits(free: Mapping[str, int], pod_set: PodSet) -> int:
    """How many more of the pod set's pods the node's free amounts hold."""
    fit = None
    for resource, quantity in pod_set.requests.items():
        if quantity <= 0:
            continue
        n = max(0, free.get(resource, 0)) // quantity
        fit = n if fit is None else min(fit, n)
    return pod_set.count if fit is None else fit


def _accepts(node: Node, pod_set: PodSet, domain: Mapping[str, str]) -> bool:
    if node.unschedulable or any(node.labels.get(k) != v for k, v in domain.items()):
        return False
    return pod_set.admits(node)
