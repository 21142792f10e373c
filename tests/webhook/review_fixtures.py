"""AdmissionReview fixtures: Jobs and admitter objects as the API server sends them."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from typing import Any

from admitter.api.clusterqueue import ClusterQueue
from admitter.api.contract import ADMITTED_WORKLOAD_ANNOTATION, QUEUE_LABEL
from admitter.api.localqueue import LocalQueue
from admitter.api.topology import Topology
from admitter.kube.names import CONTROLLER_USERNAME
from admitter.webhook.jobs import JobPolicy, mutate_job, validate_job
from admitter.webhook.review import AdmissionRequest, Verdict, parse_review

from builders.kube import JobWrapper, cluster_queue, local_queue, topology

NAMESPACE = "team-a"
USER = "alice"
CONTROLLER = CONTROLLER_USERNAME
POLICY = JobPolicy(max_min_runtime=8 * 3600.0, controller_usernames=frozenset({CONTROLLER}))
SUSPEND_PATCH = [{"op": "add", "path": "/spec/suspend", "value": True}]
"""What the mutating webhook adds to a queued job created unsuspended (the job interface's
`suspend_ops`)."""


def job(
    queue: str | None = "default",
    suspend: bool | None = None,
    annotations: dict[str, str] | None = None,
    name: str = "train",
) -> dict[str, Any]:
    """A 2-pod CPU-only Job as a user writes it (`JobWrapper`), with only the `annotations`
    given; `suspend=None` leaves the field out."""
    return (JobWrapper(name, NAMESPACE).queue(queue).pods(2).gpus(0).image("trainer")
            .runtime(None).annotations(annotations or {}).suspend(suspend).obj())


def changed(obj: dict[str, Any], **edits: Any) -> dict[str, Any]:
    """A deep copy with `labels`, `annotations` (None removes a key) or `suspend` replaced."""
    new = copy.deepcopy(obj)
    metadata = new["metadata"]
    for section in ("labels", "annotations"):
        for key, value in edits.get(section, {}).items():
            if value is None:
                metadata.get(section, {}).pop(key, None)
            else:
                metadata.setdefault(section, {})[key] = value
    if "suspend" in edits:
        new["spec"]["suspend"] = edits["suspend"]
    return new


def review(
    obj: dict[str, Any],
    old: dict[str, Any] | None = None,
    user: str = USER,
    operation: str | None = None,
) -> dict[str, Any]:
    """The AdmissionReview v1 body the API server posts."""
    group, _, version = obj["apiVersion"].rpartition("/")
    metadata = obj["metadata"]
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": obj["kind"].lower() + "s"},
        "operation": operation or ("CREATE" if old is None else "UPDATE"),
        "name": metadata.get("name", ""),
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    if "namespace" in metadata:
        request["namespace"] = metadata["namespace"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def request(
    obj: dict[str, Any], old: dict[str, Any] | None = None, user: str = USER,
    operation: str | None = None,
) -> AdmissionRequest:
    return parse_review(review(obj, old, user, operation))


@dataclass
class FakeLookup:
    """A Lookup over plain manifests; `reads` records which kinds a handler asked for."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)

    def _of(self, kind: str) -> list[dict[str, Any]]:
        self.reads.append(kind)
        return [o for o in self.objects if o["kind"] == kind]

    async def local_queues(self, namespace: str, fresh: bool = False) -> list[LocalQueue]:
        return [
            LocalQueue.model_validate(o)
            for o in self._of("LocalQueue")
            if o["metadata"]["namespace"] == namespace
        ]

    async def cluster_queues(self) -> list[ClusterQueue]:
        return [ClusterQueue.model_validate(o) for o in self._of("ClusterQueue")]

    async def topologies(self) -> list[Topology]:
        return [Topology.model_validate(o) for o in self._of("Topology")]

    async def priority_value(self, priority_class: str) -> int | None:
        return next((o["value"] for o in self._of("PriorityClass")
                     if o["metadata"]["name"] == priority_class), None)

    async def workload(self, namespace: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self._of("Workload") if o["metadata"]["name"] == name
                     and o["metadata"]["namespace"] == namespace), None)

    async def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        return next((o["metadata"].get("labels") or {} for o in self._of("Namespace")
                     if o["metadata"]["name"] == namespace), None)

    async def resource_claim_template(self, namespace: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self._of("ResourceClaimTemplate")
                     if o["metadata"]["name"] == name
                     and o["metadata"]["namespace"] == namespace), None)


def standard_lookup() -> FakeLookup:
    """org (maxMinRuntime 4h) → research → team-a (2h) and team-b; LocalQueue `default` →
    team-a and `shared` → team-b in team-a's namespace; one block/rack Topology."""
    return FakeLookup([
        cluster_queue("org", maxMinRuntime="4h"),
        cluster_queue("research", parent="org"),
        cluster_queue("team-a", parent="research", maxMinRuntime="2h"),
        cluster_queue("team-b", parent="research"),
        local_queue("team-a", namespace=NAMESPACE),
        local_queue("team-b", name="shared", namespace=NAMESPACE),
        topology("default", "topology.admitter.dev/block", "topology.admitter.dev/rack"),
    ])


# What the job webhooks' tests of every kind check alike ---------------------------------


def admitted(obj: dict[str, Any]) -> dict[str, Any]:
    """The job running, as admitter starts it."""
    return changed(obj, suspend=False, annotations={ADMITTED_WORKLOAD_ANNOTATION: "wl"})


async def verdict(obj: dict[str, Any], old: dict[str, Any] | None = None,
                  user: str = USER) -> Verdict:
    """The job validating webhook's answer to `user` creating `obj` (or changing `old` to it)
    against the standard queues."""
    return await validate_job(request(obj, old, user), standard_lookup(), POLICY)


async def queue_move_denial(job: dict[str, Any]) -> Verdict:
    """The verdict on moving the admitted `job` to LocalQueue `other`."""
    running = admitted(job)
    moved = copy.deepcopy(running)
    moved["metadata"]["labels"][QUEUE_LABEL] = "other"
    return await verdict(moved, running)


async def left_to_its_parent(child: dict[str, Any], controller: str) -> bool:
    """Whether the job webhooks leave a queued job's child alone: not suspended on create,
    and its parent's controller may unsuspend it."""
    made = await mutate_job(request(child), standard_lookup(), POLICY)
    return made.patch == [] and (await verdict(changed(child, suspend=False), child,
                                               controller)).allowed
