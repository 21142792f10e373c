"""Controller and simulator settings: one model, so a scenario tunes what production runs."""

from __future__ import annotations

from pydantic import Field

from admitter.api.base import ApiModel
from admitter.api.duration import Duration
from admitter.core.model import NON_PREEMPTIBLE_PRIORITY


class FairShareSettings(ApiModel):
    """Time-based fair share (Ai2's budgets over a lookback window, KAI's kValue)."""

    window: Duration = 7 * 86400.0
    """Lookback window for funded GPU-time; 0 turns time-based fair share off."""
    half_life: Duration = 0.0
    """Usage decays by half every half-life inside the window; 0 means no decay."""
    k_value: float = Field(default=1.0, ge=0)
    """How strongly past over-use shrinks a queue's share of surplus; 0 ignores usage."""


class Settings(ApiModel):
    """Knobs of the admission cycle."""

    cycle: Duration = 10.0
    """Period of the admission cycle (changes also trigger one)."""
    fair_share: FairShareSettings = Field(default_factory=FairShareSettings)
    """Time-based fair share."""
    max_min_runtime: Duration = 8 * 3600.0
    """Cluster default cap on a workload's protected min runtime."""
    pods_ready_timeout: Duration = 600.0
    """An admitted gang whose pods are not all running by then is evicted and requeued."""
    non_preemptible_priority: int | None = NON_PREEMPTIBLE_PRIORITY
    """Funded workloads whose priority is at least this are never preempted and run only inside
    their queue's deserved quota (KAI's convention); null makes every priority preemptible.
    Kueue's PriorityClass values (1000, 10000) are at or above the default: raise it (or set
    null) so that such Jobs can still be preempted."""
    starvation_bound: Duration = 1800.0
    """After waiting this long, the head of the highest-ranked queue gets capacity reserved
    so a stream of small jobs cannot starve a large gang."""
