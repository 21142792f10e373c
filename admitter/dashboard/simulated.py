"""The dashboard's page filled from a simulation, so a simulated week and a live cluster look
alike: the same sections, as they stand at the simulation's end."""

from __future__ import annotations

from typing import Any

from admitter.core.queue_tree import QueueTree
from admitter.core.ranking import gpu_budgets
from admitter.dashboard import render
from admitter.sim.engine import Outcome
from admitter.sim.result import Result

CHART_POINTS = 600
"""Timeline marks drawn at most (a week has tens of thousands)."""


def _depth_first(tree: QueueTree) -> list[str]:
    order: list[str] = []

    def visit(names: Any) -> None:
        for name in names:
            order.append(name)
            visit(tree.children(name))

    visit(tree.roots)
    return order


def board(outcome: Outcome, result: Result) -> render.Board:
    acc = outcome.accounting
    tree, leaves = acc.tree, list(acc.leaves)
    last = acc.timeline[-1].held if acc.timeline else (0,) * len(leaves)
    held = tree.roll_up({leaf: float(last[i]) for i, leaf in enumerate(leaves)}, 0.0)
    queues_result = result["queues"]
    owed = tree.roll_up({leaf: float(queues_result[leaf]["owed_gpu_hours"] or 0.0)
                         for leaf in leaves}, 0.0)
    delivered = tree.roll_up({leaf: float(queues_result[leaf]["delivered_gpu_hours"] or 0.0)
                              for leaf in leaves}, 0.0)
    workloads = result["workloads"]
    waiting = [w for w in workloads if not w["starts"] and w["finished_s"] is None]
    waiting_by_leaf = tree.roll_up({leaf: sum(1 for w in waiting if w["queue"] == leaf)
                                    for leaf in leaves}, 0)
    budgets = gpu_budgets(tree, acc.capacity)
    queues = [{"name": name, "parent": tree.parent(name), "held": held[name],
               "budget": round(budgets.get(name, 0.0), 1), "fairShare": None, "rank": 0,
               "usedGpuHours": round(delivered[name], 1), "owedGpuHours": round(owed[name], 1),
               "pending": waiting_by_leaf[name]} for name in _depth_first(tree)]
    step = max(1, len(acc.timeline) // CHART_POINTS)
    points = [(mark.at, list(mark.held)) for mark in acc.timeline[::step]]
    if acc.timeline and points[-1][0] != outcome.end:
        points.append((outcome.end, list(acc.timeline[-1].held)))
    positions: dict[str, int] = {}
    pending = []
    for w in waiting:
        positions[w["queue"]] = positions.get(w["queue"], 0) + 1
        pending.append({"key": w["name"], "name": w["name"], "clusterQueue": w["queue"],
                        "gpus": w["gpus"], "position": positions[w["queue"]],
                        "reason": "", "wouldStart": "did not start before the end"})
    contract = {job.instance.key: job.instance.pending for job in outcome.jobs}
    running = []
    for w in workloads:
        if w["starts"] and w["finished_s"] is None:
            declared = contract[w["name"]]
            left = w["starts"][-1]["at_s"] + declared.min_runtime - outcome.end
            running.append({"key": w["name"], "name": w["name"], "clusterQueue": w["queue"],
                            "gpus": w["gpus"], "funded": w["funded"],
                            "protectionLeftSeconds": max(0.0, left),
                            "resumable": declared.resumable})
    return {"title": f"admitter, simulated: {outcome.scenario.name}", "live": False,
            "now": outcome.end, "capacity": acc.capacity, "queues": queues,
            "history": {"leaves": leaves, "points": points}, "pending": pending,
            "running": sorted(running, key=lambda r: -r["gpus"])}
