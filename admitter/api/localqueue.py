"""LocalQueue: the namespaced door into a leaf ClusterQueue, and so the tenancy boundary."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from admitter.api.base import ApiModel, Condition, ObjectName, Resource


class LocalQueueSpec(ApiModel):
    """Which leaf ClusterQueue this namespace's workloads are charged to."""

    cluster_queue: ObjectName
    """Name of a leaf ClusterQueue."""


class LocalQueueStatus(ApiModel):
    """Counts of this LocalQueue's workloads."""

    pending_workloads: int = 0
    """Workloads waiting for admission."""
    admitted_workloads: int = 0
    """Workloads holding quota."""
    conditions: list[Condition] = Field(default_factory=list)
    """Latest observations, e.g. `Active` false when the ClusterQueue is missing."""


class LocalQueue(Resource):
    """A namespace can only submit through its LocalQueues."""

    kind_name: ClassVar[str] = "LocalQueue"
    plural: ClassVar[str] = "localqueues"
    short_names: ClassVar[tuple[str, ...]] = ("lq",)
    namespaced: ClassVar[bool] = True

    kind: Literal["LocalQueue"] = "LocalQueue"
    """Always `LocalQueue`."""
    spec: LocalQueueSpec
    """Desired state."""
    status: LocalQueueStatus | None = None
    """Observed state, written by the controller."""
