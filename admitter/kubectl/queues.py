"""`kubectl admitter queues` and `explain QUEUE`: each queue's budget, fair share and use of
its budget over the window, as the ClusterQueue status carries them."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from admitter.api.quantity import parse_quantity
from admitter.core.model import GPU
from admitter.kubectl.state import QueueReading


def _amount(amounts: dict[str, Any] | None, resource: str = GPU) -> float:
    value = (amounts or {}).get(resource)
    return float(parse_quantity(value)) if value is not None else 0.0


def _number(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.1f}"


def queue_row(state: QueueReading, name: str) -> dict[str, Any]:
    """One queue's GPU figures; a parent's GPU-hours are its leaves' sum (the ledger keeps
    them per leaf)."""
    cq = state.cluster_queues[name]
    spec, status = cq.get("spec") or {}, cq.get("status") or {}
    knobs = (spec.get("resources") or {}).get(GPU) or {}
    used = sum(float((state.cluster_queues[q].get("status") or {}).get("gpuHoursInWindow")
                     or 0.0) for q in state.subtree(name))
    owed = float(status.get("owedGpuHoursInWindow") or 0.0)
    return {
        "name": name,
        "parent": spec.get("parent"),
        "quota": _amount({GPU: knobs.get("quota", 0)}),
        "limit": _amount({GPU: knobs.get("limit", -1)}),
        "weight": float(knobs.get("overQuotaWeight", 1.0)),
        "priority": int(spec.get("priority", 0)),
        "budget": float(status.get("gpuBudget") or 0.0),
        "deserved": _amount(status.get("deserved")),
        "fairShare": _amount(status.get("fairShare")),
        "held": _amount(status.get("allocated")),
        "usedGpuHours": round(used, 3),
        "owedGpuHours": owed,
        "usedOfOwed": round(used / owed, 4) if owed > 0 else None,
        "rank": int(status.get("rank") or 0),
        "pending": int(status.get("pendingWorkloads") or 0),
        "admitted": int(status.get("admittedWorkloads") or 0),
    }


def queue_rows(state: QueueReading) -> list[dict[str, Any]]:
    """Every queue, parents before their children."""
    order: list[str] = []

    def visit(parent: str | None) -> None:
        for name in state.children.get(parent, []):
            order.append(name)
            visit(name)

    visit(None)
    return [queue_row(state, name) for name in order]


def _label(row: dict[str, Any]) -> Text:
    text = Text(row["name"], style="bold")
    share = row["usedOfOwed"]
    used = (f"{row['usedGpuHours']:.1f} of {row['owedGpuHours']:.0f} GPU-h owed"
            + (f" ({share:.0%})" if share is not None else ""))
    quota = "all of its parent's" if row["quota"] < 0 else _number(row["quota"])
    text.append(f"  budget {_number(row['budget'])} GPUs (quota {quota}, "
                f"weight {_number(row['weight'])})  deserved {_number(row['deserved'])}  "
                f"fair share {_number(row['fairShare'])}  holds {_number(row['held'])}  ")
    text.append(used, style="cyan")
    text.append(f"  rank {row['rank']}", style="magenta")
    if row["pending"]:
        text.append(f"  {row['pending']} pending", style="yellow")
    return text


def render_tree(rows: list[dict[str, Any]]) -> RenderableType:
    tree = Tree("[bold]ClusterQueues[/] (GPUs; GPU-hours over the fair-share window)")
    nodes: dict[str | None, Tree] = {None: tree}
    for row in rows:
        parent = nodes.get(row["parent"], tree)
        nodes[row["name"]] = parent.add(_label(row))
    return tree


WIDE_COLUMNS = ("NAME", "QUOTA", "WEIGHT", "LIMIT", "BUDGET", "DESERVED", "FAIR", "HELD",
                "USED-H", "OWED-H", "USED%", "RANK", "PENDING", "ADMITTED")
"""`queues -o wide`: GPUs, then GPU-hours over the window (used, owed, used of owed). Short
headers one space apart, and children indented under their parent rather than a column of
parents, so that 120 columns hold the figures of any cluster and names of 30 characters; a
longer name folds. A quota of "all" is all of its parent's."""


def render_table(rows: list[dict[str, Any]]) -> RenderableType:
    """One row per queue, parents first; no cell is ever cut."""
    depth: dict[str | None, int] = {None: -1}
    cells = []
    for row in rows:
        depth[row["name"]] = depth.get(row["parent"], -1) + 1
        share = row["usedOfOwed"]
        cells.append(("  " * depth[row["name"]] + row["name"],
                      "all" if row["quota"] < 0 else _number(row["quota"]),
                      _number(row["weight"]),
                      "none" if row["limit"] < 0 else _number(row["limit"]),
                      _number(row["budget"]), _number(row["deserved"]),
                      _number(row["fairShare"]), _number(row["held"]),
                      f"{row['usedGpuHours']:.1f}", f"{row['owedGpuHours']:.0f}",
                      "" if share is None else f"{share:.0%}", str(row["rank"]),
                      str(row["pending"]), str(row["admitted"])))
    table = Table(box=None, header_style="bold", collapse_padding=True, pad_edge=False)
    for index, column in enumerate(WIDE_COLUMNS):
        widest = max([len(column), *(len(cell[index]) for cell in cells)])
        if index == 0:  # the one column that gives way: a long name folds onto two lines
            table.add_column(column, overflow="fold", min_width=16)
        else:
            table.add_column(column, justify="right", no_wrap=True, min_width=widest)
    for cell in cells:
        table.add_row(*cell)
    return table


def explain_queue(state: QueueReading, name: str) -> dict[str, Any]:
    """Why the queue gets its fair share of GPUs, step by step, as the status has it."""
    row = queue_row(state, name)
    parent = row["parent"]
    siblings = [queue_row(state, s) for s in state.children.get(parent, [])]
    parent_share = (queue_row(state, parent)["fairShare"] if parent
                    else sum(s["fairShare"] for s in siblings))
    wanting = [s for s in siblings if s["fairShare"] > s["deserved"] or s["name"] == name]
    same = [s for s in wanting if s["priority"] == row["priority"]]
    weights = sum(s["weight"] for s in same)
    surplus = row["fairShare"] - row["deserved"]
    steps = [
        f"1. Deserved: min(quota {_number(row['quota'])}, what its workloads request) = "
        f"{_number(row['deserved'])} GPUs, granted whatever its siblings do.",
        f"2. Surplus: {'its parent ' + parent if parent else 'the cluster'} divides "
        f"{_number(parent_share)} GPUs; what the siblings' deserved amounts leave goes to the "
        f"highest priority first (this queue: {row['priority']}), then by over-quota weight: "
        f"{_number(row['weight'])} of {_number(weights)} among the siblings of its priority "
        f"taking surplus, weighed down by use of the window, gives it "
        f"{_number(surplus)} more.",
        "3. Limit: " + ("none." if row["limit"] < 0 else
                        f"{_number(row['limit'])} GPUs, " +
                        ("reached: it gets no more." if row["fairShare"] >= row["limit"]
                         else "not reached.")),
        f"Fair share now: {_number(row['fairShare'])} GPUs; it holds {_number(row['held'])}.",
        f"Budget: {_number(row['budget'])} GPUs (quota first, then its weight's part of what "
        f"its siblings' quotas leave), so over the window it is owed "
        f"{row['owedGpuHours']:.0f} GPU-hours and used {row['usedGpuHours']:.1f}; "
        f"rank {row['rank']} of {len(siblings)} among its siblings (lower use of budget first).",
    ]
    return {"queue": row, "siblings": [s["name"] for s in siblings], "steps": steps}


def render_explanation(found: dict[str, Any]) -> RenderableType:
    row = found["queue"]
    return Group(Text(f"ClusterQueue {row['name']}", style="bold"),
                 *(Text(step) for step in found["steps"]),
                 render_table([row]))


def ranked_behind(state: QueueReading, leaf: str) -> list[str]:
    """At each level of `leaf`'s path where a sibling with work waiting is offered capacity
    first, the two queues' use of their budgets over the window, as their status has them."""
    found = []
    name: str | None = leaf
    while name is not None and name in state.cluster_queues:
        row = queue_row(state, name)
        ahead = [queue_row(state, s) for s in state.children.get(row["parent"], [])
                 if s != name]
        ahead = [s for s in ahead if 0 < s["rank"] < row["rank"] and s["pending"]]
        for sibling in sorted(ahead, key=lambda s: s["rank"]):
            found.append(f"{name} (rank {row['rank']}, {_share(row)} of its owed GPU-hours "
                         f"used) comes after {sibling['name']} (rank {sibling['rank']}, "
                         f"{_share(sibling)})")
        name = row["parent"]
    return found


def _share(row: dict[str, Any]) -> str:
    share = row["usedOfOwed"]
    if share is None:
        return "—"
    return f"{share:.1%}" if share >= 0.01 or share == 0 else f"{share * 100:.2g}%"


def local_queue_target(state: QueueReading, namespace: str | None, name: str) -> str | None:
    """The ClusterQueue the LocalQueue `name` of `namespace` points at; with None (-A), of
    whichever namespaces have one, if they agree."""
    targets = {str((lq.get("spec") or {}).get("clusterQueue") or "")
               for (lq_namespace, lq_name), lq in state.local_queues.items()
               if lq_name == name and namespace in (None, lq_namespace)}
    return targets.pop() if len(targets) == 1 else None
