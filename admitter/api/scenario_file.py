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
    topology_levels,
)
from admitter.api.duration import format_duration
from admitter.api.errors import InputError
from admitter.api.quantity import format_quantity
from admitter.api.scenario import Scenario
from admitter.core.model import Node
from admitter.core.queue_tree import QueueTree, QueueTreeError

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
    try:
        nodes = scenario_nodes(scenario.cluster)
    except ValueError as error:
        yield "cluster.nodeGroups", str(error)
        return
    yield from _check_nodes(nodes)
    levels = topology_levels(scenario.cluster)
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


def _check_nodes(nodes: list[Node]) -> Iterator[Problem]:
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            yield "cluster.nodeGroups", f"node name {node.name!r} is produced twice"
        seen.add(node.name)


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
        for strength in ("required", "preferred"):
            level = getattr(workload.topology, strength)
            if level is not None and level not in levels:
                yield (
                    f"{at}.topology.{strength}",
                    f"{level!r} is not a level of cluster.topology ({', '.join(levels)})",
                )
