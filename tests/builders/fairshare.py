"""Fair-share divisions of a queue tree, in one call."""

from __future__ import annotations

from collections.abc import Mapping

from admitter.core.fairshare import FairShare, compute_fair_share
from admitter.core.model import GPU
from admitter.core.queue_tree import QueueTree


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
