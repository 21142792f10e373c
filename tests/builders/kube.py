"""Kubernetes objects as a user writes them (or the API server stores them), as plain dicts:
ClusterQueues, LocalQueues, Topologies, Namespaces, GPU Jobs and Workloads.

Each takes what a test is about positionally and everything else as keywords with defaults;
fields not named here go straight into `spec` under their API names (`maxMinRuntime="2h"`),
and a `None` value leaves the field out.
"""

from __future__ import annotations

from typing import Any

from admitter.api.base import API_VERSION
from admitter.api.contract import (
    MIN_RUNTIME_ANNOTATION,
    QUEUE_LABEL,
    RESUMABLE_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from admitter.core.model import GPU
from admitter.testing import SIMULATED_RUNTIME_ANNOTATION

Obj = dict[str, Any]


def cluster_queue(name: str, quota: int | str = 8, *, parent: str | None = None,
                  limit: int | None = None, resource: str = GPU, **spec: Any) -> Obj:
    """A ClusterQueue with `quota` (and `limit`) of one resource; `resources=` replaces them."""
    knobs: Obj = {"quota": quota} if limit is None else {"quota": quota, "limit": limit}
    fields = {"resources": {resource: knobs}, "parent": parent, **spec}
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {key: value for key, value in fields.items() if value is not None}}


def local_queue(cluster_queue_name: str, *, name: str = "default",
                namespace: str | None = None) -> Obj:
    """A LocalQueue pointing at `cluster_queue_name`; no namespace: the request's."""
    metadata = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": API_VERSION, "kind": "LocalQueue", "metadata": metadata,
            "spec": {"clusterQueue": cluster_queue_name}}


def topology(name: str, *labels: str) -> Obj:
    """A Topology whose levels are `labels`, coarsest first."""
    return {"apiVersion": API_VERSION, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def gpu_job(namespace: str, name: str, pods: int = 1, gpus: int = 8, runtime: str = "300s",
            min_runtime: str | None = "1h", required: str | None = None, queue: str = "default",
            suspend: bool = True, resumable: bool = False, **pod_spec: Any) -> Obj:
    """A Job as a user writes it, already suspended as the mutating webhook would leave it;
    KWOK runs its pods for `runtime`. No `min_runtime`: unfunded. `pod_spec` adds pod
    template fields (camelCase)."""
    annotations = {} if min_runtime is None else {MIN_RUNTIME_ANNOTATION: min_runtime}
    if resumable:
        annotations[RESUMABLE_ANNOTATION] = "true"
    if required:
        annotations[TOPOLOGY_REQUIRED_ANNOTATION] = required
    container = {"name": "main", "image": "registry.invalid/train",
                 "resources": {"limits": {GPU: str(gpus)}}}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue},
                     "annotations": annotations},
        "spec": {
            "suspend": suspend, "parallelism": pods, "completions": pods, "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {SIMULATED_RUNTIME_ANNOTATION: runtime}},
                "spec": {"restartPolicy": "Never", "containers": [container], **pod_spec},
            },
        },
    }


def workload(name: str = "forged", queue: str = "default", gpus: Any = 1, count: Any = 1,
             **spec: Any) -> Obj:
    """A Workload written directly (not by the controller), one pod set of `count` pods."""
    pod_set = {"name": "main", "count": count, "requests": {GPU: gpus}}
    return {"apiVersion": API_VERSION, "kind": "Workload", "metadata": {"name": name},
            "spec": {"queueName": queue, "podSets": [pod_set], **spec}}


def leaf_queue(name: str, quota: int | str = 8, *, namespace: str, local_name: str = "default",
               **knobs: Any) -> tuple[Obj, Obj]:
    """A ClusterQueue (`cluster_queue`'s keywords) and the LocalQueue in `namespace` that
    submits to it, to create together."""
    return (cluster_queue(name, quota, **knobs),
            local_queue(name, name=local_name, namespace=namespace))
