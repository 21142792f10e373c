"""`kubectl admitter top`: running workloads by GPUs, with the protection each has left."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table

from admitter.kube.objects import parse_time
from admitter.kubectl.state import QueueReading, gpus, job_name, protected_until
from admitter.kubectl.times import age, span


def top_rows(state: QueueReading, namespace: str | None) -> list[dict[str, Any]]:
    """Admitted Workloads (in `namespace`, or all with None), most GPUs first."""
    rows = []
    for wl in state.admitted():
        meta, spec = wl["metadata"], wl["spec"]
        if namespace is not None and meta["namespace"] != namespace:
            continue
        admission = wl["status"]["admission"]
        end = protected_until(wl)
        rows.append({
            "namespace": meta["namespace"],
            "workload": meta["name"],
            "job": job_name(wl) or None,
            "clusterQueue": admission["clusterQueue"],
            "gpus": gpus(wl),
            "admittedAt": admission.get("admittedAt"),
            "protectionLeftSeconds": max(0.0, end - state.now) if end else 0.0,
            "funded": end is not None,
            "resumable": bool(spec.get("resumable", True)),
            "topologyDomain": admission.get("topologyDomain") or {},
        })
    return sorted(rows, key=lambda r: (-r["gpus"], r["namespace"], r["workload"]))


def render_top(rows: list[dict[str, Any]], now: float, wide: bool) -> RenderableType:
    table = Table(box=None, header_style="bold")
    columns = ["NAMESPACE", "NAME", "CLUSTERQUEUE", "GPUS", "RUNNING", "PROTECTED",
               "RESUMABLE"]
    if wide:
        columns += ["WORKLOAD", "DOMAIN"]
    for column in columns:
        table.add_column(column, justify="right" if column == "GPUS" else "left")
    for row in rows:
        left = row["protectionLeftSeconds"]
        protected = (f"{span(left)} left" if left else "ended") if row["funded"] else "unfunded"
        cells = [row["namespace"], row["job"] or row["workload"], row["clusterQueue"],
                 str(row["gpus"]), age(parse_time(row["admittedAt"]) or now, now), protected,
                 "yes" if row["resumable"] else "no"]
        if wide:
            cells += [row["workload"], ",".join(f"{k}={v}" for k, v in
                                                row["topologyDomain"].items())]
        table.add_row(*cells)
    return table
