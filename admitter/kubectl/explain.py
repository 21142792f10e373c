"""`kubectl admitter explain JOB|WORKLOAD`: the fact that blocks it, where it stands, what
would let it start, and what happened to it, from its status and the core's own placement."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from admitter.api.convert import cluster_levels
from admitter.api.duration import parse_duration
from admitter.core.decisions import PendingReason
from admitter.core.nodes import ClusterState
from admitter.core.placement import PlacementFailure, place
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.core_values import core_node
from admitter.kube.events import COMPONENT
from admitter.kube.objects import Obj, parse_time
from admitter.kubectl.queues import ranked_behind
from admitter.kubectl.state import (
    QueueReading,
    gpus,
    job_kind,
    job_name,
    phase,
    protected_until,
    waiting_reason,
)
from admitter.kubectl.times import moment, span

SHOWN_PROTECTORS = 3
"""Workloads named in "when X's protection ends"; the rest are counted."""


def display_name(wl: Obj) -> str:
    """namespace/job for a Job's Workload, namespace/workload otherwise."""
    return f"{wl['metadata']['namespace']}/{job_name(wl) or wl['metadata']['name']}"


async def empty_cluster(client: Kube) -> ClusterState | None:
    """Every node with nothing running, as the core models them; None if the caller may not
    read the nodes."""
    try:
        nodes = (await client.list(kube.NODES))["items"]
        topologies = (await client.list(kube.TOPOLOGIES))["items"]
    except ApiException as error:
        if error.status in (401, 403):
            return None
        raise
    levels = cluster_levels({t["metadata"]["name"]: [lv["nodeLabel"] for lv in t["spec"]["levels"]]
                             for t in topologies}) or ()
    return ClusterState([core_node(node, {}) for node in nodes], levels)


def never_fits(empty: ClusterState | None, state: QueueReading, wl: Obj) -> str | None:
    """Why the workload cannot be placed even on the `empty` cluster (the core's own
    placement), or None if it could be or the nodes are unknown."""
    if empty is None:
        return None
    placed = place(empty, state.core(wl))
    return placed.reason if isinstance(placed, PlacementFailure) else None


def protectors(state: QueueReading, wl: Obj) -> list[Obj]:
    """The running workloads whose min-runtime protection it waits for (`blockedBy`)."""
    named = set((wl.get("status") or {}).get("blockedBy") or ())
    return [other for other in state.admitted()
            if f"{other['metadata']['namespace']}/{other['metadata']['name']}" in named]


def would_start(state: QueueReading, wl: Obj, never: str | None) -> str:
    """What would let it start, in words, with times from the status' numeric fields."""
    now = state.now
    status = wl.get("status") or {}
    reason, _ = waiting_reason(wl)
    if never is not None:
        return f"never: {never}, even with nothing else running"
    requeue = parse_time(status.get("requeueAt"))
    if reason == PendingReason.BACKOFF and requeue is not None:
        return f"when its backoff ends {moment(requeue, now)}"
    blocked = parse_time(status.get("blockedUntil"))
    if blocked is not None:
        holders = [display_name(p) for p in protectors(state, wl)]
        names = ", ".join(holders[:SHOWN_PROTECTORS]) + (
            f" and {len(holders) - SHOWN_PROTECTORS} more" if len(holders) > SHOWN_PROTECTORS
            else "")
        whose = f"{names}'s protection" if names else "the protection of the work that could " \
                                                        "make room"
        if blocked > now:
            return f"when {whose} ends {moment(blocked, now)}"
        return f"{whose} ended {moment(blocked, now)}: it is tried again at the next cycle"
    if reason in (PendingReason.QUOTA_EXCEEDED, PendingReason.LIMIT_EXCEEDED):
        bound = "limit" if reason == PendingReason.LIMIT_EXCEEDED else "fair share"
        return (f"when what the queue named above holds falls below its {bound} by "
                f"{gpus(wl)} GPUs (work there ends or is preempted) or its {bound} grows")
    if reason in (PendingReason.QUEUE_CLOSED, PendingReason.INVALID_QUEUE):
        return "when its LocalQueue points at a leaf ClusterQueue that is not being deleted"
    if reason:
        return (f"when running work ends or is preempted so that its {gpus(wl)} GPUs fit "
                f"(checked again at every change and at least every cycle)")
    return "it has not been explained yet: the controller explains a Workload after 1 s"


async def history(client: Kube, wl: Obj) -> list[dict[str, Any]]:
    """admitter's Events on its Job (or on the Workload itself), oldest first: admissions,
    evictions and reasons to wait (the Job controller's pod Events are left out)."""
    namespace = wl["metadata"]["namespace"]
    rows: list[dict[str, Any]] = []
    for target in {job_name(wl), wl["metadata"]["name"]} - {""}:
        listed = await client.request("GET", kube.EVENTS.path(namespace), query={
            "fieldSelector": f"involvedObject.name={target}"})
        for event in listed.get("items") or []:
            if (event.get("source") or {}).get("component") != COMPONENT:
                continue
            at = parse_time(event.get("lastTimestamp") or event.get("eventTime")) or 0.0
            version = str(event["metadata"].get("resourceVersion", "0"))
            rows.append({"time": at, "reason": event.get("reason", ""),
                         "message": event.get("message", ""), "count": event.get("count", 1),
                         "order": int(version) if version.isdigit() else 0})
    # times are whole seconds; within one, the API server's write order
    return sorted(rows, key=lambda row: (row["time"], row["order"]))


async def explain_workload(client: Kube, state: QueueReading, wl: Obj) -> dict[str, Any]:
    meta, spec, status = wl["metadata"], wl["spec"], wl.get("status") or {}
    queue = state.cluster_queue_of(wl)
    found: dict[str, Any] = {
        "workload": f"{meta['namespace']}/{meta['name']}",
        "job": job_name(wl) or None,
        "jobKind": job_kind(wl),
        "localQueue": spec["queueName"],
        "clusterQueue": queue,
        "gpus": gpus(wl),
        "priority": spec.get("priority", 0),
        "minRuntimeSeconds": parse_duration(spec.get("minRuntime", 0)),
        "resumable": spec.get("resumable", True),
        "phase": phase(wl),
        "evictions": status.get("evictionCount", 0),
    }
    if found["phase"] == "Pending":
        reason, message = waiting_reason(wl)
        order = state.queue_order(queue)
        keys = [o["metadata"]["uid"] for o in order]
        leaves = state.leaf_order()
        found.update({
            "reason": reason or None,
            "message": message or None,
            "position": keys.index(meta["uid"]) + 1 if meta["uid"] in keys else None,
            "queueLength": len(order),
            "queueOrder": leaves.index(queue) + 1 if queue in leaves else None,
            "leafQueues": len(leaves),
            "blockedUntil": status.get("blockedUntil"),
            "rankedBehind": ranked_behind(state, queue),
        })
        never = never_fits(await empty_cluster(client), state, wl)
        found["never"] = never
        found["wouldStart"] = would_start(state, wl, never)
    elif found["phase"] == "Admitted":
        admission = status["admission"]
        end = protected_until(wl)
        found.update({"admittedAt": admission.get("admittedAt"),
                      "topologyDomain": admission.get("topologyDomain") or {},
                      "protectedUntil": end,
                      "protectionLeftSeconds": max(0.0, end - state.now) if end else 0.0})
    found["history"] = await history(client, wl)
    return found


def _evictions(count: int) -> str:
    return {0: "never evicted", 1: "evicted once"}.get(count, f"evicted {count} times")


def render(found: dict[str, Any], now: float) -> RenderableType:
    head = Text(f"{found['workload']}", style="bold")
    if found["job"]:
        head.append(f"  ({found['jobKind']} {found['job']})")
    lines: list[RenderableType] = [head, Text(
        f"queue {found['localQueue']} → ClusterQueue {found['clusterQueue'] or '?'}; "
        f"{found['gpus']} GPUs, priority {found['priority']}, min runtime "
        f"{span(found['minRuntimeSeconds']) if found['minRuntimeSeconds'] else '0 (unfunded)'}, "
        f"{'resumable' if found['resumable'] else 'not resumable'}; "
        f"{_evictions(found['evictions'])}")]
    if found["phase"] == "Pending":
        lines.append(Text(f"Waiting: {found['reason'] or 'not explained yet'}", style="yellow"))
        if found["message"]:
            lines.append(Text(f"  {found['message']}"))
        if found["position"]:
            lines.append(Text(
                f"Position: {found['position']} of {found['queueLength']} in ClusterQueue "
                f"{found['clusterQueue']}, which is offered capacity "
                f"{found['queueOrder']} of {found['leafQueues']} in the cluster's order"))
        lines += [Text(f"Ranked: {why}") for why in found["rankedBehind"]]
        lines.append(Text(f"Would start: {found['wouldStart']}", style="green"
                          if not found["never"] else "red"))
    elif found["phase"] == "Admitted":
        admitted = parse_time(found["admittedAt"]) or now
        where = ", ".join(f"{k}={v}" for k, v in found["topologyDomain"].items()) or (
            "the cluster")
        left = found["protectionLeftSeconds"]
        lines.append(Text(f"Running since {moment(admitted, now)[3:]} in {where}; " + (
            f"protected for {span(left)} more" if left else "not protected from preemption"),
            style="green"))
    else:
        lines.append(Text("Finished"))
    table = Table("WHEN", "REASON", "MESSAGE", title="History", box=None,
                  title_justify="left", header_style="bold")
    for event in found["history"]:
        table.add_row(moment(event["time"], now), event["reason"], event["message"])
    if found["history"]:
        lines.append(table)
    return Group(*lines)
