"""What kinds that run pods from templates and have `spec.suspend` share (a `batch/v1` Job,
a JobSet, a RayJob): admitter's marks, suspending, pinning every template to the admitted
domain and labelling it with its pod set (for the placement webhook to gate its pods), and
taking both back. A kind says only where its templates are and how many pods each runs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION, ORIGINAL_AFFINITY_ANNOTATION
from admitter.jobs.interface import (
    NO_NARROWER,
    PodSetInfo,
    dotted,
    escape,
    nested,
    pin_to_domain,
    pointer,
)
from admitter.kube.objects import POD_SET_LABEL, Obj


class SuspendsBySpec:
    """A kind suspended through `spec.suspend`, admitter's admitted mark going with it."""

    def is_suspended(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("suspend"))

    def suspend_ops(self, obj: Obj) -> list[Obj]:
        return [] if self.is_suspended(obj) else [
            {"op": "add", "path": "/spec/suspend", "value": True}]

    def suspend_patch(self, obj: Obj) -> Obj:
        return {"metadata": {"annotations": {ADMITTED_WORKLOAD_ANNOTATION: None}},
                "spec": {"suspend": True}}


def mark_ops(obj: Obj, workload_name: str, users_own: str) -> list[Obj]:
    """JSON patch ops conditional on the version read (the API server refuses them, 409, if
    the job changed meanwhile) that mark it admitted as `workload_name`, keeping the user's
    own placement `users_own` in ORIGINAL_AFFINITY_ANNOTATION."""
    meta = obj["metadata"]
    marks = {ADMITTED_WORKLOAD_ANNOTATION: workload_name, ORIGINAL_AFFINITY_ANNOTATION: users_own}
    ops: list[Obj] = [{"op": "add", "path": "/metadata/resourceVersion",
                       "value": meta["resourceVersion"]}]
    if meta.get("annotations") is None:
        return [*ops, {"op": "add", "path": "/metadata/annotations", "value": marks}]
    return ops + [{"op": "add", "path": f"/metadata/annotations/{escape(key)}", "value": value}
                  for key, value in marks.items()]


def unmark_ops(obj: Obj) -> list[Obj]:
    """JSON patch ops dropping admitter's marks."""
    annotations = obj["metadata"].get("annotations") or {}
    return [{"op": "remove", "path": f"/metadata/annotations/{escape(key)}"}
            for key in (ADMITTED_WORKLOAD_ANNOTATION, ORIGINAL_AFFINITY_ANNOTATION)
            if key in annotations]


class TemplatedJob(SuspendsBySpec):
    """A base for kinds suspended through `spec.suspend` whose pod sets are pod templates."""

    api_version: ClassVar[str]
    kind: ClassVar[str]
    workload_prefix: ClassVar[str]
    plural: ClassVar[str]
    name_label: ClassVar[bool]

    pin_field: ClassVar[str] = "affinity"
    """The pod spec field admitter pins to the admitted domain, keeping the user's own value
    in ORIGINAL_AFFINITY_ANNOTATION: the required node affinity, unless the kind lets only
    some fields of a suspended job's templates change (JobSet: `nodeSelector`)."""

    own_labels: ClassVar[tuple[str, ...]] = (POD_SET_LABEL,)
    """The template labels admitter puts on at start and takes off at restore."""

    def pin(self, own: Any, domain: Mapping[str, str]) -> Any:
        """The pin field's value with the user's own `own` narrowed to `domain`."""
        return pin_to_domain(own, domain)

    def template_labels(self, obj: Obj, pod_set: str, place_pods: bool) -> dict[str, str]:
        """The labels a started job's template of `pod_set` gains: its pod set's name, when
        each pod is to be placed on its node (the placement webhook gates pods carrying it)."""
        return {POD_SET_LABEL: pod_set} if place_pods else {}

    def pod_set_shapes(self, obj: Obj) -> list[tuple[str, int, tuple[str, ...]]]:
        """Each pod set's name, pod count and the path of its pod spec in `obj`."""
        raise NotImplementedError

    def size_field(self, path: tuple[str, ...]) -> str:
        """The field that sizes the pod set whose pod spec is at `path`."""
        return dotted(path[:-4])

    def encode_affinities(self, affinities: list[Any]) -> str:
        """The user's own pin fields, one per pod set, as the annotation keeps them."""
        return json.dumps(affinities)

    def decode_affinities(self, text: str) -> list[Any]:
        found: list[Any] = json.loads(text)
        return found

    def user_affinities(self, obj: Obj) -> list[Any]:
        """Each pod set's pin field as the user wrote it: while admitted, the templates also
        carry admitter's pin, and the annotation keeps the user's own."""
        annotations = obj["metadata"].get("annotations") or {}
        if ORIGINAL_AFFINITY_ANNOTATION in annotations:
            return self.decode_affinities(annotations[ORIGINAL_AFFINITY_ANNOTATION])
        return [nested(obj, path).get(self.pin_field)
                for _, _, path in self.pod_set_shapes(obj)]

    def pod_sets(self, obj: Obj) -> list[PodSetInfo]:
        shapes = self.pod_set_shapes(obj)
        own = self.user_affinities(obj)
        found = []
        for (name, count, path), affinity in zip(shapes, own, strict=True):
            spec = dict(nested(obj, path))
            spec.pop(self.pin_field, None)
            if affinity is not None:
                spec[self.pin_field] = affinity
            template = nested(obj, path[:-1]).get("metadata") or {}
            found.append(PodSetInfo(name, count, spec, path, self.size_field(path),
                                    template.get("annotations") or {}))
        return found

    def run_patch(self, obj: Obj, workload_name: str, domain: Mapping[str, str],
                  narrower: Mapping[str, Mapping[str, str]] = NO_NARROWER,
                  place_pods: bool = False) -> list[Obj]:
        own = self.user_affinities(obj)
        ops = mark_ops(obj, workload_name, self.encode_affinities(own))
        for (name, _, path), affinity in zip(self.pod_set_shapes(obj), own, strict=True):
            pinned = self.pin(affinity, narrower.get(name, domain))
            ops.append(_set_or_remove(obj, (*path, self.pin_field), pinned))
            ops += label_ops(obj, path[:-1], self.template_labels(obj, name, place_pods))
        ops.append({"op": "add", "path": "/spec/suspend", "value": False})
        return [op for op in ops if op]

    def restore_patch(self, obj: Obj) -> list[Obj]:
        ops = unmark_ops(obj)
        for (_, _, path), affinity in zip(self.pod_set_shapes(obj), self.user_affinities(obj),
                                          strict=True):
            ops.append(_set_or_remove(obj, (*path, self.pin_field), affinity))
            ops += unlabel_ops(obj, path[:-1], self.own_labels)
        return [op for op in ops if op]


def label_ops(obj: Obj, template: tuple[str, ...], labels: Mapping[str, str]) -> list[Obj]:
    """JSON patch ops putting `labels` on the pod template at `template`, making its metadata
    or labels if the user wrote none."""
    if not labels:
        return []
    metadata = nested(obj, template).get("metadata")
    if metadata is None:
        return [{"op": "add", "path": pointer((*template, "metadata")),
                 "value": {"labels": dict(labels)}}]
    if metadata.get("labels") is None:
        return [{"op": "add", "path": pointer((*template, "metadata", "labels")),
                 "value": dict(labels)}]
    return [{"op": "add", "path": pointer((*template, "metadata", "labels", key)), "value": value}
            for key, value in labels.items()]


def unlabel_ops(obj: Obj, template: tuple[str, ...], keys: Iterable[str]) -> list[Obj]:
    """JSON patch ops taking the labels `keys` off the pod template at `template`, with the
    labels or metadata they alone filled (so the template is the user's again)."""
    metadata = nested(obj, template).get("metadata") or {}
    labels = metadata.get("labels") or {}
    ours = [key for key in keys if key in labels]
    if not ours:
        return []
    if len(labels) > len(ours):
        return [{"op": "remove", "path": pointer((*template, "metadata", "labels", key))}
                for key in ours]
    if len(metadata) > 1:
        return [{"op": "remove", "path": pointer((*template, "metadata", "labels"))}]
    return [{"op": "remove", "path": pointer((*template, "metadata"))}]


def _set_or_remove(obj: Obj, path: tuple[str, ...], value: Any) -> Obj:
    """The JSON patch op leaving `value` at `path` (nothing there for None): none if so."""
    present = path[-1] in nested(obj, path[:-1])
    if value is not None:
        return {"op": "add", "path": pointer(path), "value": value}
    return {"op": "remove", "path": pointer(path)} if present else {}
