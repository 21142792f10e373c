"""`admitter fairshare SCENARIO`: every queue's fair share at time 0 of a scenario."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from decimal import Decimal

from rich.console import Console
from rich.table import Table

from admitter.api.convert import core_fair_share_settings, core_resources, scenario_nodes
from admitter.api.quantity import format_quantity, from_base_units
from admitter.api.scenario import Scenario
from admitter.api.scenario_file import load_scenario, queue_tree
from admitter.core.fairshare import FairShare
from admitter.core.model import is_funded
from admitter.core.usage import UsageLedger, fair_share_now


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "fairshare", help="print each queue's fair share for a scenario's demand at time 0"
    )
    parser.add_argument("scenario", help="scenario YAML file")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


def fair_share_at_start(scenario: Scenario) -> FairShare:
    """Fair share for the funded demand submitted at time 0, with the scenario's history."""
    tree = queue_tree(scenario)
    capacity: dict[str, int] = {}
    for node in scenario_nodes(scenario):
        for resource, amount in node.allocatable.items():
            capacity[resource] = capacity.get(resource, 0) + amount
    demand: dict[str, dict[str, int]] = {}
    for template in scenario.workloads:
        if template.submit != 0 or not is_funded(template.min_runtime):
            continue
        instances = template.count if template.every == 0 else 1
        leaf = demand.setdefault(template.queue, {})
        for resource, amount in core_resources(template.pod_requests).items():
            leaf[resource] = leaf.get(resource, 0) + amount * template.pods * instances
    settings = core_fair_share_settings(scenario.settings.fair_share)
    ledger = UsageLedger(settings)
    ledger.add_history(scenario.history, 0.0)
    return fair_share_now(tree, capacity, demand, ledger.usage(0.0), settings)[2]


def _display_amount(resource: str, amount: int) -> float | int:
    """GPUs as devices, cpu in cores, memory in bytes."""
    value = from_base_units(resource, amount)
    return int(value) if value == value.to_integral_value() else float(value)


def shares_by_queue(
    scenario: Scenario, result: FairShare
) -> Mapping[str, Mapping[str, float | int]]:
    return {
        queue.name: {r: _display_amount(r, result.share(queue.name, r)) for r in result.resources}
        for queue in scenario.queues
    }


def run(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    result = fair_share_at_start(scenario)
    shares = shares_by_queue(scenario, result)
    if args.json:
        print(json.dumps({"queues": shares}, indent=2, sort_keys=True))
        return 0
    table = Table(title=f"Fair share at time 0 — {scenario.name}")
    table.add_column("queue")
    table.add_column("parent")
    for resource in result.resources:
        table.add_column(resource, justify="right")
    for queue in scenario.queues:
        table.add_row(
            queue.name,
            queue.parent or "",
            *(str(format_quantity(Decimal(str(shares[queue.name][r])))) for r in result.resources),
        )
    Console().print(table)
    return 0
