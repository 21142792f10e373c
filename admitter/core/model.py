"""The decision core's view of the world: plain, immutable values with no Kubernetes types.

Amounts are integers in each resource's base unit: devices for `nvidia.com/gpu` and other
extended resources, millicores for `cpu`, bytes for `memory`. Times are seconds on one clock
that the caller supplies (`Snapshot.now`); the core never reads a clock of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

GPU = "nvidia.com/gpu"
UNLIMITED = -1
"""`quota: -1` means the parent's whole amount; `limit: -1` means no cap."""

NON_PREEMPTIBLE_PRIORITY = 100
"""The default of `CycleSettings.non_preemptible_priority` (KAI's convention): workloads at or
above it are never evicted and only run inside deserved quota."""

Resources = dict[str, int]


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One queue's knobs for one resource, with KAI's meanings."""

    quota: int = 0
    limit: int = UNLIMITED
    over_quota_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Queue:
    """A ClusterQueue. `order` is its creation rank, the last tie-break among siblings."""

    name: str
    parent: str | None = None
    priority: int = 0
    resources: dict[str, ResourceQuota] = field(default_factory=dict)
    order: int = 0
    max_min_runtime: float | None = None
    max_runtime_ceiling: float | None = None

    def knobs(self, resource: str) -> ResourceQuota:
        """A resource the queue does not list has quota 0, no limit, weight 1."""
        return self.resources.get(resource, _DEFAULT_KNOBS)


_DEFAULT_KNOBS = ResourceQuota()


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    """core/v1 Toleration; an empty key with `Exists` tolerates every taint, an empty effect
    every effect."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep a pod off a node; PreferNoSchedule only scores, so fit ignores it."""


def tolerates_all(tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...]) -> bool:
    """kube-scheduler's TaintToleration filter: every blocking taint has a toleration."""
    for taint in taints:
        if taint.effect in BLOCKING_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return False
    return True


SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One core/v1 NodeSelectorRequirement: `key` is a label key, or `metadata.name` in a
    term's `fields`."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        """Whether a node whose label (or field) `key` is `value` (None: absent) satisfies it.
        Gt/Lt compare integers; a missing or non-integer value never matches them."""
        operator = self.operator
        if operator == "In":
            return value is not None and value in self.values
        if operator == "NotIn":
            return value is None or value not in self.values
        if operator == "Exists":
            return value is not None
        if operator == "DoesNotExist":
            return value is None
        if value is None or len(self.values) != 1:
            return False
        try:
            have, bound = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else operator == "Lt" and have < bound


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements ANDed over the node's labels (`expressions`) and its name (`fields`);
    a term with neither matches no node, as in Kubernetes."""

    expressions: tuple[NodeSelectorRequirement, ...] = ()
    fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False
        for requirement in self.expressions:
            if not requirement.matches(labels.get(requirement.key)):
                return False
        for requirement in self.fields:
            if not requirement.matches(name if requirement.key == "metadata.name" else None):
                return False
        return True


@dataclass(frozen=True, slots=True)
class NodeSelection:
    """Where the pods may land by the nodes' labels and names: every `selector` label (the
    pod's nodeSelector) and, when there are `terms` (required node affinity), at least one
    of them. The empty selection takes every node."""

    selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[NodeSelectorTerm, ...] = ()

    def matches(self, node: Node) -> bool:
        labels = node.labels
        for key, value in self.selector:
            if labels.get(key) != value:
                return False
        if not self.terms:
            return True
        return any(term.matches(node.name, labels) for term in self.terms)


ANYWHERE = NodeSelection()


@dataclass(frozen=True, slots=True)
class Node:
    """A node as the scheduler sees it. `used` counts pods admitter does not manage."""

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    used: Resources = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """Node label keys naming topology levels; `None` means no constraint at that strength."""

    required: str | None = None
    preferred: str | None = None


NO_TOPOLOGY = TopologyRequest()


@dataclass(frozen=True, slots=True)
class PodSet:
    """`count` identical pods, each asking for `requests` (the pod's effective request), that
    kube-scheduler puts only on nodes whose blocking taints `tolerations` tolerate and that
    `selection` matches. `topology` keeps this pod set's pods in one domain of a level
    (inside the workload's own domain), as a JobSet's leader and its workers each in a rack."""

    name: str
    count: int
    requests: Resources
    tolerations: tuple[Toleration, ...] = ()
    selection: NodeSelection = ANYWHERE
    topology: TopologyRequest = NO_TOPOLOGY

    def admits(self, node: Node) -> bool:
        """Whether kube-scheduler's taint and node-affinity filters let these pods on `node`
        (resources and cordons aside)."""
        return tolerates_all(self.tolerations, node.taints) and self.selection.matches(node)

    def selection_key(self) -> NodeSelection | None:
        """The selection for memo keys: None for the shared empty one, since hashing a frozen
        dataclass runs interpreted (docs/admission-cycle.md, Speed) and the cycle hashes every
        pending workload's shape."""
        return None if self.selection is ANYWHERE else self.selection

    def topology_key(self) -> tuple[str | None, str | None] | None:
        """The topology for memo keys: None when unconstrained (see `selection_key`)."""
        if self.topology is NO_TOPOLOGY:
            return None
        return self.topology.required, self.topology.preferred

    def total(self) -> dict[str, int]:
        return {r: q * self.count for r, q in self.requests.items()}


def is_funded(min_runtime: float) -> bool:
    """The scheduling contract's funded rule: a positive minimum runtime is protected and
    charged to the queue's budget; 0 is unfunded (free, preemptible at any time)."""
    return min_runtime > 0


class Phase(Enum):
    PENDING = "Pending"
    ADMITTED = "Admitted"
    FINISHED = "Finished"


class ShapeKey:
    """A workload's shape as a memo key (`Workload.shape`): hashed once. A nested tuple's hash
    is computed again on every lookup, and the cycle looks a shape up for nearly every waiting
    workload it tries (placement failures, gang-fit demands, preemption attempts)."""

    __slots__ = ("_hash", "parts")

    def __init__(self, parts: tuple[object, ...]) -> None:
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, ShapeKey) and self._hash == other._hash
                                 and self.parts == other.parts)

    def __repr__(self) -> str:
        return f"ShapeKey({self.parts!r})"


@dataclass(frozen=True, slots=True)
class Workload:
    """One gang: every pod of every pod set runs, or none does.

    `min_runtime` seconds are protected from preemption and charged to the queue's budget;
    0 makes the workload unfunded (free, preemptible at any moment). `submitted_at` survives
    requeueing so a preempted workload keeps its place. `placement` maps node name to pod
    count for an admitted workload (assumed or bound); `pod_set_placements` is the same split
    per pod set (in `pod_sets` order), needed to count heterogeneous pod sets exactly.
    `pods_ready` turns false while an admitted gang waits for its pods to run; `eligible_at`
    is the earliest readmission after a pods-ready timeout (backoff). `max_runtime` bounds the
    time it may run in all, its admissions added up: `ran_before` is what its earlier
    admissions ran (a resumable job requeued by time-slicing would otherwise run for ever).
    """

    key: str
    queue: str
    pod_sets: tuple[PodSet, ...]
    submitted_at: float
    priority: int = 0
    min_runtime: float = 0.0
    resumable: bool = True
    topology: TopologyRequest = NO_TOPOLOGY
    phase: Phase = Phase.PENDING
    admitted_at: float | None = None
    placement: dict[str, int] = field(default_factory=dict)
    pod_set_placements: tuple[Mapping[str, int], ...] = ()
    pods_ready: bool = True
    eligible_at: float = 0.0
    max_runtime: float | None = None
    ran_before: float = 0.0
    _total: dict[str, int] = field(init=False, repr=False, compare=False)
    _shape: ShapeKey = field(init=False, repr=False, compare=False)
    _held_gpus: dict[str, int] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        total: dict[str, int] = {}
        for pod_set in self.pod_sets:
            for resource, amount in pod_set.requests.items():
                total[resource] = total.get(resource, 0) + amount * pod_set.count
        object.__setattr__(self, "_total", total)
        object.__setattr__(self, "_shape", ShapeKey(tuple(
            [(p.count, tuple(sorted(p.requests.items())), p.tolerations, p.selection_key(),
              p.topology_key()) for p in self.pod_sets])))
        object.__setattr__(self, "_held_gpus", None)

    @property
    def funded(self) -> bool:
        return is_funded(self.min_runtime)

    def preemptible(self, non_preemptible_priority: int | None) -> bool:
        """Whether it may ever be evicted; None as the threshold makes every priority so."""
        return non_preemptible_priority is None or self.priority < non_preemptible_priority

    def requests(self) -> dict[str, int]:
        """Total requests over all pod sets (computed once; the cycle asks often)."""
        return self._total

    def shape(self) -> ShapeKey:
        """Pod counts, requests, tolerations and node selections per pod set, hashable:
        workloads with equal shapes (and topology) fit in exactly the same places."""
        return self._shape

    def admitted(self, at: float, per_pod_set: tuple[Mapping[str, int], ...]) -> Workload:
        """This workload admitted at `at` with its pods where `per_pod_set` says (pod set
        order). The constructor, not `dataclasses.replace`: half the time, for every admission
        of a cycle and of the simulator."""
        return Workload(self.key, self.queue, self.pod_sets, self.submitted_at, self.priority,
                        self.min_runtime, self.resumable, self.topology, Phase.ADMITTED, at,
                        merged_placement(per_pod_set), per_pod_set, self.pods_ready,
                        self.eligible_at, self.max_runtime, self.ran_before)

    def gpus_per_node(self) -> dict[str, int]:
        """`held_per_node` of GPUs, worked out once: a cycle asks it of every running workload
        several times (the headroom, the drain, the victim searches), and a kept core's running
        workloads outlive cycles. Shared by every caller: never change it."""
        known = self._held_gpus
        if known is None:
            known = _held_per_node(self, GPU)
            object.__setattr__(self, "_held_gpus", known)
        return known

    def protected_until(self) -> float | None:
        """End of the protected min runtime, or None when not running or unfunded."""
        if self.admitted_at is None or not self.funded:
            return None
        return self.admitted_at + self.min_runtime

    def runs_out_at(self) -> float | None:
        """When it reaches its maximum run time, or None when not running or unbounded."""
        if self.admitted_at is None or self.max_runtime is None:
            return None
        return self.admitted_at + self.max_runtime - self.ran_before

    def pods_ready_deadline(self, timeout: float, now: float) -> float | None:
        """When it is evicted unless its pods are all ready by then: `timeout` after its
        admission, or after `now` for one holding no admission time (so never due yet); None
        once they are ready."""
        if self.pods_ready:
            return None
        return (now if self.admitted_at is None else self.admitted_at) + timeout

    def running_moments(self, pods_ready_timeout: float,
                        now: float) -> tuple[float | None, float | None, float | None]:
        """The moments a cycle compares its `now` with while this workload runs, None for one
        it has not: its pods-ready deadline and the end of its maximum run time (step 1), the
        end of its protected min runtime (step 1 and the eviction rule)."""
        return (self.pods_ready_deadline(pods_ready_timeout, now), self.runs_out_at(),
                self.protected_until())

    def starves_at(self, starvation_bound: float) -> float:
        """When its wait passes the starvation bound, and a drain may make room for it."""
        return self.submitted_at + starvation_bound


def recorded_placements(workload: Workload) -> Sequence[Mapping[str, int]]:
    """Per pod set placement of an admitted workload; one pod set may use `placement` alone."""
    if workload.pod_set_placements:
        return workload.pod_set_placements
    if len(workload.pod_sets) == 1:
        return (workload.placement,)
    raise ValueError(f"admitted workload {workload.key} has no per pod set placement")


def held_per_node(workload: Workload, resource: str) -> dict[str, int]:
    """How much of `resource` an admitted workload holds on each node (where it holds any).
    GPUs are kept on the workload (`Workload.gpus_per_node`): never change the answer."""
    return workload.gpus_per_node() if resource == GPU else _held_per_node(workload, resource)


def _held_per_node(workload: Workload, resource: str) -> dict[str, int]:
    if len(workload.pod_sets) == 1:  # the common case, without zipping placements
        amount = workload.pod_sets[0].requests.get(resource, 0)
        if amount <= 0:
            return {}
        counts = (workload.pod_set_placements[0] if workload.pod_set_placements
                  else workload.placement)
        return {node: amount * count for node, count in counts.items() if count > 0}
    held: dict[str, int] = {}
    for pod_set, counts in zip(workload.pod_sets, recorded_placements(workload), strict=True):
        amount = pod_set.requests.get(resource, 0)
        for node, count in counts.items():
            held[node] = held.get(node, 0) + amount * count
    return {node: amount for node, amount in held.items() if amount > 0}


@dataclass(frozen=True, slots=True)
class FairShareSettings:
    """Time-based fair share. `window == 0` turns it off (usage then plays no part)."""

    window: float = 7 * 86400.0
    half_life: float = 0.0
    k_value: float = 1.0


class PlainRecord:
    """Value semantics for the plain classes the core makes by the thousand instead of
    dataclasses (whose generated methods run interpreted, docs/admission-cycle.md, Speed):
    equal, hashed and shown by `_fields()`. Read-only by convention."""

    __slots__ = ()

    def _fields(self) -> tuple[object, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PlainRecord) and type(other) is type(self)
                and self._fields() == other._fields())

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self._fields()!r}"


def merged_placement(per_pod_set: tuple[Mapping[str, int], ...]) -> dict[str, int]:
    """Pods per node over all pod sets (`Workload.placement` from `pod_set_placements`)."""
    merged: dict[str, int] = {}
    for counts in per_pod_set:
        for node, count in counts.items():
            merged[node] = merged.get(node, 0) + count
    return merged
