"""Load a scenario file and check what one model alone cannot: the queue tree, references
between sections, and pods that no node could ever hold. Every problem names its path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from admitter.api.contract import max_runtime_problem
from admitter.api.convert import (
    core_queue,
    core_resources,
    effective_max_min_runtime,
    effective_max_runtime_ceiling,
    scenario_nodes,
    scenario_topology,
    topology_levels,
)
from admitter.api.duration import format_duration
from admitter.api.errors import InputError
from admitter.api.quantity import format_quantity
from admitter.api.scenario import NodeGroup, Scenario
from admitter.core.model import Node
from admitter.core.queue_tree import QueueTree, QueueTreeError
from admitter.core.topology import CLUSTER

Problem = tuple[str, str]


def load_scenario(path: str | Path) -> Scenario:
    """Parse and check a scenario file; raise InputError listing every problem."""
    source = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise InputError(source, [("(file)", error.strerror or str(error))]) from None
    except yaml.YAMLError as error:
        raise InputError(source, [("(yaml)", str(error).replace("\n", " "))]) from None
    return parse_scenario(data, source)


def parse_scenario(data: Any, source: str) -> Scenario:
    """Validate already-parsed YAML data (e.g. one case of a vectors file)."""
    if not isinstance(data, dict):
        raise InputError(source, [("(top level)", "a scenario is a mapping")])
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as error:
        raise InputError.from_validation(source, error) from None
    problems = list(_cross_check(scenario))
    if problems:
        raise InputError(source, problems)
    return scenario


def queue_tree(scenario: Scenario) -> QueueTree:
    """The scenario's queues as a core tree; file order is creation order."""
    return QueueTree(core_queue(q.name, q, order) for order, q in enumerate(scenario.queues))


def _cross_check(scenario: Scenario) -> Iterator[Problem]:
    names = [q.name for q in scenario.queues]
    try:
        tree = queue_tree(scenario)
    except QueueTreeError as error:
        index = names.index(error.queue_name)
        yield f"queues[{index}]", str(error)
        return
    fleet = list(_fleet_problems(scenario))
    yield from fleet
    try:
        nodes = scenario_nodes(scenario)
    except ValueError as error:
        yield "cluster.nodeGroups" if scenario.cluster else "clusters", str(error)
        return
    yield from _check_nodes(scenario)
    if fleet:
        return  # levels and nodes of a fleet whose clusters disagree mean nothing
    levels = topology_levels(scenario)
    for name in scenario.history:
        if name not in tree:
            yield f"history.{name}", f"unknown queue {name!r}"
    node_names = {node.name for node in nodes}
    for index, event in enumerate(scenario.events):
        for action, node in (("cordon", event.cordon), ("uncordon", event.uncordon)):
            if node is not None and node not in node_names:
                yield f"events[{index}].{action}", f"unknown node {node!r}"
    for index in range(len(scenario.workloads)):
        yield from _check_workload(scenario, tree, nodes, levels, index)


def _groups(scenario: Scenario) -> Iterator[tuple[str, NodeGroup]]:
    """Every node group with its path."""
    if scenario.cluster is not None:
        for index, group in enumerate(scenario.cluster.node_groups):
            yield f"cluster.nodeGroups[{index}]", group
    for position, member in enumerate(scenario.clusters):
        for index, group in enumerate(member.node_groups):
            yield f"clusters[{position}].nodeGroups[{index}]", group


def _check_nodes(scenario: Scenario) -> Iterator[Problem]:
    seen: dict[str, str] = {}
    for at, group in _groups(scenario):
        for index in range(group.count):
            name = f"{group.name_prefix}{index}"
            if name in seen:
                yield f"{at}.namePrefix", f"node name {name!r} is also produced by {seen[name]}"
            seen.setdefault(name, at)


def _fleet_problems(scenario: Scenario) -> Iterator[Problem]:
    """A fleet's clusters have distinct names, one hierarchy (a cluster may list no levels),
    and name themselves only through `name`."""
    names: dict[str, int] = {}
    topology = scenario_topology(scenario)
    for position, member in enumerate(scenario.clusters):
        at = f"clusters[{position}]"
        if member.name in names:
            yield (f"{at}.name",
                   f"cluster {member.name!r} is also clusters[{names[member.name]}]")
        names.setdefault(member.name, position)
        if member.topology and member.topology != topology:
            yield (f"{at}.topology",
                   f"{member.topology} differs from {topology}: a fleet has one hierarchy of "
                   "levels (a cluster may list none)")
        if CLUSTER in member.labels:
            yield (f"{at}.labels.{CLUSTER}",
                   f"{member.labels[CLUSTER]!r}: a cluster's nodes carry its name, set it there")
        for index, group in enumerate(member.node_groups):
            if CLUSTER in group.labels and group.labels[CLUSTER] != member.name:
                yield (f"{at}.nodeGroups[{index}].labels.{CLUSTER}",
                       f"{group.labels[CLUSTER]!r} is not the cluster's name {member.name!r}")


def _check_workload(
    scenario: Scenario, tree: QueueTree, nodes: list[Node], levels: tuple[str, ...], index: int
) -> Iterator[Problem]:
    workload = scenario.workloads[index]
    at = f"workloads[{index}]"
    if workload.queue not in tree:
        yield f"{at}.queue", f"unknown queue {workload.queue!r}"
    else:
        try:
            tree.validate_leaf(workload.queue)
        except QueueTreeError as error:
            yield f"{at}.queue", str(error)
        limit = effective_max_min_runtime(
            tree, workload.queue, scenario.settings.max_min_runtime
        )
        if workload.min_runtime > limit:
            yield (
                f"{at}.minRuntime",
                f"{format_duration(workload.min_runtime)} is above maxMinRuntime "
                f"{format_duration(limit)} of queue {workload.queue!r}",
            )
        if workload.max_runtime is not None:
            problem = max_runtime_problem(workload.max_runtime, workload.min_runtime,
                                          effective_max_runtime_ceiling(tree, workload.queue))
            if problem is not None:
                yield f"{at}.maxRuntime", f"{format_duration(workload.max_runtime)} {problem}"
    try:
        requests = core_resources(workload.pod_requests)
    except ValueError as error:
        yield f"{at}.podRequests", str(error)
        return
    for resource, amount in requests.items():
        largest = max(node.allocatable.get(resource, 0) for node in nodes)
        if amount > largest:
            yield (
                f"{at}.podRequests.{resource}",
                f"{format_quantity(workload.pod_requests[resource])} per pod, but the largest "
                f"node has {largest} {resource}: no node could ever hold this pod",
            )
    if not any(
        all(node.allocatable.get(r, 0) >= amount for r, amount in requests.items())
        for node in nodes
    ):
        yield f"{at}.podRequests", "no single node has all of these resources at once"
    if workload.topology is not None:
        where = "cluster's" if scenario.cluster is not None else "clusters'"
        for strength in ("required", "preferred"):
            level = getattr(workload.topology, strength)
            if level is not None and level not in levels:
                yield (
                    f"{at}.topology.{strength}",
                    f"{level!r} is not a level of the {where} topology ({', '.join(levels)})",
                )
