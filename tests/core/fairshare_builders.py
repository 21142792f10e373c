"""One-line builders for the fair-share tests: queues, trees and GPU-only divisions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from admitter.core.fairshare import FairShare, compute_fair_share
from admitter.core.model import GPU, UNLIMITED, Queue, ResourceQuota
from admitter.core.queue_tree import QueueTree

CPU, MEMORY = "cpu", "memory"
GIB = 1 << 30


def knobs(quota: int = 0, weight: float = 1.0, limit: int = UNLIMITED) -> ResourceQuota:
    return ResourceQuota(quota=quota, limit=limit, over_quota_weight=weight)


def queue(
    name: str,
    parent: str | None = None,
    *,
    gpu: ResourceQuota | None = None,
    priority: int = 0,
    **other: ResourceQuota,
) -> Queue:
    """`queue("q1", gpu=knobs(2, weight=3))`; other resources by keyword (`cpu=`, `memory=`)."""
    resources = dict(other) if gpu is None else {GPU: gpu, **other}
    return Queue(name=name, parent=parent, priority=priority, resources=resources)


def tree(*queues: Queue) -> QueueTree:
    """A tree whose creation order is the argument order, like a scenario file."""
    return QueueTree(replace(q, order=i) for i, q in enumerate(queues))


def divide(
    queues: QueueTree,
    capacity: Mapping[str, int],
    demand: Mapping[str, Mapping[str, int]],
    usage: Mapping[str, float] | None = None,
    k: float = 0.0,
) -> FairShare:
    return compute_fair_share(queues, capacity, demand, usage or {}, k)


def gpu_shares(
    queues: QueueTree,
    gpus: int,
    demand: Mapping[str, int],
    usage: Mapping[str, float] | None = None,
    k: float = 0.0,
) -> dict[str, int]:
    """GPU fair share of every queue when only GPUs are demanded."""
    result = divide(queues, {GPU: gpus}, {q: {GPU: d} for q, d in demand.items()}, usage, k)
    return {name: result.share(name, GPU) for name in queues}
