"""Test support: a real local Kubernetes control plane (etcd, kube-apiserver, controllers,
scheduler, KWOK fake GPU nodes) started from the binaries that `hack/build.sh` builds."""

from admitter.testing.binaries import Binaries, BinariesMissingError
from admitter.testing.cluster import LocalCluster
from admitter.testing.nodes import (
    BLOCK_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    KWOK_NODE_LABEL,
    RACK_LABEL,
    SIMULATED_RUNTIME_ANNOTATION,
    GpuNodeLayout,
)

__all__ = [
    "BLOCK_LABEL",
    "GPU_RESOURCE",
    "HOSTNAME_LABEL",
    "KWOK_NODE_LABEL",
    "RACK_LABEL",
    "SIMULATED_RUNTIME_ANNOTATION",
    "Binaries",
    "BinariesMissingError",
    "GpuNodeLayout",
    "LocalCluster",
]
