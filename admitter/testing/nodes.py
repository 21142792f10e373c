"""Fake GPU nodes described compactly and expanded into Node objects that KWOK will animate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
BLOCK_LABEL = "topology.admitter.dev/block"
RACK_LABEL = "topology.admitter.dev/rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# KWOK only manages (heartbeats, runs pods on) nodes carrying this label.
KWOK_NODE_LABEL = "kwok.x-k8s.io/node"
KWOK_NODE_SELECTOR = f"{KWOK_NODE_LABEL}=fake"
# A pod with this annotation (a Go duration such as "5s") runs that long, then Succeeds.
SIMULATED_RUNTIME_ANNOTATION = "admitter.dev/simulated-runtime"


@dataclass(frozen=True)
class GpuNodeLayout:
    """Identical GPU nodes filled rack by rack, racks grouped into blocks.

    Node i sits in rack i // nodes_per_rack, which sits in block rack // racks_per_block; the
    rack and block label values are `rack-<n>` and `block-<n>`, numbered cluster-wide.
    """

    nodes: int = 8
    gpus_per_node: int = 8
    nodes_per_rack: int = 2
    racks_per_block: int = 2
    cpu: str = "96"
    memory: str = "1Ti"
    pods: int = 256
    name_prefix: str = "gpu-node"

    def __post_init__(self) -> None:
        if min(self.nodes, self.nodes_per_rack, self.racks_per_block) < 1:
            raise ValueError(f"layout needs at least one node per rack and rack per block: {self}")

    def node_name(self, index: int) -> str:
        return f"{self.name_prefix}-{index:04d}"

    def node_names(self) -> list[str]:
        return [self.node_name(i) for i in range(self.nodes)]

    def rack(self, index: int) -> str:
        return f"rack-{index // self.nodes_per_rack}"

    def block(self, index: int) -> str:
        return f"block-{index // self.nodes_per_rack // self.racks_per_block}"

    def nodes_in_rack(self, rack: str) -> list[str]:
        return [self.node_name(i) for i in range(self.nodes) if self.rack(i) == rack]

    def manifests(self) -> list[dict[str, Any]]:
        """Node objects including status: the API server keeps status given on create."""
        resources = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            GPU_RESOURCE: str(self.gpus_per_node),
        }
        return [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": self.node_name(i),
                    "labels": {
                        KWOK_NODE_LABEL: "fake",
                        HOSTNAME_LABEL: self.node_name(i),
                        RACK_LABEL: self.rack(i),
                        BLOCK_LABEL: self.block(i),
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                    },
                },
                "spec": {},
                "status": {"capacity": resources, "allocatable": resources},
            }
            for i in range(self.nodes)
        ]
