"""ClusterQueue: a node of the queue tree that owns quota, with KAI's per-resource knobs."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from admitter.api.base import (
    MAX_OVER_QUOTA_WEIGHT,
    ApiModel,
    Condition,
    ObjectName,
    Priority,
    Resource,
    ResourceName,
    check_amount,
)
from admitter.api.duration import Duration, format_duration
from admitter.api.quantity import Quantity, format_quantity


class ResourceQuotaSpec(ApiModel):
    """How much of one resource a queue deserves, may borrow, and how it shares surplus."""

    quota: Quantity = Decimal(0)
    """Deserved amount, handed out before any surplus; -1 means the parent's whole amount."""
    limit: Quantity = Decimal(-1)
    """Hard cap including borrowed capacity; -1 means no cap."""
    over_quota_weight: float = Field(
        default=1.0, ge=0, le=MAX_OVER_QUOTA_WEIGHT, allow_inf_nan=False
    )
    """Share of surplus relative to siblings of equal priority; 0 takes no surplus."""

    @model_validator(mode="after")
    def _check(self) -> ResourceQuotaSpec:
        for field in ("quota", "limit"):
            value = getattr(self, field)
            if value < 0 and value != -1:
                raise ValueError(
                    f"{field} must be -1 or not negative, got {format_quantity(value)}"
                )
        if self.limit != -1 and self.quota != -1 and self.limit < self.quota:
            raise ValueError(
                f"limit {format_quantity(self.limit)} is below quota "
                f"{format_quantity(self.quota)}"
            )
        if self.quota == -1 and self.limit != -1:
            raise ValueError(
                f"quota -1 (the parent's whole amount) cannot have limit "
                f"{format_quantity(self.limit)}"
            )
        return self


class ClusterQueueSpec(ApiModel):
    """Where a queue sits in the tree and what it may use."""

    parent: ObjectName | None = None
    """Name of the parent ClusterQueue; absent for a root."""
    priority: Priority = 0
    """Among siblings, higher priority receives surplus first; weight only splits equals."""
    resources: dict[ResourceName, ResourceQuotaSpec] = Field(default_factory=dict)
    """Knobs per resource (`nvidia.com/gpu`, `cpu`, `memory`, any extended resource)."""
    max_min_runtime: Duration | None = None
    """Longest protected min runtime a workload here may declare; inherited from the parent,
    8h when no queue on the path sets it."""
    default_min_runtime: Duration | None = None
    """Min runtime given to a Job that declares none (the mutating webhook writes it onto the
    Job's `admitter.dev/min-runtime` annotation); inherited from the parent, capped by the
    effective `maxMinRuntime`. Without one on the path such Jobs are unfunded."""
    max_runtime_ceiling: Duration | None = None
    """Longest maximum run time a workload here may declare; inherited from the parent. None
    on the whole path: any maximum, or none."""
    default_max_runtime: Duration | None = None
    """Maximum run time given to a Job that declares none (the mutating webhook writes it onto
    the Job's `admitter.dev/max-runtime` annotation); inherited from the parent, capped by the
    effective `maxRuntimeCeiling`. Without one on the path such Jobs run until they end."""

    @model_validator(mode="after")
    def _default_within_cap(self) -> ClusterQueueSpec:
        cap, default = self.max_min_runtime, self.default_min_runtime
        if cap is not None and default is not None and default > cap:
            raise ValueError(
                f"defaultMinRuntime {format_duration(default)} is above maxMinRuntime "
                f"{format_duration(cap)}; lower it to at most that"
            )
        ceiling, default = self.max_runtime_ceiling, self.default_max_runtime
        if ceiling is not None and default is not None and default > ceiling:
            raise ValueError(
                f"defaultMaxRuntime {format_duration(default)} is above maxRuntimeCeiling "
                f"{format_duration(ceiling)}; lower it to at most that"
            )
        return self

    @field_validator("resources")
    @classmethod
    def _whole_amounts(
        cls, resources: dict[str, ResourceQuotaSpec]
    ) -> dict[str, ResourceQuotaSpec]:
        for resource, knobs in resources.items():
            for field in ("quota", "limit"):
                amount = getattr(knobs, field)
                if amount != -1:
                    try:
                        check_amount(resource, amount)
                    except ValueError as error:
                        raise ValueError(f"{resource}.{field}: {error}") from None
        return resources


class UsageBucket(ApiModel):
    """Funded GPU time used during one hour, kept so usage survives controller restarts."""

    start: datetime
    """Start of the hour."""
    gpu_seconds: float = Field(ge=0)
    """Funded GPU-seconds charged in that hour."""


class ClusterQueueStatus(ApiModel):
    """What the queue holds and deserves now, as the last admission cycle saw it."""

    allocated: dict[ResourceName, Quantity] = Field(default_factory=dict)
    """Requests of admitted workloads in this queue and its descendants."""
    fair_share: dict[ResourceName, Quantity] = Field(default_factory=dict)
    """Deserved plus the surplus this queue is entitled to now."""
    deserved: dict[ResourceName, Quantity] = Field(default_factory=dict)
    """min(quota, requestable): granted regardless of siblings."""
    pending_workloads: int = 0
    """Workloads waiting for admission."""
    admitted_workloads: int = 0
    """Workloads holding quota."""
    gpu_hours_in_window: float = 0.0
    """Funded GPU-hours used inside the fair-share lookback window."""
    gpu_budget: float = 0.0
    """GPUs this queue is budgeted: its deserved GPU quota, then its GPU over-quota weight's
    part of what its siblings' quotas leave, down from the schedulable GPUs."""
    owed_gpu_hours_in_window: float = 0.0
    """Its budget over the whole lookback window: the funded GPU-hours it is owed there if
    it keeps submitting enough work (0 with time-based fair share off)."""
    rank: int = 0
    """Its place among its siblings in the order they are offered capacity (1 = first):
    lower use of its budget first."""
    usage: list[UsageBucket] = Field(default_factory=list)
    """Hourly funded GPU time inside the window (leaf queues); the basis of time-based fair
    share."""
    usage_accounted_at: datetime | None = None
    """Usage has been charged up to this moment."""
    conditions: list[Condition] = Field(default_factory=list)
    """Latest observations, e.g. `Active`."""


class ClusterQueue(Resource):
    """A node in the hierarchical queue tree; workloads are admitted into leaves only."""

    kind_name: ClassVar[str] = "ClusterQueue"
    plural: ClassVar[str] = "clusterqueues"
    short_names: ClassVar[tuple[str, ...]] = ("cq",)
    namespaced: ClassVar[bool] = False

    kind: Literal["ClusterQueue"] = "ClusterQueue"
    """Always `ClusterQueue`."""
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    """Desired state."""
    status: ClusterQueueStatus | None = None
    """Observed state, written by the controller."""
