"""Core-model objects in one line: nodes labelled by block and rack, gangs, workloads, queues."""

from __future__ import annotations

from dataclasses import replace

from admitter.core.model import (
    GPU,
    UNLIMITED,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Phase,
    PodSet,
    Queue,
    ResourceQuota,
    Taint,
    Toleration,
    TopologyRequest,
    Workload,
)
from admitter.core.nodes import ClusterState
from admitter.core.queue_tree import QueueTree
from admitter.core.topology import CLUSTER, HOSTNAME
from admitter.testing import BLOCK_LABEL as BLOCK
from admitter.testing import RACK_LABEL as RACK

__all__ = ["BLOCK", "CPU", "GIB", "GPU", "HOSTNAME", "LEVELS", "MEMORY", "RACK", "ZONE", "cluster",
           "gang", "job", "knobs", "node", "queue", "racks", "requirement", "running_on",
           "term", "tree", "workload"]

ZONE = "topology.admitter.dev/zone"
"""A level above blocks, for the benchmarks' largest clusters."""
LEVELS = (BLOCK, RACK, HOSTNAME)
CPU, MEMORY = "cpu", "memory"
GIB = 1 << 30


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
    cluster: str | None = None,
) -> Node:
    """A GPU node; `used` GPUs held by pods admitter does not manage; `cluster` names the
    cluster of a fleet it belongs to."""
    labels = {HOSTNAME: name}
    if cluster is not None:
        labels[CLUSTER] = cluster
    if block is not None:
        labels[BLOCK] = block
    if rack is not None:
        labels[RACK] = rack
    allocatable = {GPU: gpus} if cpu is None else {GPU: gpus, CPU: cpu}
    return Node(name, allocatable, labels, unschedulable, taints, {GPU: used} if used else {})


def racks(count: int, nodes_per_rack: int = 2, gpus: int = 8, blocks: int = 1) -> list[Node]:
    """`count` racks per block of `nodes_per_rack` nodes, named b0-r1-n0 and labelled so."""
    return [node(f"b{b}-r{r}-n{n}", gpus, block=f"b{b}", rack=f"r{r}", cpu=96_000)
            for b in range(blocks) for r in range(count) for n in range(nodes_per_rack)]


def cluster(*nodes: Node, levels: tuple[str, ...] = LEVELS) -> ClusterState:
    return ClusterState(nodes, levels)


def requirement(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    """One node-affinity requirement: `requirement(RACK, "In", "r1", "r2")`."""
    return NodeSelectorRequirement(key, operator, values)


def term(*expressions: NodeSelectorRequirement,
         fields: tuple[NodeSelectorRequirement, ...] = ()) -> NodeSelectorTerm:
    """A required node-affinity term: its label expressions and field requirements ANDed."""
    return NodeSelectorTerm(expressions, fields)


def gang(
    count: int,
    gpus: int,
    name: str = "main",
    *,
    cpu: int = 0,
    tolerations: tuple[Toleration, ...] = (),
    required: str | None = None,
    preferred: str | None = None,
) -> PodSet:
    """`count` pods of `gpus` GPUs each (and `cpu` millicores), kept in one domain of the
    `required` level (or of `preferred` where one fits) if given."""
    requests = {GPU: gpus, CPU: cpu} if cpu else {GPU: gpus}
    if required is None and preferred is None:
        return PodSet(name, count, requests, tolerations)
    return PodSet(name, count, requests, tolerations,
                  topology=TopologyRequest(required, preferred))


def workload(
    key: str,
    *pod_sets: PodSet,
    queue: str = "q",
    at: float = 0.0,
    priority: int = 0,
    min_runtime: float = 0.0,
    resumable: bool = True,
    required: str | None = None,
    preferred: str | None = None,
) -> Workload:
    """A pending workload of explicit pod sets, submitted `at`; unfunded unless given a
    `min_runtime`."""
    return Workload(key, queue, pod_sets, at, priority, min_runtime, resumable,
                    TopologyRequest(required, preferred))


def job(key: str, queue_name: str, gpus: int = 8, pods: int = 1, *, at: float = 0.0,
        min_runtime: float = 3600.0, priority: int = 0, resumable: bool = True,
        required: str | None = None, preferred: str | None = None) -> Workload:
    """A pending funded gang of `pods` pods × `gpus` GPUs (one hour protected)."""
    return workload(key, gang(pods, gpus), queue=queue_name, at=at, priority=priority,
                    min_runtime=min_runtime, resumable=resumable, required=required,
                    preferred=preferred)


def running_on(key: str, queue_name: str, node: str, *, resumable: bool = True,
               gpus: int = 8, min_runtime: float = 3600.0, at: float = 0.0,
               priority: int = 0) -> Workload:
    """A one-pod workload of `gpus` GPUs admitted at `at` on `node`; unfunded with a
    `min_runtime` of 0."""
    return Workload(key, queue_name, (PodSet("main", 1, {GPU: gpus}),), at, priority,
                    min_runtime=min_runtime, resumable=resumable, phase=Phase.ADMITTED,
                    admitted_at=at, placement={node: 1}, pod_set_placements=({node: 1},))


def knobs(quota: int = 0, weight: float = 1.0, limit: int = UNLIMITED) -> ResourceQuota:
    return ResourceQuota(quota=quota, limit=limit, over_quota_weight=weight)


def queue(name: str, quota: int = 0, *, parent: str | None = None, weight: float = 1.0,
          limit: int = UNLIMITED, priority: int = 0, order: int = 0,
          **other: ResourceQuota) -> Queue:
    """A queue whose GPU knobs are `quota`, `weight` and `limit`; other resources' knobs by
    keyword (`cpu=knobs(4)`)."""
    resources = {GPU: knobs(quota, weight, limit), **other}
    return Queue(name, parent, priority, resources, order)


def tree(*queues: Queue) -> QueueTree:
    """A tree whose creation order is the argument order, like a scenario file."""
    return QueueTree(replace(q, order=i) for i, q in enumerate(queues))
