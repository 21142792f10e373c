"""What the controller's caches keep of a queued job: the whole object but its pod templates'
pod specs, of which only what admitter reads from them (`POD_SPEC_READ`); and of a Pod.

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

from admitter.jobs.batch_job import BatchJob
from admitter.jobs.registry import KINDS, JobKinds
from admitter.jobs.templated import TemplatedJob
from admitter.kube.objects import Obj
from admitter.kube.shared import DROP, Rebuilt, SharedParts, Sharing

POD_SPEC_READ = ("containers", "initContainers", "overhead", "resourceClaims", "affinity",
                 "nodeSelector", "tolerations", "priorityClassName", "schedulingGates")
"""A pod spec's fields admitter reads: requests (containers, native sidecars, overhead),
device claims, where its pods may run, their priority, their gates."""
CONTAINER_READ = ("name", "resources", "restartPolicy")
"""A container's fields admitter reads: its requests (and claims), and whether an init
container is a native sidecar."""
UNREAD: dict[str, tuple[tuple[str, ...], ...]] = {BatchJob.kind: (("spec", "selector"),)}
"""Fields of a kind admitter never reads, dropped from cached jobs: a Job's `selector`, which
the Job controller generates from the Job's uid (a copy in a worker gets its own)."""
_PROJECTION_ERRORS = (KeyError, TypeError, ValueError, IndexError, AttributeError,
                      ArithmeticError)
"""What a malformed job raises while its pod templates are found (what a pass reports as
unreadable): never raised through the informer."""


class JobProjection:
    """Projects the jobs of one controller's caches, sharing equal parts among them: pod
    specs, template annotations, and the labels, annotations and status most jobs of one
    queue repeat."""

    def __init__(self, kinds: JobKinds = KINDS) -> None:
        self.kinds = kinds
        self.pod_specs = SharedParts()
        self.template_annotations = SharedParts()
        self.sharing = Sharing(("metadata", "labels"), ("metadata", "annotations"), ("status",))

    def __call__(self, obj: Obj) -> Obj:
        """`obj` with each pod template's spec projected and its UNREAD fields dropped (a
        new object; `obj` is not changed). A kind without pod templates of its own (a
        TrainJob: its pod specs are in its runtime) keeps its spec whole, and so do the
        templates of a job whose templates cannot be found (the pass that reads it names the
        field)."""
        kind = self.kinds.suspendable.get(obj.get("kind") or "Job")
        if kind is None:
            return obj
        projected = Rebuilt(obj)
        for path in UNREAD.get(kind.kind, ()):
            projected.share(path, _dropped)
        if isinstance(kind, TemplatedJob):
            try:
                shapes = kind.pod_set_shapes(obj)
            except _PROJECTION_ERRORS:
                shapes = []
            for _, _, path in shapes:
                projected.share(path, self._pod_spec)
                projected.share((*path[:-1], "metadata", "annotations"),
                                self.template_annotations)
        return self.sharing(projected.root)

    def _pod_spec(self, pod_spec: Any) -> Any:
        if not isinstance(pod_spec, dict):
            return pod_spec
        return self.pod_specs(project_pod_spec(pod_spec))


class PodProjection:
    """What the controller's pod cache keeps of a Pod, any tenant's: its spec as a pod set's
    (POD_SPEC_READ) with the node it is bound to, its status without the per-container
    statuses (image ids, container ids, states: most of a running pod's status), read by
    nothing in admitter. Equal projected container lists are kept once (a workload's many
    replicas)."""

    def __init__(self) -> None:
        self.containers = {field: SharedParts() for field in ("containers", "initContainers")}
        self.sharing = Sharing(("metadata", "labels"))

    def __call__(self, pod: Obj) -> Obj:
        projected = Rebuilt(pod)
        projected.share(("spec",), self._spec)
        for field in UNREAD_POD_STATUS:
            projected.share(("status", field), _dropped)
        return self.sharing(projected.root)

    def _spec(self, spec: Any) -> Any:
        if not isinstance(spec, dict):
            return spec
        projected = project_pod_spec(spec)
        for field, table in self.containers.items():
            if field in projected:
                projected[field] = table(projected[field])
        if "nodeName" in spec:
            projected["nodeName"] = spec["nodeName"]
        return projected


UNREAD_POD_STATUS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def _dropped(part: Any) -> Any:
    return DROP


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
