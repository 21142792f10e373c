"""What admitter needs to know about and do to a kind of job, as Kueue's `GenericJob` has it:
read its pod sets, suspend it, start it pinned to an admitted domain (per pod set), take the
pin back after an eviction, and tell whether it finished. Anything only some kinds need is a
small separate protocol (`ClearsStartTime`), checked with `isinstance`, never by kind."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from admitter.kube.objects import Obj

NO_NARROWER: Mapping[str, Mapping[str, str]] = {}
"""No pod set pinned to a domain of its own: all go to the workload's."""


@dataclass(frozen=True)
class PodSetInfo:
    """One group of identical pods a job runs at once: `count` pods of `pod_spec`, whose
    affinity is the user's own (admitter's pin taken out)."""

    name: str
    count: int
    pod_spec: Obj
    path: tuple[str, ...]
    """Where the pod spec sits in the job object, for the patches that pin it."""
    size_field: str = ""
    """The field a user edits to change `count` (`spec.parallelism`), as denials name it."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """The pod template's annotations, where a pod set asks for a topology of its own."""


class JobReader(Protocol):
    """What the Workload of a kind is made from. Methods take the object as read from the API
    server. A plain Pod is only this: it cannot be suspended (admitter gates and deletes it)."""

    api_version: ClassVar[str]
    kind: ClassVar[str]
    workload_prefix: ClassVar[str]
    """Starts the names of the Workloads made for this kind (`job`, `pod`, `jobset`)."""
    name_label: ClassVar[bool]
    """Whether its Workloads carry the owner's name as a label (JOB_NAME_LABEL), by which an
    orphaned Workload is told apart."""

    def pod_sets(self, obj: Obj) -> list[PodSetInfo]:
        """Its pod sets, in a stable order, with the user's own affinity."""
        ...

    def finished(self, obj: Obj) -> tuple[bool, str] | None:
        """None while it may still run; else (succeeded, message)."""
        ...


class GenericJob(JobReader, Protocol):
    """A kind admitter holds suspended until admitted and suspends again to evict."""

    plural: ClassVar[str]
    """Its resource name in the REST API (`jobs`, `jobsets`); always namespaced."""

    def is_suspended(self, obj: Obj) -> bool:
        ...

    def suspend_ops(self, obj: Obj) -> list[Obj]:
        """JSON patch ops that suspend it as it is created (the mutating webhook's), before
        any pod starts; none when it already is."""
        ...

    def suspend_patch(self, obj: Obj) -> Obj:
        """A merge patch that suspends it and takes admitter's admitted mark away."""
        ...

    def run_patch(self, obj: Obj, workload_name: str, domain: Mapping[str, str],
                  narrower: Mapping[str, Mapping[str, str]] = NO_NARROWER,
                  place_pods: bool = False) -> list[Obj]:
        """A JSON patch that unsuspends it, each pod set pinned to `domain` (or to its own
        domain in `narrower`, by pod set name), on the version read (so a job changed
        meanwhile is looked at again); with `place_pods`, its pods made to be held by the
        placement gate (`PLACEMENT_GATE`) until admitter names each one's node."""
        ...

    def restore_patch(self, obj: Obj) -> list[Obj]:
        """A JSON patch putting the user's own affinity back and dropping admitter's marks."""
        ...

    def pods_ready(self, obj: Obj) -> int:
        """Pods it reports ready or done, as Kueue's `PodsReady` counts them: an admitted
        gang is ready once all its pods are."""
        ...


@runtime_checkable
class ClearsStartTime(Protocol):
    """A kind whose pod templates stay immutable after a run until a status field is unset
    (a `batch/v1` Job's `status.startTime`)."""

    def start_time_patch(self, obj: Obj) -> Obj | None:
        """The status merge patch that makes its templates mutable, if one is needed."""
        ...


@runtime_checkable
class LabelsPods(Protocol):
    """A kind whose pods are made by child objects (a JobSet's Jobs) and carry a label naming
    it: its running pods are told apart by that label, not by their owner."""

    pod_label: str


@runtime_checkable
class ShowsProgress(Protocol):
    """A kind whose status counts its pods or child Jobs: what a copy of it in a worker
    cluster shows on its Workload (`fleet/dispatch.py`)."""

    def progress(self, obj: Obj) -> str:
        """Its progress as a short phrase, from its status."""
        ...


@runtime_checkable
class RefusesSpecs(Protocol):
    """A kind some valid specs of which admitter cannot account for (a RayJob keeping its
    cluster, and the GPUs, after its job ends): the webhooks refuse those specs."""

    def unsupported(self, obj: Obj) -> list[tuple[str, str]]:
        """(field, why and what to do) for each setting admitter refuses."""
        ...


@runtime_checkable
class ReadsRuntimes(Protocol):
    """A kind whose pod sets are resolved from other objects it names (a TrainJob's training
    runtime): the controller keeps those objects in informers and makes itself a copy of the
    kind reading through a lookup on them (`JobKinds`)."""

    kind: ClassVar[str]
    runtime_kinds: ClassVar[tuple[tuple[str, str, str, bool], ...]]
    """(kind, apiVersion, plural, namespaced) of each object kind the lookup reads."""

    def reading(self, lookup: Callable[[str, str, str], Obj | None]) -> Self:
        """The kind resolving pod sets through `lookup`: (kind, namespace, name) → the object
        or None (namespace empty for a cluster-scoped kind)."""
        ...

    def runtime_key(self, obj: Obj) -> tuple[str, str, str]:
        """(kind, namespace, name) of the object `obj` reads its pod sets from, as `lookup`
        takes them: a change of that object may change its pod sets."""
        ...

    def size_fields(self, obj: Obj) -> dict[str, Any]:
        """The fields, by path, whose change resizes an admitted job (the webhook, which
        does not read the runtimes, guards these instead of the pod sets)."""
        ...


@runtime_checkable
class ShapedAtStart(Protocol):
    """A kind whose operator makes its pods' objects when it starts and never reshapes them
    while it runs (Trainer makes a TrainJob's JobSet from its runtime and leaves a running
    one alone): a running job keeps the pods it was admitted for, whatever its spec or its
    runtime say since, so a change of them does not evict it."""

    shaped_at_start: ClassVar[bool]


@runtime_checkable
class ReadyWhenBound(Protocol):
    """A kind whose status may not count its ready pods (Kubeflow Trainer v2.0 leaves a
    TrainJob's `jobsStatus` empty): its gang is also ready once all its pods run on nodes."""

    ready_when_bound: ClassVar[bool]


def dotted(path: Sequence[str]) -> str:
    """A path as denials name fields: `spec.replicatedJobs[1].template`."""
    return "".join(f"[{step}]" if step.isdigit() else f".{step}" for step in path).lstrip(".")


def nested(obj: Obj, path: Sequence[str]) -> Any:
    """The value at `path` (dict keys, or list indexes written as digits)."""
    found: Any = obj
    for step in path:
        found = found[int(step)] if isinstance(found, list) else found[step]
    return found


def escape(key: str) -> str:
    """JSON pointer escaping of one path segment."""
    return key.replace("~", "~0").replace("/", "~1")


def pointer(path: Sequence[str]) -> str:
    return "".join(f"/{escape(step)}" for step in path)


def pin_to_domain(affinity: Obj | None, domain: Mapping[str, str]) -> Obj | None:
    """An affinity with every required node-selector term narrowed to the admitted domain
    (terms are ORed, so each one must carry the domain's labels)."""
    if not domain:
        return affinity
    ours = [{"key": key, "operator": "In", "values": [value]}
            for key, value in sorted(domain.items())]
    merged = json.loads(json.dumps(affinity or {}))
    node = merged.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [
        {**term, "matchExpressions": [*term.get("matchExpressions", []), *ours]}
        for term in terms
    ]
    return merged


def set_at(patch: Obj, path: Sequence[str], value: Any) -> None:
    """Put `value` at `path` in a merge patch made of dicts only."""
    for step in path[:-1]:
        patch = patch.setdefault(step, {})
    patch[path[-1]] = value
