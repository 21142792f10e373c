"""`kubectl admitter explain JOB|WORKLOAD`: the fact that blocks it, where it stands, what
would let it start, where it runs, and what happened to it, from its status as the controller
wrote what the deciding search found."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from admitter.api.duration import parse_duration
from admitter.api.workercluster import CONDITION_REACHABLE
from admitter.api.workload import CONDITION_DISPATCHED, CONDITION_FINISHED
from admitter.core.decisions import PendingReason
from admitter.core.quota import QuotaBlock
from admitter.jobs.registry import POD_LABELS
from admitter.jobs.workloads import job_owner
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.core_values import admitted_cluster
from admitter.kube.events import COMPONENT
from admitter.kube.objects import TERMINAL_POD_PHASES, Obj, condition, parse_time
from admitter.kubectl.queues import ranked_behind
from admitter.kubectl.state import (
    CLUSTER_QUEUES_UNREAD,
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


def protectors(state: QueueReading, wl: Obj) -> list[Obj]:
    """The running workloads whose min-runtime protection it waits for (`blockedBy`)."""
    named = set((wl.get("status") or {}).get("blockedBy") or ())
    return [other for other in state.admitted()
            if f"{other['metadata']['namespace']}/{other['metadata']['name']}" in named]


def would_start(state: QueueReading, wl: Obj) -> str:
    """What would let it start, in words, from its reason and the status' numeric fields."""
    now = state.now
    status = wl.get("status") or {}
    reason, message = waiting_reason(wl)
    if reason == PendingReason.NEVER_FITS:
        return f"never: {message}"  # the placement on the idle cluster failed
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
        return _below_bound(state, wl, reason, message)
    if reason in (PendingReason.QUEUE_CLOSED, PendingReason.INVALID_QUEUE):
        return "when its LocalQueue points at a leaf ClusterQueue that is not being deleted"
    if reason:
        where = " in one cluster" if state.worker_clusters else ""
        return (f"when running work ends or is preempted so that its {gpus(wl)} GPUs fit"
                f"{where} (checked again at every change and at least every cycle)")
    return "it has not been explained yet: the controller explains a Workload after 1 s"


def _below_bound(state: QueueReading, wl: Obj, reason: str, message: str) -> str:
    """When the queue whose limit or fair share holds it back would let it in: named from
    the block its message states (`QuotaBlock.read`), its own ClusterQueue otherwise."""
    block = QuotaBlock.read(message)
    if block is None:
        bound = "limit" if reason == PendingReason.LIMIT_EXCEEDED else "fair share"
        queue = state.cluster_queue_of(wl) or "?"
        return (f"when what ClusterQueue {queue} (or the queue above it that its message "
                f"names) holds falls below its {bound} by {gpus(wl)} GPUs (work there ends or "
                f"is preempted) or that {bound} grows")
    if block.request > block.bound:
        return (f"only once queue {block.queue}'s {block.bound_name} grows to "
                f"{block.request} {block.resource}: it asks for more than the "
                f"{block.bound} it allows")
    return (f"when queue {block.queue} holds at most {block.bound - block.request} "
            f"{block.resource} (it holds {block.holding}: work there ends or is preempted) or "
            f"its {block.bound_name} grows")


async def pod_nodes(client: Kube, wl: Obj) -> dict[str, int] | None:
    """Pods per node of the Workload's job, bound and not finished, as the API server has
    them; None if the caller may not list pods or its pods cannot be told apart (a job of no
    known kind)."""
    owner = job_owner(wl)
    if owner is None:
        return None
    label = dict(POD_LABELS).get(str(owner.get("kind")))
    selector = (f"{label}={owner['name']}" if label is not None
                else f"batch.kubernetes.io/controller-uid={owner.get('uid')}")
    try:
        listed = await client.request("GET", kube.PODS.path(wl["metadata"]["namespace"]),
                                      query={"labelSelector": selector})
    except ApiException as error:
        if error.status in (401, 403):
            return None
        raise
    counts: dict[str, int] = {}
    for pod in listed.get("items") or []:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES:
            counts[node] = counts.get(node, 0) + 1
    return counts


def assumed_nodes(admission: Obj) -> dict[str, int]:
    """Pods per node the admission's gang check assumed (its node hints)."""
    counts: dict[str, int] = {}
    for hint in admission.get("nodeHints") or []:
        counts[hint["node"]] = counts.get(hint["node"], 0) + int(hint.get("count", 1))
    return counts


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
        "maxRuntimeSeconds": (None if spec.get("maxRuntime") is None
                              else parse_duration(spec["maxRuntime"])),
        "pastRunSeconds": float(status.get("pastRunSeconds", 0.0)),
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
        found["never"] = message if reason == PendingReason.NEVER_FITS else None
        found["wouldStart"] = would_start(state, wl)
    elif found["phase"] == "Admitted":
        admission = status["admission"]
        end = protected_until(wl)
        fleet = in_fleet(state, wl)
        # a worker's pods are not the manager's to list: its nodes are those admitted
        running = None if fleet.get("worker") else await pod_nodes(client, wl)
        found.update({"admittedAt": admission.get("admittedAt"),
                      "topologyDomain": admission.get("topologyDomain") or {},
                      "podSetDomains": {d["podSet"]: d["domain"]
                                        for d in admission.get("podSetDomains") or []},
                      "nodes": running if running is not None else assumed_nodes(admission),
                      "nodesFrom": ("pods" if running is not None else
                                    "worker" if fleet.get("worker") else "admission"),
                      "protectedUntil": end,
                      "protectionLeftSeconds": max(0.0, end - state.now) if end else 0.0,
                      **fleet})
    else:
        finished = condition(wl, CONDITION_FINISHED) or {}
        found.update({"finishedReason": finished.get("reason"),
                      "finishedMessage": finished.get("message")})
    found["unread"] = [str(unread) for unread in state.unread]
    found["history"] = await history(client, wl)
    return found


def in_fleet(state: QueueReading, wl: Obj) -> dict[str, Any]:
    """Over a fleet, the cluster an admitted Workload runs in, whether that is a worker
    (its copy there, shown by the `Dispatched` condition) and whether the manager reaches
    it; nothing outside a fleet."""
    cluster = admitted_cluster(wl)
    copy = condition(wl, CONDITION_DISPATCHED)
    if cluster is None and copy is None:
        return {}
    wc = state.worker_clusters.get(cluster or "")
    reachable = condition(wc, CONDITION_REACHABLE) if wc is not None else None
    if wc is not None and reachable is None:
        what = "a worker the manager has not reported on yet"
    elif reachable is not None:
        what = ("a worker the manager reaches" if reachable.get("status") == "True" else
                f"a worker the manager does not reach: {reachable.get('reason')}: "
                f"{reachable.get('message')}")
    elif copy is not None:
        what = "a worker no longer registered as a WorkerCluster"
    else:
        what = "the manager's own nodes" if state.worker_clusters else "named by no WorkerCluster"
    return {"cluster": cluster, "worker": wc is not None or copy is not None,
            "clusterIs": what, "reachable": _condition(reachable),
            "dispatched": _condition(copy)}


def _condition(found: Obj | None) -> dict[str, str] | None:
    return None if found is None else {key: str(found.get(key) or "")
                                       for key in ("status", "reason", "message")}


def where_in_fleet(found: dict[str, Any]) -> list[str]:
    """The cluster it runs in, what that cluster is, and, in a worker, how its copy does."""
    if "cluster" not in found:
        return []
    lines = [f"Cluster: {found['cluster'] or 'not named by its admission'} "
             f"({found['clusterIs']})"]
    copy = found["dispatched"]
    if copy is not None:
        lines.append(f"Copy: {copy['reason']}: {copy['message']}")
    elif found["worker"]:
        lines.append("Copy: not created yet (the manager creates it at its next pass)")
    return lines


def _evictions(count: int) -> str:
    return {0: "never evicted", 1: "evicted once"}.get(count, f"evicted {count} times")


def where_it_runs(found: dict[str, Any]) -> str:
    """Its nodes (pods per node), and the domain it and each narrower pod set are pinned to."""
    nodes = found["nodes"]
    on = ", ".join(f"{node} ({count} pod{'s' if count > 1 else ''})"
                   for node, count in sorted(nodes.items()))
    if found["nodesFrom"] == "admission":
        on = f"on {on or 'no node'}, as assumed at admission (its pods could not be read)"
    elif found["nodesFrom"] == "worker":
        on = (f"on {on or 'no node'}, as placed at admission (its pods run in cluster "
              f"{found.get('cluster') or '?'})")
    else:
        on = f"on {on}" if on else "no pod on a node yet"
    domain = _domain(found["topologyDomain"])
    pinned = f"pinned to {domain}" if domain else "not pinned to a topology domain"
    narrower = "".join(f"; pod set {name} pinned to {_domain(labels)}"
                       for name, labels in sorted(found["podSetDomains"].items()))
    return f"{on}; {pinned}{narrower}"


def _domain(labels: dict[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in labels.items())


def _max_runtime(found: dict[str, Any]) -> str:
    """The maximum run time in the summary line, when the workload declares one."""
    limit = found["maxRuntimeSeconds"]
    return "" if limit is None else f"max runtime {span(limit)}, "


def render(found: dict[str, Any], now: float) -> RenderableType:
    head = Text(f"{found['workload']}", style="bold")
    if found["job"]:
        head.append(f"  ({found['jobKind']} {found['job']})")
    lines: list[RenderableType] = [head, Text(
        f"queue {found['localQueue']} → ClusterQueue {found['clusterQueue'] or '?'}; "
        f"{found['gpus']} GPUs, priority {found['priority']}, min runtime "
        f"{span(found['minRuntimeSeconds']) if found['minRuntimeSeconds'] else '0 (unfunded)'}, "
        f"{_max_runtime(found)}{'resumable' if found['resumable'] else 'not resumable'}; "
        f"{_evictions(found['evictions'])}")]
    if found["phase"] == "Pending":
        lines.append(Text(f"Waiting: {found['reason'] or 'not explained yet'}", style="yellow"))
        if found["message"]:
            lines.append(Text(f"  {found['message']}"))
        if found["position"]:
            order = (f", which is offered capacity {found['queueOrder']} of "
                     f"{found['leafQueues']} in the cluster's order"
                     if found["queueOrder"] else "")
            lines.append(Text(f"Position: {found['position']} of {found['queueLength']} in "
                              f"ClusterQueue {found['clusterQueue']}{order}"))
        if str(CLUSTER_QUEUES_UNREAD) in found["unread"]:
            lines.append(Text(f"Queue order: not shown: {CLUSTER_QUEUES_UNREAD}",
                              style="yellow"))
        lines += [Text(f"Ranked: {why}") for why in found["rankedBehind"]]
        lines.append(Text(f"Would start: {found['wouldStart']}", style="green"
                          if not found["never"] else "red"))
    elif found["phase"] == "Admitted":
        admitted = parse_time(found["admittedAt"]) or now
        left = found["protectionLeftSeconds"]
        lines.append(Text(f"Running since {moment(admitted, now)[3:]}; " + (
            f"protected for {span(left)} more" if left else "not protected from preemption"),
            style="green"))
        lines.append(Text(f"Where: {where_it_runs(found)}"))
        lines += [Text(line) for line in where_in_fleet(found)]
        if found["maxRuntimeSeconds"] is not None:
            stops = admitted + found["maxRuntimeSeconds"] - found["pastRunSeconds"]
            lines.append(Text(f"Stops {moment(stops, now)}, at its maximum run time, for "
                              "good", style="yellow"))
    else:
        ended = ": ".join(str(part) for part in (found["finishedReason"],
                                                 found["finishedMessage"]) if part)
        lines.append(Text(f"Finished{': ' + ended if ended else ''}"))
    table = Table("WHEN", "REASON", "MESSAGE", title="History", box=None,
                  title_justify="left", header_style="bold")
    for event in found["history"]:
        table.add_row(moment(event["time"], now), event["reason"], event["message"])
    if found["history"]:
        lines.append(table)
    return Group(*lines)
