"""Who is offered capacity first: queues level by level, then workloads inside a leaf queue.

Among siblings (`selection.QueueSelector`), in order of precedence:
1. queues with a GPU budget before those without;
2. lower use / budget (`ranking.Ranking.key`: funded GPU time over the window, or GPUs held
   without one), then lower share of budget held now;
3. higher queue priority;
4. lower windowed usage per unit of GPU over-quota weight (usage is GPU time);
5. creation order, then name.
Inside a leaf: higher workload priority, then earlier submission (kept across requeues).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from admitter.core.model import GPU, Workload
from admitter.core.queue_tree import QueueTree


def standing_key(tree: QueueTree, usage: Mapping[str, float],
                 queue: str) -> tuple[int, float, int, str]:
    """The part of the sibling order fixed for a whole cycle: priority, usage per weight,
    creation order, name."""
    spec = tree.queue(queue)
    weight = spec.knobs(GPU).over_quota_weight
    used = usage.get(queue, 0.0)
    usage_per_weight = used / weight if weight > 0 else (math.inf if used > 0 else 0.0)
    return -spec.priority, usage_per_weight, spec.order, queue


def workload_key(workload: Workload) -> tuple[int, float, str]:
    """Order inside a leaf queue: higher priority, then earlier submission, then key."""
    return (-workload.priority, workload.submitted_at, workload.key)
