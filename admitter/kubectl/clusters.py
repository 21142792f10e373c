"""The clusters of a fleet as `kubectl admitter queues` and the dashboard show them: per
cluster, the nodes and GPUs it offers (its WorkerCluster's status), the GPUs admitted there
(the Workloads whose admission names it) and whether the manager reaches it. Outside a fleet
(no WorkerCluster) there are no rows and nothing is shown."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from admitter.api.workercluster import CONDITION_REACHABLE
from admitter.kube.core_values import admitted_cluster
from admitter.kube.objects import condition
from admitter.kubectl.state import QueueReading, gpus

OWN = "the manager's own nodes"
"""Where a cluster named by admissions but by no WorkerCluster is: the manager's nodes
labelled with it (docs/fleet.md)."""


def cluster_rows(state: QueueReading) -> list[dict[str, Any]]:
    """One row per cluster, by name: every WorkerCluster, and every other cluster an admission
    names; none when there is no WorkerCluster."""
    if not state.worker_clusters:
        return []
    admitted: dict[str, list[dict[str, Any]]] = {}
    for wl in state.admitted():
        cluster = admitted_cluster(wl)
        if cluster is not None:
            admitted.setdefault(cluster, []).append(wl)
    rows = []
    for name in sorted({*state.worker_clusters, *admitted}):
        wc = state.worker_clusters.get(name)
        status = (wc or {}).get("status") or {}
        reachable = condition(wc, CONDITION_REACHABLE) if wc is not None else None
        rows.append({
            "name": name,
            "worker": wc is not None,
            "reachable": None if reachable is None else reachable.get("status") == "True",
            "reason": (reachable or {}).get("reason") or ("" if wc is None else "NotReported"),
            "message": (reachable or {}).get("message") or "",
            "nodes": None if wc is None else int(status.get("nodes") or 0),
            "gpus": None if wc is None else int(status.get("gpus") or 0),
            "admittedGpus": sum(gpus(wl) for wl in admitted.get(name, ())),
            "admittedWorkloads": len(admitted.get(name, ())),
        })
    return rows


CLUSTER_COLUMNS = ("CLUSTER", "REACHABLE", "REASON", "NODES", "GPUS", "ADMITTED", "WORKLOADS")


def render_clusters(rows: list[dict[str, Any]], partial: bool = False) -> Table:
    """The clusters' table; `partial` when the caller reads only some namespaces' Workloads,
    so admitted GPUs count only those."""
    seen = " (of the Workloads you may read)" if partial else ""
    table = Table(*CLUSTER_COLUMNS, title=f"Clusters (GPUs; admitted: held by admitted "
                  f"Workloads{seen})", box=None, title_justify="left", header_style="bold")
    for row in rows:
        reachable = ("" if row["reachable"] is None
                     else "True" if row["reachable"] else "[red]False[/]")
        table.add_row(row["name"], reachable if row["worker"] else "—",
                      row["reason"] if row["worker"] else OWN,
                      _count(row["nodes"]), _count(row["gpus"]), str(row["admittedGpus"]),
                      str(row["admittedWorkloads"]))
    return table


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)
