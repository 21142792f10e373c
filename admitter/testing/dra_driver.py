"""A test DRA driver for KWOK nodes: it publishes each node's GPUs as a ResourceSlice, as a
real driver's kubelet plugin does (NVIDIA's `gpu.nvidia.com`: one pool per node, named after
it, one slice per pool, owned by the Node so it goes with it), and the DeviceClass that
selects them with NVIDIA's own expression. The API server, the resource-claim controller
and kube-scheduler do the rest: a ResourceClaim per pod from its template, the allocation
written to the claim's status, the pod bound to the node of its devices. Nothing prepares
the devices on the node (KWOK runs no kubelet), which admission never looks at."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj
from admitter.testing.nodes import GpuNodeLayout

DRIVER = "gpu.nvidia.com"
DEVICE_CLASS = "gpu.nvidia.com"
PRODUCT = "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True)
class DraNodeLayout(GpuNodeLayout):
    """KWOK nodes whose GPUs only the DRA driver publishes (no `nvidia.com/gpu` from a device
    plugin), in racks and blocks of their own (`dra-rack-<n>`, `dra-block-<n>`)."""

    gpus_per_node: int = 0
    name_prefix: str = "dra-node"

    def rack(self, index: int) -> str:
        return f"dra-{super().rack(index)}"

    def block(self, index: int) -> str:
        return f"dra-{super().block(index)}"


def device_class(name: str = DEVICE_CLASS, driver: str = DRIVER) -> Obj:
    """The DeviceClass NVIDIA's driver installs for whole GPUs."""
    return {"apiVersion": kube.DEVICE_CLASSES.group_version, "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": (
                f"device.driver == '{driver}' && "
                f"device.attributes['{driver}'].type == 'gpu'")}}]}}


def resource_slice(node: Obj, gpus: int, driver: str = DRIVER, generation: int = 1) -> Obj:
    """The slice of `node`'s pool: `gpus` whole GPUs, with the attributes NVIDIA's driver
    publishes (type, index, uuid, productName) and their memory."""
    name = node["metadata"]["name"]
    devices = [{
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "index": {"int": index},
            "uuid": {"string": f"GPU-{name}-{index:02d}"},
            "productName": {"string": PRODUCT},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    } for index in range(gpus)]
    return {"apiVersion": kube.RESOURCE_SLICES.group_version, "kind": "ResourceSlice",
            "metadata": {"name": f"{name}-{driver}",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                              "uid": node["metadata"]["uid"]}]},
            "spec": {"driver": driver, "nodeName": name,
                     "pool": {"name": name, "generation": generation,
                              "resourceSliceCount": 1},
                     "devices": devices}}


def claim_template(namespace: str, name: str, count: int,
                   device_class_name: str = DEVICE_CLASS, **exactly: Any) -> Obj:
    """A ResourceClaimTemplate asking for `count` devices of the class (`exactly`: more
    fields of the request, e.g. allocationMode)."""
    return {"apiVersion": kube.RESOURCE_CLAIM_TEMPLATES.group_version,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": device_class_name, "allocationMode": "ExactCount",
                "count": count, **exactly}}]}}}}


def claiming(pod_spec: Obj, template: str) -> Obj:
    """The pod spec with its GPUs asked for through a claim from `template` instead of a
    device plugin's `nvidia.com/gpu`, every container given the claim."""
    spec = {**pod_spec, "resourceClaims": [{"name": "gpus",
                                            "resourceClaimTemplateName": template}]}
    containers = []
    for container in pod_spec["containers"]:
        resources = dict(container.get("resources") or {})
        for section in ("limits", "requests"):
            kept = {k: v for k, v in (resources.get(section) or {}).items()
                    if k != "nvidia.com/gpu"}
            resources.pop(section, None)
            if kept:
                resources[section] = kept
        containers.append({**container, "resources": {**resources,
                                                      "claims": [{"name": "gpus"}]}})
    spec["containers"] = containers
    return spec


class TestDriver:
    """Publishes the ResourceSlices of some nodes and the DeviceClass; `withdraw` takes them
    back (a driver uninstalled)."""

    __test__ = False  # not a pytest test class

    def __init__(self, api: Kube, driver: str = DRIVER) -> None:
        self.api, self.driver = api, driver
        self.published: list[str] = []

    async def publish(self, node_names: list[str], gpus: int) -> None:
        await self.api.create(kube.DEVICE_CLASSES, device_class(driver=self.driver))
        for name in node_names:
            node = await self.api.get(kube.NODES, name)
            created = await self.api.create(kube.RESOURCE_SLICES,
                                            resource_slice(node, gpus, self.driver))
            self.published.append(created["metadata"]["name"])

    async def withdraw(self) -> None:
        for name in self.published:
            await self.api.delete(kube.RESOURCE_SLICES, name)
        await self.api.delete(kube.DEVICE_CLASSES, DEVICE_CLASS)
        self.published = []
