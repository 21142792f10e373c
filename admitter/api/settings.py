"""Controller and simulator settings: one model, so a scenario tunes what production runs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from admitter.api.base import MAX_K_VALUE, ApiModel, LabelKey, ObjectName, ResourceName
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


class ShortJobSettings(ApiModel):
    """Short (debug) jobs: who counts as one, and the room long work leaves them. A funded
    workload is short when it is protected for at most `maxMinRuntime` and is one pod of at
    most `maxGpus` GPUs; short jobs start ahead of long work, may requeue resumable work past
    its min runtime, and long starts leave them room (docs/admission-cycle.md)."""

    max_min_runtime: Duration = _CORE.short_jobs.max_min_runtime
    """A workload protected for at most this long may be short. 15 minutes by default: Ai2's
    debug workloads have "a minimum runtime of 15 minutes or less". 0 makes no workload
    short."""
    max_gpus: int = Field(default=_CORE.short_jobs.max_gpus, ge=1, le=2**31 - 1)
    """The most GPUs a short job's one pod asks for. 4 by default (Ai2's "a small number of
    GPUs"): half an 8-GPU host, so that a short job never needs a whole node emptied.
    Long starts also keep one node with this many GPUs idle or held by work short jobs may
    requeue (or the whole room, if that is smaller: a one-GPU room is not kept as half a
    node)."""
    least_room_fraction: float = Field(default=_CORE.short_jobs.least_room_fraction, ge=0,
                                       lt=1, allow_inf_nan=False)
    """Least part of the schedulable GPUs kept for short jobs, rounded down (none below 50
    GPUs at the default); more when short jobs held more on average over the fair-share
    window. 0.02 by default: Ai2 runs at 98 % occupancy with debug p90 at 30 s, so 2 % fits
    inside what is not occupied anyway. Kept whether or not short work is waiting now: debug
    jobs arrive one at a time, and a room refilled only once one waits would be taken by long
    work in between. The part of it no short-job demand backs costs no more than it keeps: once
    every funded workload has had its turn, a long start that would use more GPUs beyond the
    room than it takes of it goes ahead, and it never keeps a node where nothing runs idle
    (docs/admission-cycle.md, Short jobs and their headroom). Never taken from a queue's
    deserved quota."""


class TimeSlicingSettings(ApiModel):
    """How far apart two allocations must rank (their funded GPU time over their GPU budget)
    before the worse one's work past its min runtime is requeued for the better one's."""

    swap_margin: float = Field(default=_CORE.time_slicing.swap_margin, ge=0,
                               allow_inf_nan=False)
    """Relative gap in ratio beyond which resumable work is requeued. 0.05 by default: half
    the 10 % shortfall Ai2 accepts for its worst-served team, so allocations drift at most 5 %
    from each other before GPUs change hands, which keeps every team well inside the 90 %
    floor without swapping at every cycle. Smaller swaps sooner and more often."""
    non_resumable_gap: float = Field(default=_CORE.time_slicing.non_resumable_gap, ge=0,
                                     allow_inf_nan=False)
    """Relative gap for requeueing non-resumable or short work, which loses what it did. 9 by
    default: the worse allocation must have used at least ten times as much of its budget (an
    order of magnitude); Ai2 requeues only "workloads that can resume later" to rebalance, and
    this keeps the exception for allocations far off their budget. The preemptor's side is
    compared with its own protected run charged, so an allocation that has used next to
    nothing does not requeue hours of non-resumable work for its very first job. At least
    `swapMargin`: work that loses everything is never easier to take than work that resumes."""

    @model_validator(mode="after")
    def _non_resumable_work_is_not_easier_to_take(self) -> TimeSlicingSettings:
        if self.non_resumable_gap < self.swap_margin:
            raise ValueError(f"nonResumableGap ({self.non_resumable_gap:g}) must be at least "
                             f"swapMargin ({self.swap_margin:g})")
        return self


_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")

NEVER_SELECTED = ("kube-system", "kube-public", "kube-node-lease", "admitter-system")
"""Namespaces whose unlabelled work is never queued, whatever the selector says: the
control plane's own, and admitter's (its pods must start for admission to work at all)."""
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace to its name."""


def check_label_value(value: str) -> str:
    if not _LABEL_VALUE.fullmatch(value):
        raise ValueError(f"{value[:80]!r} is not a label value: at most 63 letters, digits, "
                         "'-', '_' or '.', starting and ending with a letter or digit")
    return value


LabelValue = Annotated[str, AfterValidator(check_label_value)]


class LabelSelectorRequirement(ApiModel):
    """One `matchExpressions` entry, as in a Kubernetes LabelSelector."""

    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[LabelValue] = Field(default_factory=list)
    """Required (non-empty) for In and NotIn, empty for Exists and DoesNotExist."""

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs values (key {self.key!r})")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values, got {self.values} "
                             f"(key {self.key!r})")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        match self.operator:
            case "In":
                return labels.get(self.key) in self.values
            case "NotIn":
                return labels.get(self.key) not in self.values
            case "Exists":
                return self.key in labels
        return self.key not in labels


class LabelSelector(ApiModel):
    """A Kubernetes LabelSelector: every `matchLabels` pair and every expression must hold."""

    match_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return (all(labels.get(key) == value for key, value in self.match_labels.items())
                and all(requirement.matches(labels) for requirement in self.match_expressions))


class UnlabelledWork(ApiModel):
    """Opt-in quota for work that names no queue (Kueue's `manageJobsWithoutQueueName` with
    `managedJobsNamespaceSelector`): in the namespaces selected, Jobs without the queue label
    and plain Pods requesting GPUs are queued in the namespace's LocalQueue `localQueue`."""

    namespace_selector: LabelSelector
    """Which namespaces; must name at least one label (an empty selector would select every
    namespace). kube-system, kube-public, kube-node-lease and admitter-system are never
    selected."""
    local_queue: ObjectName = "default"
    """The LocalQueue, in each selected namespace, that unlabelled work goes to (Kueue's
    `localQueueDefaulting` uses `default` too). Work in a selected namespace without it is
    rejected with a message saying so."""

    @field_validator("namespace_selector")
    @classmethod
    def _selects_something_on_purpose(cls, selector: LabelSelector) -> LabelSelector:
        if not selector.match_labels and not selector.match_expressions:
            raise ValueError("an empty selector selects every namespace; name the label that "
                             "opts a namespace in, e.g. matchLabels: {admitter.dev/quota: "
                             "enforced}")
        return selector

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether unlabelled work in the namespace (with these labels) is queued."""
        return namespace not in NEVER_SELECTED and self.namespace_selector.matches(labels)

    def webhook_namespace_selector(self) -> dict[str, object]:
        """The selector as a webhook's `namespaceSelector`, never matching NEVER_SELECTED."""
        selector = self.namespace_selector.model_dump(by_alias=True, exclude_defaults=True)
        never = {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn",
                 "values": list(NEVER_SELECTED)}
        return {**selector, "matchExpressions": [*selector.get("matchExpressions", []), never]}


class DeviceClassMapping(ApiModel):
    """Devices of these DeviceClasses, claimed through Dynamic Resource Allocation, are
    counted as this quota resource (Kueue's `deviceClassMappings`): a claim for 2 devices of
    `gpu.nvidia.com` is charged as 2 `nvidia.com/gpu`, and each node offers as many of it as
    its ResourceSlices publish devices of these classes (docs/dra.md)."""

    name: ResourceName
    """The quota resource the devices count as, e.g. `nvidia.com/gpu`."""
    device_class_names: list[ObjectName] = Field(min_length=1)
    """The DeviceClasses whose devices count as `name`."""


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
    short_jobs: ShortJobSettings = Field(default_factory=ShortJobSettings)
    """Who is a short (debug) job and how much room long work leaves them."""
    time_slicing: TimeSlicingSettings = Field(default_factory=TimeSlicingSettings)
    """How far apart allocations rank before GPUs change hands."""
    pod_placement: Literal["Node", "Domain"] = "Node"
    """Where an admitted workload's pods are pinned. `Node`: each pod, held by a scheduling
    gate until then, on the node its admission counted it on (docs/placement.md), so a burst
    of admissions does not leave a gang's pods spread into fragments none of them fits.
    `Domain`: only to the admitted topology domain, kube-scheduler choosing the nodes in it;
    for clusters whose policy admits no webhook on Pods, or whose scheduler does its own
    packing inside a domain (a profile scoring MostAllocated, a secondary scheduler)."""
    unlabelled_work: UnlabelledWork | None = None
    """Opt-in: queue Jobs without the queue label, and plain GPU Pods, in the namespaces
    selected (docs/webhooks.md); null leaves unlabelled work alone."""
    device_class_mappings: list[DeviceClassMapping] = Field(default_factory=list)
    """Which DeviceClasses count as which quota resource. A job claiming devices of a class
    not mapped here is refused: admitter could not charge it. Empty: no claims are allowed."""

    @field_validator("device_class_mappings")
    @classmethod
    def _each_class_once(cls, mappings: list[DeviceClassMapping]) -> list[DeviceClassMapping]:
        seen: dict[str, str] = {}
        for mapping in mappings:
            for name in mapping.device_class_names:
                if name in seen:
                    raise ValueError(f"DeviceClass {name!r} is mapped twice ({seen[name]!r} and "
                                     f"{mapping.name!r}); a class counts as one resource")
                seen[name] = mapping.name
        return mappings

    def device_classes(self) -> dict[str, str]:
        """DeviceClass name → the quota resource its devices count as."""
        return {name: mapping.name for mapping in self.device_class_mappings
                for name in mapping.device_class_names}
