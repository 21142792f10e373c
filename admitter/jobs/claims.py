"""Devices a pod claims through Dynamic Resource Allocation, counted as quota resources.

A pod lists its claims in `spec.resourceClaims`; each names a ResourceClaimTemplate (one
ResourceClaim made per pod, so per-pod demand) or a ResourceClaim by name (one claim that
any number of pods, of this job or others, may share). A template's requests ask for devices
of a DeviceClass; the settings map some classes to a quota resource (`deviceClassMappings`).
What admitter can count, and what it refuses and why:

- an `exactly` request of a mapped class, allocation mode `ExactCount` (the default, count 1):
  `count` devices per pod, charged as `count` of the mapped resource;
- a `firstAvailable` list whose alternatives are all of one DeviceClass and count (differing
  only in their selectors): the same charge and the same nodes whichever kube-scheduler
  picks. Alternatives that differ are refused: the choice is made at allocation, after
  admission, so no charge or node made before it is right;
- allocation mode `All` is refused: it takes every matching device of the node the pod lands
  on, a number known only once it is placed;
- a class with no mapping is refused: its devices could not be charged to anything;
- an `exactly` request with `adminAccess` is not charged: it gets devices other claims may
  hold already (monitoring, in namespaces an admin labelled for it) and takes none from them;
- a ResourceClaim referenced by name is refused: it is allocated once and shared by every pod
  naming it, inside this job or outside it, so it is neither per-pod demand nor this job's
  alone. Give each pod its own claim through a ResourceClaimTemplate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from admitter.api.contract import ContractError
from admitter.kube.objects import Obj

TEMPLATE_KIND = "ResourceClaimTemplate"

ClaimTemplates = Callable[[str, str], Obj | None]
"""(namespace, name) → the ResourceClaimTemplate, or None when there is none."""


def _no_templates(namespace: str, name: str) -> Obj | None:
    return None


class UncountableClaim(ContractError):
    """A claim admitter cannot charge to quota; `field` is where in the pod spec it is."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class MissingTemplate(UncountableClaim):
    """The ResourceClaimTemplate a claim names does not exist (yet): the job waits for it."""


@dataclass(frozen=True)
class DeviceClaims:
    """The settings' DeviceClass mappings and the ResourceClaimTemplates to read them with."""

    classes: Mapping[str, str] = field(default_factory=dict)
    """DeviceClass name → the quota resource its devices count as."""
    templates: ClaimTemplates = _no_templates

    def requests(self, namespace: str, pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
        """The quota resources one pod claims through its `resourceClaims`; raises
        UncountableClaim, naming the claim (`resourceClaims[i]`) and why, for a claim that
        cannot be counted."""
        return self.claimed(namespace, pod_spec)[0]

    def claimed(self, namespace: str, pod_spec: Mapping[str, Any],
                ) -> tuple[dict[str, Decimal], set[str]]:
        """`requests`, and the DeviceClasses claimed: the pod fits only a node publishing
        devices of each."""
        found: dict[str, Decimal] = {}
        classes: set[str] = set()
        for index, claim in enumerate(pod_spec.get("resourceClaims") or ()):
            where = f"resourceClaims[{index}]"
            if not self.classes:
                raise UncountableClaim(where, (
                    "no DeviceClass is mapped to a quota resource (the settings' "
                    "deviceClassMappings is empty), so admitter cannot charge devices claimed "
                    "through DRA; ask the cluster admin to map the class"))
            name = claim.get("name", "")
            if claim.get("resourceClaimName"):
                raise UncountableClaim(where, (
                    f"claim {name!r} names ResourceClaim {claim['resourceClaimName']!r}, which "
                    "every pod naming it shares: admitter charges quota per pod and cannot "
                    "count a shared claim; use resourceClaimTemplateName so each pod gets "
                    "its own claim"))
            template_name = claim.get("resourceClaimTemplateName")
            if not template_name:
                raise UncountableClaim(where, f"claim {name!r} names no "
                                              "resourceClaimTemplateName")
            template = self.templates(namespace, template_name)
            if template is None:
                raise MissingTemplate(where, (
                    f"ResourceClaimTemplate {template_name!r} is not in namespace "
                    f"{namespace!r}; the job is queued once it exists"))
            devices = (((template.get("spec") or {}).get("spec") or {}).get("devices") or {})
            for request in devices.get("requests") or ():
                if (request.get("exactly") or {}).get("adminAccess"):
                    continue  # a device in use already, watched by an admin's pod: no charge
                try:
                    device_class, resource, count = self._request(request, template_name)
                except UncountableClaim as error:
                    raise UncountableClaim(where, str(error)) from None
                found[resource] = found.get(resource, Decimal(0)) + count
                classes.add(device_class)
        return found, classes

    def _request(self, request: Obj, template: str) -> tuple[str, str, Decimal]:
        """(DeviceClass, quota resource, devices) of one device request of a template."""
        where = f"ResourceClaimTemplate {template!r} request {request.get('name', '')!r}"
        if request.get("firstAvailable"):
            options = {self._exact(option, f"{where} alternative {option.get('name', '')!r}")
                       for option in request["firstAvailable"]}
            if len(options) > 1:
                listed = ", ".join(f"{count} of {device_class}"
                                   for device_class, _, count in sorted(options))
                raise UncountableClaim(where, (
                    f"its firstAvailable alternatives differ ({listed}); kube-scheduler picks "
                    "one only after admission, so admitter can neither charge it nor know "
                    "which nodes fit it: list alternatives of one DeviceClass and count "
                    "(differing in selectors), or one request"))
            return options.pop()
        return self._exact(request.get("exactly") or {}, where)

    def _exact(self, request: Obj, where: str) -> tuple[str, str, Decimal]:
        """(DeviceClass, quota resource, devices) of an `exactly` request or a
        `firstAvailable` option."""
        device_class = request.get("deviceClassName", "")
        resource = self.classes.get(device_class)
        if resource is None:
            mapped = ", ".join(sorted(self.classes)) or "none"
            raise UncountableClaim(where, (
                f"DeviceClass {device_class!r} has no quota resource (deviceClassMappings "
                f"maps: {mapped}); ask the cluster admin to map it"))
        mode = request.get("allocationMode") or "ExactCount"
        if mode != "ExactCount":
            raise UncountableClaim(where, (
                f"allocationMode {mode} takes every matching device of the node the pod lands "
                "on, a number admitter cannot know at admission; ask for a count "
                "(allocationMode ExactCount)"))
        count = int(request.get("count", 1))
        if count < 1:
            raise UncountableClaim(where, f"count {count} must be at least 1")
        return device_class, resource, Decimal(count)


NO_CLAIMS = DeviceClaims()
"""No class mapped: any claim is refused."""
