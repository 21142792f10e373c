"""Workload: admitter's record of one managed Job, and the source of truth for its admission."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from admitter.api.base import (
    ApiModel,
    Condition,
    LabelKey,
    ObjectName,
    Priority,
    Resource,
    ResourceList,
)
from admitter.api.contract import max_runtime_problem
from admitter.api.duration import Duration, format_duration

CONDITION_QUOTA_RESERVED = "QuotaReserved"
CONDITION_ADMITTED = "Admitted"
CONDITION_EVICTED = "Evicted"
CONDITION_FINISHED = "Finished"
CONDITION_DISPATCHED = "Dispatched"
"""On a Workload admitted onto a worker: True while its copy runs there, with the cluster, the
copy and its pods' counts; False with the reason it could not be created."""
CONDITION_ACTIVE = "Active"
"""A queue's condition: whether it can admit (ClusterQueue and LocalQueue status)."""


class Reason(StrEnum):
    """The reasons of the conditions the controller writes and of the Events that repeat
    them. Why a Workload waits is the core's PendingReason, why it was evicted its
    EvictionReason (or JOB_CHANGED)."""

    QUOTA_RESERVED = "QuotaReserved"
    """QuotaReserved=True: admitted into a ClusterQueue."""
    ADMITTED = "Admitted"
    """Admitted=True, and the Event on the Job that says so."""
    REQUEUED = "Requeued"
    """QuotaReserved=False after an eviction: it waits for admission again."""
    FINISHED = "Finished"
    """QuotaReserved=False once finished, and the Event that its quota was released."""
    SUCCEEDED = "Succeeded"
    """Finished=True: its Job completed (or its Pod succeeded)."""
    FAILED = "Failed"
    """Finished=True: its Job (or Pod) failed."""
    JOB_GONE = "JobGone"
    """Finished=True: its Job was deleted and left it behind (orphaned). (A Workload stopped at
    its maximum run time is Finished with its eviction reason, `MaxRuntimeExceeded`.)"""
    JOB_CHANGED = "JobChanged"
    """Evicted=True: the Job no longer matches its Workload."""
    HOST_UNAVAILABLE = "HostUnavailable"
    """Evicted=True: a node its admission counted pods on went down before they were placed
    there (docs/placement.md); requeued at once."""
    INVALID_CONTRACT = "InvalidContract"
    """Event: a Job's scheduling contract cannot be read; it stays suspended."""
    UNREADABLE = "Unreadable"
    """Event: an object the controller cannot understand, skipped on its own."""
    REFUSED = "Refused"
    """Event: the API server refused a write for the job's own content (its Workload would
    hold more pod sets than allowed); retried as the job changes, and at each sweep."""
    READY = "Ready"
    """A queue's Active=True."""
    TERMINATING = "Terminating"
    """A queue's Active=False: being deleted."""
    PARENT_CYCLE = "ParentCycle"
    """A ClusterQueue's Active=False: on or below a parent cycle, so out of the tree."""
    PARENT_MISSING = "ParentMissing"
    """A ClusterQueue's Active=False: below a parent that does not exist."""
MAX_POD_COUNT = 100_000
"""Kubernetes' own cap on an indexed Job's completions; no gang is larger."""
MAX_POD_SETS = 8
"""Kueue's limit on pod sets per Workload; a Job has one."""
MAX_BLOCKERS_SHOWN = 16
"""Workloads a waiting Workload's status names as those whose protection it waits for."""


class TolerationSpec(ApiModel):
    """A core/v1 Toleration of the pod template (`tolerationSeconds` plays no part in fit)."""

    key: str = ""
    """Taint key; empty with `Exists` tolerates every taint."""
    operator: Literal["Equal", "Exists"] = "Equal"
    """`Equal` compares the value, `Exists` any value."""
    value: str = ""
    """Taint value for `Equal`."""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    """Effect tolerated; empty tolerates every effect."""


class NodeSelectorRequirementSpec(ApiModel):
    """A core/v1 NodeSelectorRequirement."""

    key: str = Field(min_length=1)
    """Node label key (or `metadata.name` in `matchFields`)."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    """How the node's value is compared with `values`."""
    values: list[str] = Field(default_factory=list)
    """Values for In/NotIn; one integer for Gt/Lt; none for Exists/DoesNotExist."""


class NodeSelectorTermSpec(ApiModel):
    """A core/v1 NodeSelectorTerm: its requirements are ANDed."""

    match_expressions: list[NodeSelectorRequirementSpec] = Field(default_factory=list)
    """Requirements on node labels."""
    match_fields: list[NodeSelectorRequirementSpec] = Field(default_factory=list)
    """Requirements on node fields (`metadata.name`)."""


class TopologyRequestSpec(ApiModel):
    """Where the gang must, or should, be kept together."""

    required: LabelKey | None = None
    """Node label key of a Topology level: all pods in one domain of it."""
    preferred: LabelKey | None = None
    """Node label key of a level tried first, falling back level by level."""


class PodSetSpec(ApiModel):
    """A group of identical pods, with where kube-scheduler may put them."""

    name: str = Field(min_length=1)
    """Pod set name; `main` for a plain Job."""
    count: int = Field(ge=1, le=MAX_POD_COUNT)
    """How many pods (the Job's parallelism)."""
    requests: ResourceList = Field(default_factory=dict)
    """Effective requests of one pod, as kube-scheduler counts them: containers and native
    sidecars summed, at least each init container with the sidecars started before it, plus
    the pod's overhead."""
    tolerations: list[TolerationSpec] = Field(default_factory=list)
    """The pod template's tolerations: only nodes whose blocking taints they tolerate count."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """The pod template's nodeSelector: only nodes with every one of these labels count."""
    node_selector_terms: list[NodeSelectorTermSpec] = Field(default_factory=list)
    """The pod template's own required node affinity (terms ORed; empty: none). admitter's
    topology pin is kept apart, in the admission's `topologyDomain`."""
    topology: TopologyRequestSpec | None = None
    """This pod set's own placement constraint, inside the workload's domain: from its pod
    template's topology annotations (a JobSet's replicated job in one rack)."""


class WorkloadSpec(ApiModel):
    """What the workload needs and the scheduling contract it declared."""

    queue_name: ObjectName
    """The LocalQueue, in the workload's namespace, it was submitted to."""
    pod_sets: list[PodSetSpec] = Field(min_length=1, max_length=MAX_POD_SETS)
    """Pod sets admitted together, all or nothing."""
    priority: Priority = 0
    """Orders workloads inside their queue only; at or above the settings'
    `nonPreemptiblePriority` (100 by default) it is never preempted."""
    priority_class_name: str | None = None
    """The PriorityClass the priority came from."""
    min_runtime: Duration = 0.0
    """Protected from preemption and charged to the budget for this long; 0 = unfunded."""
    resumable: bool = True
    """Whether progress survives preemption (the job checkpoints)."""
    topology: TopologyRequestSpec | None = None
    """Optional placement constraint."""
    max_runtime: Duration | None = None
    """How long it may run in all, its admissions added up; then it is stopped and finished,
    never requeued. Absent: no maximum."""

    @model_validator(mode="after")
    def _max_runtime_fits_the_contract(self) -> WorkloadSpec:
        if self.max_runtime is not None:
            problem = max_runtime_problem(self.max_runtime, self.min_runtime, None)
            if problem is not None:
                raise ValueError(f"maxRuntime {format_duration(self.max_runtime)} {problem}")
        return self


class NodeHint(ApiModel):
    """How many pods of a pod set the admission check assumed on a node."""

    pod_set: str
    """Pod set name."""
    node: str
    """Node name."""
    count: int = Field(ge=1)
    """Pods assumed there."""


class LeaderTerm(ApiModel):
    """The leadership an admission was written under: the fencing token the API server
    checks against the Lease (deploy/leader-fence.yaml), so a deposed leader's write that
    was already on its way when another replica took over is refused."""

    lease: str = Field(min_length=3, pattern=r"^[^/]+/[^/]+$")
    """The Lease, as namespace/name."""
    holder: str = Field(min_length=1)
    """The Lease's holderIdentity when the admission was written."""
    term: int = Field(ge=0)
    """The Lease's leaseTransitions when the holder took it: one number per holding."""


class PodSetDomain(ApiModel):
    """The domain one pod set is pinned to, when its own topology request narrows it."""

    pod_set: str
    """Pod set name."""
    domain: dict[str, str]
    """Node label key and value of every level on the domain's path."""


class Admission(ApiModel):
    """Where and when the workload was admitted."""

    cluster_queue: ObjectName
    """The leaf ClusterQueue charged."""
    topology_domain: dict[str, str] = Field(default_factory=dict)
    """Node label key and value injected as a required node affinity, e.g. rack = r3."""
    pod_set_domains: list[PodSetDomain] = Field(default_factory=list)
    """Pod sets placed in a narrower domain of their own, inside `topologyDomain`."""
    node_hints: list[NodeHint] = Field(default_factory=list)
    """Per-node pod counts the gang-fit check assumed."""
    admitted_at: datetime
    """When the admission was recorded."""
    admitted_by: LeaderTerm | None = None
    """The leader's term it was written in; absent when the controller runs unelected."""


class WorkloadStatus(ApiModel):
    """Admission state, recorded before the Job is touched so a restart can finish or undo it."""

    conditions: list[Condition] = Field(default_factory=list)
    """`QuotaReserved`, `Admitted`, `Evicted`, `Finished`, each with reason and message."""
    admission: Admission | None = None
    """Set while the workload holds quota."""
    charged_gpu_seconds: float = 0.0
    """Funded GPU-seconds charged to the queue's budget so far."""
    eviction_count: int = 0
    """How many times the workload was evicted and requeued."""
    past_run_seconds: float = 0.0
    """How long its earlier admissions ran, added up: what its maximum run time counts
    besides the current run (Kueue's accumulatedPastExecutionTimeSeconds)."""
    requeue_at: datetime | None = None
    """Earliest next admission after a pods-ready timeout (exponential backoff)."""
    blocked_until: datetime | None = None
    """While it waits: when the fact its `QuotaReserved=False` condition names ends by itself,
    if known (the end of the min-runtime protection of the work that could make room)."""
    blocked_by: list[str] = Field(default_factory=list, max_length=MAX_BLOCKERS_SHOWN)
    """While it waits for others' min-runtime protection: those workloads (namespace/name),
    the first MAX_BLOCKERS_SHOWN of them."""


class Workload(Resource):
    """One per managed Job; owned by the Job so it is deleted with it."""

    kind_name: ClassVar[str] = "Workload"
    plural: ClassVar[str] = "workloads"
    short_names: ClassVar[tuple[str, ...]] = ("wl",)
    namespaced: ClassVar[bool] = True

    kind: Literal["Workload"] = "Workload"
    """Always `Workload`."""
    spec: WorkloadSpec
    """What the workload needs."""
    status: WorkloadStatus | None = None
    """Observed state, written by the controller."""
