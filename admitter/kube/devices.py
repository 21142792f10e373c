"""How many devices of each mapped DeviceClass each node has, from the ResourceSlices DRA
drivers publish: a node's capacity of a quota resource that DeviceClasses map to
(`deviceClassMappings`) is the number of its devices those classes select.

A DeviceClass selects devices with CEL expressions. admitter evaluates the subset real GPU
classes use: a conjunction (`&&`) of `device.driver == "<driver>"` and
`device.attributes["<domain>"].<name> == <string, integer or boolean>` (NVIDIA's
`gpu.nvidia.com` class is `device.driver == 'gpu.nvidia.com' &&
device.attributes['gpu.nvidia.com'].type == 'gpu'`). A class with any other expression
selects nothing here, and a warning names it: counting devices it might not select would
offer GPUs kube-scheduler cannot allocate, and never admitting more than the cluster has
comes first.

Devices not counted, each for a stated reason:
- devices of slices not bound to one node (`allNodes`, `nodeSelector`,
  `perDeviceNodeSelection`: network-attached devices): the node model charges a pod's
  devices to the node it runs on;
- devices that consume shared counters (partitionable devices: MIG profiles beside the
  whole GPU they are cut from) or allow multiple allocations: several of them are one
  piece of hardware, so their number is not the number of pods they serve;
- devices tainted NoSchedule or NoExecute: kube-scheduler allocates them only to claims
  tolerating the taint;
- slices of an older generation of their pool (a driver replacing its slices).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from admitter.kube.objects import Obj

log = logging.getLogger(__name__)

CLASS_LABEL_NAME = "admitter-devices"


def class_label(device_class: str) -> str:
    """The label admitter's node model gives a node that publishes devices of the class, and
    asks for in the node selector of a pod set claiming them (never written to a Node): the
    pod can run only where its class's devices are, whatever other GPUs a node has."""
    return f"{device_class}/{CLASS_LABEL_NAME}"


@dataclass(frozen=True)
class DevicesOnNode:
    """What DRA drivers publish on one node, as admitter's node model counts it."""

    counts: dict[str, int] = field(default_factory=dict)
    """Quota resource → devices of the classes mapped to it."""
    classes: frozenset[str] = frozenset()
    """The mapped DeviceClasses with at least one device counted here."""

    def labels(self) -> dict[str, str]:
        return {class_label(name): "true" for name in sorted(self.classes)}


NO_DEVICES = DevicesOnNode()

NodeDevices = dict[str, DevicesOnNode]
"""Node name → its devices."""

DevicePredicate = Callable[[str, Mapping[str, Any]], bool]
"""(driver, the device's attributes) → whether a DeviceClass selects it."""

_STRING = r"""(?:"([^"\\]*)"|'([^'\\]*)')"""
_DRIVER = re.compile(rf"device\.driver\s*==\s*{_STRING}")
_ATTRIBUTE = re.compile(
    rf"device\.attributes\[\s*{_STRING}\s*\]\.([A-Za-z_][A-Za-z0-9_]*)\s*==\s*"
    rf"(?:{_STRING}|(true|false)|(-?[0-9]+))")
_TERM = re.compile(rf"(?:{_STRING}|[^'\"&])+")


def class_selector(device_class: Obj) -> DevicePredicate | None:
    """What the DeviceClass selects, or None when a selector is outside the subset admitter
    evaluates."""
    terms: list[DevicePredicate] = []
    for selector in (device_class.get("spec") or {}).get("selectors") or ():
        expression = ((selector or {}).get("cel") or {}).get("expression")
        if not isinstance(expression, str):
            return None
        for part in _conjuncts(expression):
            term = _term(part)
            if term is None:
                return None
            terms.append(term)
    return lambda driver, attributes: all(term(driver, attributes) for term in terms)


def _conjuncts(expression: str) -> list[str]:
    """The operands of the top-level `&&`s, outer parentheses dropped; one unparsable part
    (`||`, a lone `&`) is returned whole so it is refused."""
    parts, rest = [], expression.strip()
    while rest:
        found = _TERM.match(rest)
        end = found.end() if found else 0
        parts.append(rest[:end].strip())
        rest = rest[end:]
        if rest.startswith("&&"):
            rest = rest[2:].lstrip()
        elif rest:
            return [expression]
    return [_unwrapped(part) for part in parts]


def _unwrapped(part: str) -> str:
    while part.startswith("(") and part.endswith(")"):
        part = part[1:-1].strip()
    return part


def _term(part: str) -> DevicePredicate | None:
    driver = _DRIVER.fullmatch(part)
    if driver:
        wanted = driver.group(1) if driver.group(1) is not None else driver.group(2)
        return lambda found, attributes: found == wanted
    attribute = _ATTRIBUTE.fullmatch(part)
    if attribute is None:
        return None
    groups = attribute.groups()
    domain = groups[0] if groups[0] is not None else groups[1]
    name = groups[2]
    value: Any
    if groups[3] is not None or groups[4] is not None:
        value = ("string", groups[3] if groups[3] is not None else groups[4])
    elif groups[5] is not None:
        value = ("bool", groups[5] == "true")
    else:
        value = ("int", int(groups[6]))

    def matches(driver: str, attributes: Mapping[str, Any]) -> bool:
        # An attribute of the driver's own domain may be published without its domain.
        found = attributes.get(f"{domain}/{name}")
        if found is None and domain == driver:
            found = attributes.get(name)
        kind, wanted = value
        return isinstance(found, Mapping) and kind in found and found[kind] == wanted

    return matches


def _counted(device: Obj) -> bool:
    if device.get("consumesCounters") or device.get("allowMultipleAllocations"):
        return False
    return not any(taint.get("effect") in ("NoSchedule", "NoExecute")
                   for taint in device.get("taints") or ())


def current_slices(slices: Iterable[Obj]) -> list[Obj]:
    """The node-local slices of each pool's newest generation."""
    newest: dict[tuple[str, str], int] = {}
    local = []
    for slice_ in slices:
        spec = slice_.get("spec") or {}
        if not spec.get("nodeName"):
            continue
        pool = spec.get("pool") or {}
        key = (spec.get("driver", ""), pool.get("name", ""))
        generation = int(pool.get("generation", 0))
        newest[key] = max(newest.get(key, generation), generation)
        local.append((key, generation, slice_))
    return [slice_ for key, generation, slice_ in local if generation == newest[key]]


DeviceKey = tuple[str, str, str]
"""(driver, pool, device): how a claim's allocation names a device."""


@dataclass(frozen=True)
class Published:
    """A device of a mapped class: its node, the quota resources and the classes it counts
    for."""

    node: str
    resources: frozenset[str]
    classes: frozenset[str]


def published_devices(slices: Iterable[Obj], classes: Iterable[Obj],
                      mapping: Mapping[str, str],
                      warn: Callable[[str], None] = log.warning) -> dict[DeviceKey, Published]:
    """The devices that classes `mapping` (DeviceClass → quota resource) maps select, with
    the resources they count as. A mapped class whose selectors admitter does not evaluate
    is told to `warn` and selects nothing."""
    selectors: list[tuple[str, str, DevicePredicate]] = []
    for device_class in classes:
        name = device_class["metadata"]["name"]
        if name not in mapping:
            continue
        predicate = class_selector(device_class)
        if predicate is None:
            warn(f"DeviceClass {name} has a selector admitter does not evaluate (it reads "
                 "`device.driver ==` and `device.attributes[...].name ==` joined by &&): "
                 f"its devices are not counted as {mapping[name]}")
            continue
        selectors.append((name, mapping[name], predicate))
    found: dict[DeviceKey, Published] = {}
    if not selectors:
        return found
    for slice_ in current_slices(slices):
        spec = slice_["spec"]
        node, driver = spec["nodeName"], spec.get("driver", "")
        pool = (spec.get("pool") or {}).get("name", "")
        for device in spec.get("devices") or ():
            if not _counted(device):
                continue
            attributes = device.get("attributes") or {}
            selecting = [(name, resource) for name, resource, predicate in selectors
                         if predicate(driver, attributes)]
            if selecting:
                found[(driver, pool, device.get("name", ""))] = Published(
                    node, frozenset(resource for _, resource in selecting),
                    frozenset(name for name, _ in selecting))
    return found


def node_devices(published: Mapping[DeviceKey, Published]) -> NodeDevices:
    """Per node, the devices of each mapped quota resource (a device selected by several
    classes of one resource counts once), and the classes it has devices of."""
    counts: dict[str, dict[str, int]] = {}
    present: dict[str, set[str]] = {}
    for device in published.values():
        amounts = counts.setdefault(device.node, {})
        for resource in device.resources:
            amounts[resource] = amounts.get(resource, 0) + 1
        present.setdefault(device.node, set()).update(device.classes)
    return {node: DevicesOnNode(amounts, frozenset(present[node]))
            for node, amounts in counts.items()}


def claim_pods(claim: Obj) -> set[str]:
    """The names of the pods a ResourceClaim is reserved for or owned by (a claim made from
    a pod's template is owned by the pod)."""
    status = claim.get("status") or {}
    reserved = {entry.get("name", "") for entry in status.get("reservedFor") or ()
                if entry.get("resource") == "pods"}
    owners = {owner.get("name", "") for owner in claim["metadata"].get("ownerReferences") or ()
              if owner.get("kind") == "Pod"}
    return reserved | owners


def held_devices(claims: Iterable[Obj], published: Mapping[DeviceKey, Published],
                 holds: Callable[[Obj], bool]) -> dict[str, dict[str, int]]:
    """Per node, the devices of mapped classes allocated to the claims `holds` picks, by
    quota resource: what they take from the node whatever admission says."""
    found: dict[str, dict[str, int]] = {}
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or ()
        if not results or not holds(claim):
            continue
        for result in results:
            device = published.get((result.get("driver", ""), result.get("pool", ""),
                                    result.get("device", "")))
            if device is None:
                continue
            amounts = found.setdefault(device.node, {})
            for resource in device.resources:
                amounts[resource] = amounts.get(resource, 0) + 1
    return found
