"""AdmissionReview fixtures: Jobs and admitter objects as the API server sends them."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from typing import Any

from admitter.api.clusterqueue import ClusterQueue
from admitter.api.localqueue import LocalQueue
from admitter.api.topology import Topology
from admitter.webhook.jobs import JobPolicy
from admitter.webhook.names import CONTROLLER_USERNAME
from admitter.webhook.review import AdmissionRequest, parse_review

NAMESPACE = "team-a"
USER = "alice"
CONTROLLER = CONTROLLER_USERNAME
QUEUE_LABEL = "admitter.dev/queue-name"
POLICY = JobPolicy(max_min_runtime=8 * 3600.0, controller_usernames=frozenset({CONTROLLER}))


def job(
    queue: str | None = "default",
    suspend: bool | None = None,
    annotations: dict[str, str] | None = None,
    name: str = "train",
) -> dict[str, Any]:
    """A batch/v1 Job as a user writes it; `suspend=None` leaves the field out."""
    spec: dict[str, Any] = {
        "parallelism": 2,
        "template": {"spec": {"containers": [{"name": "main", "image": "trainer"}]}},
    }
    if suspend is not None:
        spec["suspend"] = suspend
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if queue is not None:
        metadata["labels"] = {QUEUE_LABEL: queue}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


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


def cluster_queue(
    name: str, parent: str | None = None, max_min_runtime: str | None = None,
    default_min_runtime: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"nvidia.com/gpu": {"quota": 8}}}
    if parent is not None:
        spec["parent"] = parent
    if max_min_runtime is not None:
        spec["maxMinRuntime"] = max_min_runtime
    if default_min_runtime is not None:
        spec["defaultMinRuntime"] = default_min_runtime
    return {
        "apiVersion": "admitter.dev/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def local_queue(name: str, cluster_queue: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "admitter.dev/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def topology(name: str, *labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "admitter.dev/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": label} for label in labels]},
    }


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


def standard_lookup() -> FakeLookup:
    """org (maxMinRuntime 4h) → research → team-a (2h) and team-b; LocalQueue `default` →
    team-a and `shared` → team-b in team-a's namespace; one block/rack Topology."""
    return FakeLookup([
        cluster_queue("org", max_min_runtime="4h"),
        cluster_queue("research", parent="org"),
        cluster_queue("team-a", parent="research", max_min_runtime="2h"),
        cluster_queue("team-b", parent="research"),
        local_queue("default", "team-a"),
        local_queue("shared", "team-b"),
        topology("default", "topology.admitter.dev/block", "topology.admitter.dev/rack"),
    ])
