"""A page per Workload: what `kubectl admitter explain` says of it, with its history."""

from __future__ import annotations

from html import escape
from typing import Any

from admitter.dashboard.render import page as html_page
from admitter.kube.client import Kube
from admitter.kube.objects import parse_time
from admitter.kubectl.explain import explain_workload, where_in_fleet, where_it_runs
from admitter.kubectl.state import QueueReading
from admitter.kubectl.times import moment, span


async def explained(client: Kube, state: QueueReading, namespace: str,
                    name: str) -> dict[str, Any] | None:
    for wl in state.workloads:
        if wl["metadata"]["namespace"] == namespace and wl["metadata"]["name"] == name:
            return await explain_workload(client, state, wl)
    return None


def section(found: dict[str, Any], now: float) -> str:
    facts = [
        (found["jobKind"] if found["job"] else "job", found["job"] or "—"),
        ("queue", f"{found['localQueue']} → ClusterQueue {found['clusterQueue'] or '?'}"),
        ("GPUs", str(found["gpus"])),
        ("min runtime", span(found["minRuntimeSeconds"]) if found["minRuntimeSeconds"]
         else "0 (unfunded)"),
        ("max runtime", "none" if found["maxRuntimeSeconds"] is None
         else span(found["maxRuntimeSeconds"])),
        ("resumable", "yes" if found["resumable"] else "no"),
        ("evictions", str(found["evictions"])),
        ("state", found["phase"]),
    ]
    if found["phase"] == "Pending":
        facts += [("reason", found["reason"] or "not explained yet"),
                  ("blocking fact", found["message"] or ""),
                  ("position", f"{found['position']} of {found['queueLength']} in its queue; "
                               f"queue {found['queueOrder']} of {found['leafQueues']} in the "
                               "cluster's order" if found["position"] else "—"),
                  ("would start", found["wouldStart"])]
    elif found["phase"] == "Admitted":
        left = found["protectionLeftSeconds"]
        facts += [("admitted", moment(parse_time(found["admittedAt"]) or now, now)),
                  ("where", where_it_runs(found)),
                  ("protection", f"{span(left)} left" if left else "none left")]
        facts += [(label.lower(), text) for label, _, text in  # over a fleet: cluster, copy
                  (line.partition(": ") for line in where_in_fleet(found))]
    rows = "".join(f"<tr><th>{escape(k)}</th><td data-fact=\"{escape(k)}\">{escape(v)}</td>"
                   "</tr>" for k, v in facts)
    history = "".join(f"<tr><td>{escape(moment(e['time'], now))}</td><td>{escape(e['reason'])}"
                      f"</td><td>{escape(e['message'])}</td></tr>" for e in found["history"])
    return (f"<table>{rows}</table><h2>History</h2><table><tr><th>when</th><th>reason</th>"
            f"<th>message</th></tr>{history}</table>")


def page(found: dict[str, Any], now: float) -> str:
    body = (f'<p><a href="/">all queues</a></p><section id="workload">'
            f"{section(found, now)}</section>")
    return html_page(f"Workload {found['workload']}", body, live=True)
