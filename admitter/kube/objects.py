"""Helpers over Kubernetes objects as the API's own JSON (`Obj`): times, conditions, a pod's
effective requests, the constraints a pod spec puts on nodes. Nothing here knows a job kind
or the decision core."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from admitter.api.quantity import from_base_units, kube_base_units
from admitter.api.workload import CONDITION_EVICTED

Obj = dict[str, Any]
"""A Kubernetes object as the API's own JSON: what every part of admitter that talks to the API
server reads and writes."""
ADMISSION_GATE = "admitter.dev/admission"
"""The scheduling gate holding a plain Pod admitter queued until its Workload is admitted."""
PLACEMENT_GATE = "admitter.dev/placement"
"""The scheduling gate holding a pod of an admitted workload until admitter names the node
its admission placed it on (docs/placement.md)."""
POD_SET_LABEL = "admitter.dev/pod-set"
"""On the pod templates of a started job (and so on its pods): the pod set a pod belongs to.
The placement webhook gates the pods that carry it."""
HOST_FIELD = "metadata.name"
"""The node field a pod is pinned to its host by (`matchFields`): a node's name, which no
label can differ from."""


def is_gated(pod: Obj, gate: str = ADMISSION_GATE) -> bool:
    """Whether that scheduling gate of admitter's (by default the admission one) holds the
    Pod."""
    return any(found.get("name") == gate
               for found in (pod.get("spec") or {}).get("schedulingGates") or ())


def without_gate(pod: Obj, gate: str) -> list[Obj]:
    """The Pod's scheduling gates with `gate` taken out."""
    return [found for found in (pod.get("spec") or {}).get("schedulingGates") or ()
            if found.get("name") != gate]


def add_gate_ops(pod: Obj, gate: str) -> list[Obj]:
    """JSON patch ops adding a scheduling gate to a Pod being created (none if it has it)."""
    if is_gated(pod, gate):
        return []
    value = {"name": gate}
    if (pod.get("spec") or {}).get("schedulingGates"):
        return [{"op": "add", "path": "/spec/schedulingGates/-", "value": value}]
    return [{"op": "add", "path": "/spec/schedulingGates", "value": [value]}]


def pin_to_host(affinity: Obj | None, host: str) -> Obj:
    """An affinity whose every required node-selector term also names node `host`: the
    narrowing Kubernetes allows on a gated Pod (terms are ORed, so each one gains it; none
    is added or removed)."""
    ours = {"key": HOST_FIELD, "operator": "In", "values": [host]}
    merged = json.loads(json.dumps(affinity or {}))
    node = merged.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [
        {**term, "matchFields": [*term.get("matchFields", []), ours]} for term in terms]
    return merged


def pinned_host(pod: Obj) -> str | None:
    """The node admitter pinned the Pod to (`pin_to_host`), if it did."""
    required = ((((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or ():
        for field in term.get("matchFields") or ():
            if (field.get("key") == HOST_FIELD and field.get("operator") == "In"
                    and len(field.get("values") or ()) == 1):
                return str(field["values"][0])
    return None


UNREACHABLE_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
"""What the node lifecycle controller taints a node with when it stops reporting Ready."""


def node_is_up(node: Obj) -> bool:
    """Whether kube-scheduler may still bind pods to the node as the decision core counted
    it: not cordoned, and not tainted as not Ready or unreachable (nor will the core hint it
    again while it is so)."""
    spec = node.get("spec") or {}
    return not spec.get("unschedulable") and not any(
        taint.get("key") in UNREACHABLE_TAINTS for taint in spec.get("taints") or ())


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests of one pod, as kube-scheduler counts them: the containers and the
    native sidecars (init containers with `restartPolicy: Always`, which keep running) summed,
    at least what any init container needs beside the sidecars started before it, plus
    `overhead`. A limit stands in for a missing request (the API server's defaulting)."""
    running: dict[str, Decimal] = {}
    for container in pod_spec.get("containers") or ():
        _add(running, _container_requests(container))
    sidecars: dict[str, Decimal] = {}
    starting: dict[str, Decimal] = {}
    for container in pod_spec.get("initContainers") or ():
        requests = _container_requests(container)
        during = dict(sidecars)  # an init container starts beside the sidecars before it
        _add(during, requests)
        for resource, amount in during.items():
            starting[resource] = max(starting.get(resource, Decimal(0)), amount)
        if container.get("restartPolicy") == "Always":
            _add(running, requests)
            _add(sidecars, requests)
    for resource, amount in starting.items():
        running[resource] = max(running.get(resource, Decimal(0)), amount)
    _add(running, _container_requests({"resources": {"requests": pod_spec.get("overhead")}}))
    return running


def _add(total: dict[str, Decimal], amounts: Mapping[str, Decimal]) -> None:
    for resource, amount in amounts.items():
        total[resource] = total.get(resource, Decimal(0)) + amount


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    # Each container's amount rounded up as kube-scheduler counts it (a `500m` memory
    # request is 1 byte): the API server accepts what admitter's own notation refuses.
    return {name: from_base_units(name, kube_base_units(name, value))
            for name, value in merged.items()}


def placement_constraints(pod_spec: Mapping[str, Any], affinity: Obj | None) -> Obj:
    """The pod set fields that restrict nodes: tolerations, nodeSelector and the required
    node affinity's terms, each only when present."""
    constraints: Obj = {}
    tolerations = [{k: t[k] for k in ("key", "operator", "value", "effect") if t.get(k)}
                   for t in pod_spec.get("tolerations") or ()]
    if tolerations:
        constraints["tolerations"] = tolerations
    if pod_spec.get("nodeSelector"):
        constraints["nodeSelector"] = dict(pod_spec["nodeSelector"])
    required = (((affinity or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [{k: [_requirement(r) for r in term[k]]
              for k in ("matchExpressions", "matchFields") if term.get(k)}
             for term in required.get("nodeSelectorTerms") or ()]
    if terms:
        constraints["nodeSelectorTerms"] = terms
    return constraints


def _requirement(requirement: Mapping[str, Any]) -> Obj:
    found: Obj = {"key": requirement["key"], "operator": requirement["operator"]}
    if requirement.get("values"):
        found["values"] = list(requirement["values"])
    return found


PARSED_TIMES_KEPT = 1 << 16
"""Timestamps `parse_time` remembers: more than the tens of thousands of waiting Workloads a
large cluster holds, so a pass parses none it parsed before, at about 11 MiB when full."""


@lru_cache(maxsize=PARSED_TIMES_KEPT)
def parse_time(text: str | None) -> float | None:
    """Seconds since the epoch of an API timestamp; cached, since every pass reads the
    creation time of every pending Workload."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def format_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(obj: Obj, kind: str) -> Obj | None:
    """The object's condition of that type, as stored (not to be modified)."""
    status = obj.get("status")
    for item in status.get("conditions", ()) if status else ():
        if item.get("type") == kind:
            found: Obj = item
            return found
    return None


def is_true(obj: Obj, kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def evicting(wl: Obj) -> bool:
    """Marked evicted while it still holds its admission: its job is being suspended, and
    its quota is released once it is (`Actions.evict`). An admission drops the mark."""
    return bool((wl.get("status") or {}).get("admission")) and is_true(wl, CONDITION_EVICTED)


TERMINAL_POD_PHASES = ("Succeeded", "Failed")
"""A Pod in these phases runs no more and holds nothing on its node."""


def narrower_domains(admission: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The admission's pod sets pinned to a domain of their own, by pod set name."""
    return {entry["podSet"]: dict(entry.get("domain") or {})
            for entry in admission.get("podSetDomains") or ()}
