"""What a scenario must satisfy to be simulated, beyond what `load_scenario` checks.

The simulator names every instance and must be able to run every gang somewhere: a workload
that no domain could ever hold would otherwise just sit in the report as unfinished, with the
mistake in the file unexplained.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from admitter.api.convert import core_resources, scenario_nodes, scenario_topology
from admitter.api.errors import InputError
from admitter.api.scenario import Scenario, WorkloadTemplate
from admitter.core.model import Node
from admitter.core.nodes import BLOCKING_EFFECTS
from admitter.core.topology import CLUSTER, enclosing_level, placement_levels, spans_clusters
from admitter.sim.workloads import instance_names

Problem = tuple[str, str]


def check_simulatable(scenario: Scenario, source: str) -> None:
    """Raise InputError naming `source`, the path of each problem and why."""
    problems = list(_problems(scenario))
    if problems:
        raise InputError(source, problems)


def _problems(scenario: Scenario) -> Iterator[Problem]:
    if scenario.horizon is not None and scenario.horizon <= 0:
        yield "horizon", "must be above 0"
    if scenario.settings.cycle <= 0:
        yield "settings.cycle", "must be above 0: decisions happen on the cycle grid"
    seen: dict[str, int] = {}
    for index, template in enumerate(scenario.workloads):
        for name in instance_names(template):
            if name in seen:
                yield (
                    f"workloads[{index}].name",
                    f"instance {name!r} is also produced by workloads[{seen[name]}]",
                )
            seen.setdefault(name, index)
    # Scenario workloads carry no tolerations: a node with a blocking taint never takes one.
    every = scenario_nodes(scenario)
    nodes = [
        node
        for node in every
        if not any(taint.effect in BLOCKING_EFFECTS for taint in node.taints)
    ]
    fleet = spans_clusters(every)
    levels = placement_levels(scenario_topology(scenario), fleet)
    for index, template in enumerate(scenario.workloads):
        yield from _check_gang(template, nodes, levels, fleet, f"workloads[{index}]")


def _check_gang(
    template: WorkloadTemplate, nodes: Sequence[Node], levels: Sequence[str], fleet: bool,
    at: str
) -> Iterator[Problem]:
    """The gang must fit, empty cluster, in one domain of its required level (or of one
    cluster of a fleet, or anywhere)."""
    requests = {r: q for r, q in core_resources(template.pod_requests).items() if q > 0}
    required = enclosing_level(template.topology.required if template.topology else None,
                               fleet)
    depth = levels.index(required) + 1 if required in levels else 0
    held: dict[tuple[str | None, ...], int] = {}
    for node in nodes:
        domain = tuple(node.labels.get(level) for level in levels[:depth])
        if None in domain:
            continue
        pods = min(
            (node.allocatable.get(r, 0) // q for r, q in requests.items()), default=template.pods
        )
        held[domain] = held.get(domain, 0) + pods
    most = max(held.values(), default=0)
    if most < template.pods:
        where = ("one cluster" if required == CLUSTER else f"one {required!r} domain"
                 if required else "the whole cluster")
        yield (
            f"{at}.pods",
            f"a gang of {template.pods} pods never fits: {where} holds at most {most} of them, "
            "on untainted nodes",
        )
