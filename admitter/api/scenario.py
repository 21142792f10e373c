"""The scenario file read by `admitter simulate` and `admitter fairshare`.

It reuses the API's own models (ClusterQueue spec, quantities, durations, settings) so that a
scenario describes exactly what a cluster would hold.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from admitter.api.base import ApiModel, LabelKey, ObjectName, ResourceList
from admitter.api.clusterqueue import ClusterQueueSpec
from admitter.api.duration import Duration
from admitter.api.settings import Settings
from admitter.api.workload import TopologyRequestSpec

CLUSTER_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A cluster's name is a label value on its nodes: a DNS label."""


class TaintSpec(ApiModel):
    """A node taint, as in core/v1."""

    key: str
    """Taint key."""
    value: str = ""
    """Taint value."""
    effect: str = "NoSchedule"
    """NoSchedule or NoExecute keep pods without a toleration away."""


class NodeGroup(ApiModel):
    """`count` identical nodes named `<namePrefix><i>`."""

    count: int = Field(ge=1)
    """How many nodes."""
    name_prefix: str = Field(min_length=1)
    """Prefix of the node names; the index follows."""
    capacity: ResourceList
    """Allocatable resources of one node."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels, including the topology levels' keys."""
    taints: list[TaintSpec] = Field(default_factory=list)
    """Taints of every node in the group."""


class ClusterSpec(ApiModel):
    """The simulated nodes of one cluster and their topology."""

    topology: list[str] = Field(default_factory=list)
    """Node label keys, coarsest first; every node is also its own host domain."""
    node_groups: list[NodeGroup] = Field(min_length=1)
    """The nodes."""


class FleetCluster(ClusterSpec):
    """One cluster of a fleet: its nodes, its name, which every node of it carries as the
    `admitter.dev/cluster` label, and labels of its own (region, cost) on every node too."""

    name: str = Field(min_length=1, max_length=63, pattern=CLUSTER_NAME_PATTERN)
    """Cluster name: lowercase letters, digits and '-' (a label value)."""
    labels: dict[LabelKey, str] = Field(default_factory=dict)
    """Labels every node of the cluster carries, e.g. region or cost."""


class ScenarioQueue(ClusterQueueSpec):
    """A ClusterQueue spec plus its name; list roots before their children."""

    name: ObjectName
    """Queue name."""


class ClusterEvent(ApiModel):
    """A change to the cluster at a moment: exactly one of cordon or uncordon."""

    at: Duration
    """When it happens."""
    cordon: str | None = None
    """Node to cordon (drained at min-runtime boundaries)."""
    uncordon: str | None = None
    """Node to make schedulable again."""

    @model_validator(mode="after")
    def _one_action(self) -> ClusterEvent:
        if (self.cordon is None) == (self.uncordon is None):
            raise ValueError("give exactly one of cordon or uncordon")
        return self


class WorkloadTemplate(ApiModel):
    """One workload, or `count` of them submitted `every` apart (named name-0, name-1, …)."""

    name: str = Field(min_length=1)
    """Name, or name prefix when count > 1."""
    queue: str
    """A leaf queue."""
    workload_class: str = Field(default="default", alias="class")
    """Free label for per-class statistics, e.g. debug or training."""
    submit: Duration = 0.0
    """Submission time of the first instance."""
    count: int = Field(default=1, ge=1)
    """Number of instances."""
    every: Duration = 0.0
    """Interval between instances."""
    pods: int = Field(default=1, ge=1)
    """Gang size: all pods run together or none do."""
    pod_requests: ResourceList
    """Requests of one pod."""
    duration: Duration
    """Running time needed if never interrupted."""
    min_runtime: Duration = 0.0
    """Protected from preemption and charged; 0 = unfunded."""
    max_runtime: Duration | None = None
    """Stopped for good once it has run this long in all (admissions added up)."""
    resumable: bool = True
    """Progress survives preemption (true) or is lost (false)."""
    priority: int = 0
    """Orders workloads inside their queue only."""
    topology: TopologyRequestSpec | None = None
    """Placement constraint, as node label keys of the topology."""

    @model_validator(mode="after")
    def _positive_duration(self) -> WorkloadTemplate:
        if self.duration <= 0:
            raise ValueError("duration must be above 0")
        return self


class Scenario(ApiModel):
    """A whole simulation: a cluster or a fleet, queue tree, settings, history and workloads."""

    name: str = "scenario"
    """Shown in reports."""
    horizon: Duration | None = None
    """Stop here; default: when every workload has finished."""
    settings: Settings = Field(default_factory=Settings)
    """The same settings the controller runs with."""
    cluster: ClusterSpec | None = None
    """Nodes and topology of one cluster; give this or `clusters`."""
    clusters: list[FleetCluster] = Field(default_factory=list)
    """A fleet: several clusters, each gang placed wholly inside one; give this or
    `cluster`."""
    queues: list[ScenarioQueue] = Field(min_length=1)
    """The queue tree, roots first; file order is creation order."""
    history: dict[str, float] = Field(default_factory=dict)
    """Funded GPU-hours each leaf used inside the window before time 0."""
    events: list[ClusterEvent] = Field(default_factory=list)
    """Cordons and uncordons."""
    workloads: list[WorkloadTemplate] = Field(default_factory=list)
    """What is submitted."""

    @model_validator(mode="after")
    def _one_cluster_or_a_fleet(self) -> Scenario:
        if (self.cluster is None) == (not self.clusters):
            raise ValueError("give exactly one of cluster (one cluster) or clusters (a fleet)")
        return self
