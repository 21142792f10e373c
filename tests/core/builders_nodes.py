"""One-line builders for the node-model and placement tests: nodes in racks, gangs, workloads."""

from __future__ import annotations

from admitter.core.model import GPU, Node, PodSet, Taint, Toleration, TopologyRequest, Workload
from admitter.core.nodes import ClusterState
from admitter.core.topology import HOSTNAME

BLOCK = "topology.admitter.dev/block"
RACK = "topology.admitter.dev/rack"
LEVELS = (BLOCK, RACK, HOSTNAME)
CPU = "cpu"


def node(
    name: str,
    gpus: int = 8,
    *,
    block: str | None = "b1",
    rack: str | None = None,
    used: int = 0,
    cpu: int | None = None,
    unschedulable: bool = False,
    taints: tuple[Taint, ...] = (),
) -> Node:
    """A GPU node; `used` GPUs held by pods admitter does not manage."""
    labels = {HOSTNAME: name}
    if block is not None:
        labels[BLOCK] = block
    if rack is not None:
        labels[RACK] = rack
    allocatable = {GPU: gpus} if cpu is None else {GPU: gpus, CPU: cpu}
    return Node(name, allocatable, labels, unschedulable, taints, {GPU: used} if used else {})


def gang(
    count: int,
    gpus: int,
    name: str = "main",
    *,
    cpu: int = 0,
    tolerations: tuple[Toleration, ...] = (),
) -> PodSet:
    requests = {GPU: gpus, CPU: cpu} if cpu else {GPU: gpus}
    return PodSet(name, count, requests, tolerations)


def workload(
    key: str, *pod_sets: PodSet, required: str | None = None, preferred: str | None = None
) -> Workload:
    return Workload(key, "q", pod_sets, 0.0, topology=TopologyRequest(required, preferred))


def cluster(*nodes: Node, levels: tuple[str, ...] = LEVELS) -> ClusterState:
    return ClusterState(nodes, levels)
