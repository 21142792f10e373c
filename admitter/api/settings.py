"""Controller and simulator settings: one model, so a scenario tunes what production runs."""

from __future__ import annotations

from pydantic import Field

from admitter.api.base import ApiModel
from admitter.api.duration import Duration

MAX_K_VALUE = 1000.0
"""kValue scales usage against weights in fair share: beyond a thousand, usage alone decides,
and the products must stay finite."""


class FairShareSettings(ApiModel):
    """Time-based fair share (Ai2's budgets over a lookback window, KAI's kValue)."""

    window: Duration = 7 * 86400.0
    """Lookback window for funded GPU-time; 0 turns time-based fair share off."""
    half_life: Duration = 0.0
    """Usage decays by half every half-life inside the window; 0 means no decay."""
    k_value: float = Field(default=1.0, ge=0, le=MAX_K_VALUE, allow_inf_nan=False)
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
    starvation_bound: Duration = 1800.0
    """After waiting this long, the head of the highest-ranked queue gets capacity reserved
    so a stream of small jobs cannot starve a large gang."""
