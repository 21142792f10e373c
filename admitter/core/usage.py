"""Time-based fair share: how much funded GPU time each queue used inside the lookback window.

Only funded time is charged (Ai2's allocated occupancy). The records given here are already
funded-only: the caller drops workloads with `min_runtime == 0` before building them, so this
module never sees unfunded time and never needs to ask.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from admitter.core.fairshare import FairShare, compute_fair_share
from admitter.core.model import GPU, FairShareSettings, UsageRecord
from admitter.core.queue_tree import QueueTree

HOUR = 3600.0


def spread_history(
    gpu_hours: Mapping[str, float], now: float, settings: FairShareSettings
) -> list[UsageRecord]:
    """Turn per-queue lumps of funded GPU-hours with no timestamps into records.

    A lump (a scenario's `history: {team-a: 120}`) is read as used evenly over the whole window
    ending at `now`: the only reading that needs no invented timestamps. As time moves on, the
    lump then slides out of the window and decays like any other usage. Off when `window == 0`.
    """
    window = settings.window
    if window <= 0:
        return []
    return [
        UsageRecord(queue=queue, start=now - window, end=now, gpus=hours * HOUR / window)
        for queue, hours in gpu_hours.items()
        if hours > 0
    ]


def windowed_usage(
    records: Iterable[UsageRecord],
    now: float,
    settings: FairShareSettings,
    tree: QueueTree | None = None,
) -> dict[str, float]:
    """Decayed GPU-seconds per queue inside `[now - window, now]`.

    Each record is clipped to the window and its decayed weight 0.5^((now - t) / half_life)
    integrated exactly over what is left; `half_life == 0` means no decay. Keys are the queues
    the records name; with a `tree`, every queue of the tree is present and each parent holds
    the sum of its subtree. Empty when time-based fair share is off (`window == 0`).
    """
    window, half_life = settings.window, settings.half_life
    if window <= 0:
        return {}
    own: dict[str, float] = {}
    for record in records:
        start, end = max(record.start, now - window), min(record.end, now)
        if end <= start or record.gpus <= 0:
            continue
        own[record.queue] = own.get(record.queue, 0.0) + record.gpus * _decayed_seconds(
            now - end, now - start, half_life
        )
    return own if tree is None else tree.roll_up(own, 0.0)


def _decayed_seconds(age_from: float, age_to: float, half_life: float) -> float:
    """∫ 0.5^(age / half_life) d(age) from `age_from` to `age_to` (plain length without decay)."""
    if half_life <= 0:
        return age_to - age_from
    rate = math.log(2) / half_life
    return -math.exp(-rate * age_from) * math.expm1(-rate * (age_to - age_from)) / rate


def normalised_usage(
    tree: QueueTree, raw: Mapping[str, float], cluster_gpus: int, settings: FairShareSettings
) -> dict[str, float]:
    """Usage as the fraction fair share compares against normalised over-quota weights.

    A root's usage is its GPU-seconds over the cluster's GPU-seconds in the window (cluster GPUs
    × window, KAI's normalisation, so 24 GPU-h on 10 GPUs over 10 h scores 0.24). A deeper
    queue's usage is its share of its parent's usage, so siblings add up to 1 like their
    normalised weights do; this deliberately departs from KAI, which compares child weights
    with a cluster-wide fraction. A parent that used nothing gives its children 0.

    Only the leaves' entries of `raw` are read (workloads, hence records, only run on leaves)
    and rolled up here, so `raw` may or may not already hold parent sums. Every queue of the
    tree is in the result; all 0 when the feature is off (`window == 0`).
    The same number serves every resource: usage is GPU time, and a queue that used the GPUs
    is the one that should yield CPU and memory surplus too.
    """
    window = max(settings.window, 0.0)
    own = {name: raw.get(name, 0.0) for name in tree.leaves()} if window else {}
    total = tree.roll_up(own, 0.0)
    cluster = cluster_gpus * window
    usage: dict[str, float] = {}
    for name in tree:
        parent = tree.parent(name)
        whole = cluster if parent is None else total[parent]
        usage[name] = total[name] / whole if whole > 0 else 0.0
    return usage


def fair_share_now(
    tree: QueueTree,
    capacity: dict[str, int],
    demand: dict[str, dict[str, int]],
    records: Iterable[UsageRecord],
    now: float,
    settings: FairShareSettings,
) -> tuple[dict[str, float] | None, dict[str, float], FairShare]:
    """Fair share of `demand` (funded requests per leaf) on `capacity`, surplus weighed by the
    funded usage of the window ending at `now`: the division every cycle makes and `admitter
    fairshare` prints. Also the window's GPU-seconds per queue (subtree sums; None with the
    window off, when usage plays no part) and their normalised form."""
    usage: dict[str, float] = {}
    raw: dict[str, float] | None = None
    if settings.window > 0:
        raw = windowed_usage(records, now, settings, tree)
        usage = normalised_usage(tree, raw, capacity.get(GPU, 0), settings)
    k_value = settings.k_value if settings.window > 0 else 0.0
    return raw, usage, compute_fair_share(tree, capacity, demand, usage, k_value)
