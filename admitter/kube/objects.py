"""Helpers over Kubernetes objects as the API's own JSON (`Obj`): times, conditions, a pod's
effective requests, the constraints a pod spec puts on nodes. Nothing here knows a job kind
or the decision core."""

from __future__ import annotations

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


def is_gated(pod: Obj) -> bool:
    """Whether admitter's scheduling gate holds the Pod."""
    return any(gate.get("name") == ADMISSION_GATE
               for gate in (pod.get("spec") or {}).get("schedulingGates") or ())


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


@lru_cache(maxsize=1 << 16)
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
