"""From API objects to the decision core's plain values: the one place units are resolved."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal

from admitter.api.clusterqueue import ClusterQueueSpec
from admitter.api.quantity import to_base_units
from admitter.api.scenario import ClusterSpec, Scenario
from admitter.api.settings import FairShareSettings, Settings
from admitter.api.topology import HOSTNAME_LABEL
from admitter.core.decisions import CycleSettings
from admitter.core.model import FairShareSettings as CoreFairShareSettings
from admitter.core.model import Node, Queue, ResourceQuota, Taint
from admitter.core.policy import ShortJobs, TimeSlicing
from admitter.core.queue_tree import QueueTree
from admitter.core.topology import CLUSTER, with_host_level


def core_resources(amounts: Mapping[str, Decimal]) -> dict[str, int]:
    """Integer base units per resource (millicores for cpu)."""
    return {name: to_base_units(name, amount) for name, amount in amounts.items()}


def core_fair_share_settings(settings: FairShareSettings) -> CoreFairShareSettings:
    return CoreFairShareSettings(settings.window, settings.half_life, settings.k_value)


def core_cycle_settings(settings: Settings) -> CycleSettings:
    """The knobs the cycle reads, from the controller's settings or a scenario's alike: a new
    knob of the cycle is one more line here, not one per caller."""
    return CycleSettings(
        fair_share=core_fair_share_settings(settings.fair_share),
        starvation_bound=settings.starvation_bound,
        pods_ready_timeout=settings.pods_ready_timeout,
        non_preemptible_priority=settings.non_preemptible_priority,
        short_jobs=ShortJobs(settings.short_jobs.max_min_runtime, settings.short_jobs.max_gpus,
                             settings.short_jobs.least_room_fraction),
        time_slicing=TimeSlicing(settings.time_slicing.swap_margin,
                                 settings.time_slicing.non_resumable_gap),
    )


def _knob(resource: str, amount: Decimal) -> int:
    return -1 if amount == -1 else to_base_units(resource, amount)


def core_queue(name: str, spec: ClusterQueueSpec, order: int) -> Queue:
    """A ClusterQueue spec as the core sees it; `order` is its creation rank."""
    return Queue(
        name=name,
        parent=spec.parent,
        priority=spec.priority,
        resources={
            resource: ResourceQuota(
                quota=_knob(resource, knobs.quota),
                limit=_knob(resource, knobs.limit),
                over_quota_weight=knobs.over_quota_weight,
            )
            for resource, knobs in spec.resources.items()
        },
        order=order,
        max_min_runtime=spec.max_min_runtime,
        max_runtime_ceiling=spec.max_runtime_ceiling,
    )


def effective_max_min_runtime(tree: QueueTree, queue: str, default: float) -> float:
    """The nearest `maxMinRuntime` on the path to the root, else the cluster default."""
    found = _nearest(tree, queue, lambda q: q.max_min_runtime)
    return default if found is None else found


def effective_max_runtime_ceiling(tree: QueueTree, queue: str) -> float | None:
    """The nearest `maxRuntimeCeiling` on the path to the root; None: no ceiling."""
    return _nearest(tree, queue, lambda q: q.max_runtime_ceiling)


def _nearest(tree: QueueTree, queue: str,
             value: Callable[[Queue], float | None]) -> float | None:
    """A bound a queue inherits: its own, else its parent's, up to the root."""
    for name in tree.path(queue)[::-1]:
        found = value(tree.queue(name))
        if found is not None:
            return found
    return None


def scenario_topology(scenario: Scenario) -> list[str]:
    """The scenario's Topology node-label keys: its cluster's, or the one list a fleet's
    clusters share (a cluster may list none; `scenario_file` checks the rest agree)."""
    if scenario.cluster is not None:
        return scenario.cluster.topology
    return next((member.topology for member in scenario.clusters if member.topology), [])


def topology_levels(scenario: Scenario) -> tuple[str, ...]:
    """The scenario's topology levels, by the rule the controller applies to a Topology."""
    return with_host_level(scenario_topology(scenario))


def cluster_levels(topologies: Mapping[str, Sequence[str]]) -> tuple[str, ...] | None:
    """The levels Jobs may name, from every Topology's node-label keys by name: admitter keeps
    one hierarchy, the first Topology's by name (the webhook and the controller both ask
    here, so a level the webhook accepts is one the controller places by). None without any
    Topology."""
    if not topologies:
        return None
    return with_host_level(topologies[min(topologies)])


def scenario_nodes(scenario: Scenario) -> list[Node]:
    """Expand node groups into named nodes carrying their hostname label; over a fleet, each
    node also carries its cluster's labels (a group's own win) and its name (`CLUSTER`)."""
    if scenario.cluster is not None:
        return _group_nodes(scenario.cluster, {}, {})
    return [node for member in scenario.clusters
            for node in _group_nodes(member, member.labels, {CLUSTER: member.name})]


def _group_nodes(cluster: ClusterSpec, shared: Mapping[str, str],
                 fixed: Mapping[str, str]) -> list[Node]:
    nodes = []
    for group in cluster.node_groups:
        allocatable = core_resources(group.capacity)
        taints = tuple(Taint(t.key, t.value, t.effect) for t in group.taints)
        for index in range(group.count):
            name = f"{group.name_prefix}{index}"
            labels = {**shared, **group.labels, **fixed, HOSTNAME_LABEL: name}
            nodes.append(Node(name=name, allocatable=allocatable, labels=labels, taints=taints))
    return nodes
