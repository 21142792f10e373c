"""What the controller's caches keep of a queued job: the whole object but its pod templates'
pod specs, of which only what admitter reads from them (`POD_SPEC_READ`).

A waiting job is cached for as long as it waits, and a hundred thousand of them are most of
the controller's memory; of a pod template, what the containers run (image, command, env,
mounts, probes) is most of the object and read by nothing that decides. Every reader of a
pod set (its requests, placement constraints, priority class, device claims, the patches that
pin it) reads a projected job exactly as the whole one (tests/jobs/test_projection.py).

Equal projected pod specs, labels, annotations and statuses are kept once (`kube.shared`): a
user's many jobs mostly run one shape.

Hazard: a cached job is not the whole job. What needs the whole one (the fleet's copy of a job
in a worker cluster) reads it from the API server."""

from __future__ import annotations

from typing import Any

from admitter.jobs.registry import KINDS, JobKinds
from admitter.jobs.templated import TemplatedJob
from admitter.kube.objects import Obj
from admitter.kube.shared import SharedParts, Sharing, share_at

POD_SPEC_READ = ("containers", "initContainers", "overhead", "resourceClaims", "affinity",
                 "nodeSelector", "tolerations", "priorityClassName", "schedulingGates")
"""A pod spec's fields admitter reads: requests (containers, native sidecars, overhead),
device claims, where its pods may run, their priority, their gates."""
CONTAINER_READ = ("name", "resources", "restartPolicy")
"""A container's fields admitter reads: its requests (and claims), and whether an init
container is a native sidecar."""
_PROJECTION_ERRORS = (KeyError, TypeError, ValueError, IndexError, AttributeError)
"""What a malformed job raises while its pod templates are found: it is kept whole, and the
pass that reads it names the field."""


class JobProjection:
    """Projects the jobs of one controller's caches, sharing equal parts among them: pod
    specs, and the labels, annotations and status most jobs of one queue repeat."""

    def __init__(self, kinds: JobKinds = KINDS) -> None:
        self.kinds = kinds
        self.pod_specs = SharedParts()
        self.sharing = Sharing(("metadata", "labels"), ("metadata", "annotations"), ("status",))

    def __call__(self, obj: Obj) -> Obj:
        """`obj` with each pod template's spec projected (a new object; `obj` is not
        changed). A kind without pod templates of its own (a TrainJob: its pod specs are
        in its runtime) keeps its spec whole."""
        kind = self.kinds.suspendable.get(obj.get("kind") or "Job")
        if kind is None:
            return obj
        projected = obj
        if isinstance(kind, TemplatedJob):
            try:
                for _, _, path in kind.pod_set_shapes(obj):
                    projected = share_at(projected, path, self._pod_spec)
            except _PROJECTION_ERRORS:
                projected = obj
        return self.sharing(projected)

    def _pod_spec(self, pod_spec: Any) -> Any:
        if not isinstance(pod_spec, dict):
            return pod_spec
        return self.pod_specs(project_pod_spec(pod_spec))


def project_pod_spec(pod_spec: Obj) -> Obj:
    """The fields of `pod_spec` admitter reads (POD_SPEC_READ, CONTAINER_READ)."""
    projected = {}
    for field in POD_SPEC_READ:
        if field not in pod_spec:
            continue
        value = pod_spec[field]
        if field in ("containers", "initContainers") and isinstance(value, list):
            value = [{k: c[k] for k in CONTAINER_READ if k in c} if isinstance(c, dict) else c
                     for c in value]
        projected[field] = value
    return projected
