"""Controller and simulator settings: one model, so a scenario tunes what production runs."""

from __future__ import annotations

from pydantic import Field, field_validator

from admitter.api.base import MAX_K_VALUE, ApiModel
from admitter.api.duration import Duration
from admitter.core.decisions import CycleSettings

_CORE = CycleSettings()
"""The cycle's own defaults: the ones a knob left out of the settings file takes."""


class FairShareSettings(ApiModel):
    """Time-based fair share (Ai2's budgets over a lookback window, KAI's kValue)."""

    window: Duration = _CORE.fair_share.window
    """Lookback window for funded GPU-time; 0 turns time-based fair share off."""
    half_life: Duration = _CORE.fair_share.half_life
    """Usage decays by half every half-life inside the window; 0 means no decay."""
    k_value: float = Field(default=_CORE.fair_share.k_value, ge=0)
    """How strongly past over-use shrinks a queue's share of surplus; 0 ignores usage."""

    @field_validator("k_value")
    @classmethod
    def _finite_k_value(cls, k_value: float) -> float:
        if not k_value <= MAX_K_VALUE:  # also refuses nan
            raise ValueError(f"must be at most {MAX_K_VALUE:g}, got {k_value}")
        return k_value


class Settings(ApiModel):
    """Knobs of the admission cycle."""

    cycle: Duration = 10.0
    """Period of the admission cycle (changes also trigger one)."""
    fair_share: FairShareSettings = Field(default_factory=FairShareSettings)
    """Time-based fair share."""
    max_min_runtime: Duration = 8 * 3600.0
    """Cluster default cap on a workload's protected min runtime."""
    pods_ready_timeout: Duration = _CORE.pods_ready_timeout
    """An admitted gang whose pods are not all running by then is evicted and requeued."""
    non_preemptible_priority: int | None = _CORE.non_preemptible_priority
    """Funded workloads whose priority is at least this are never preempted and run only inside
    their queue's deserved quota (KAI's convention); null makes every priority preemptible.
    Kueue's PriorityClass values (1000, 10000) are at or above the default: raise it (or set
    null) so that such Jobs can still be preempted."""
    starvation_bound: Duration = _CORE.starvation_bound
    """After waiting this long, the head of the highest-ranked queue gets capacity reserved
    so a stream of small jobs cannot starve a large gang."""
