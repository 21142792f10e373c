"""Kubernetes objects as a user writes them (or the API server stores them), as plain dicts:
ClusterQueues, LocalQueues, Topologies, Namespaces, GPU Jobs (`JobWrapper`) and Workloads.

Each takes what a test is about positionally and everything else as keywords with defaults;
fields not named here go straight into `spec` under their API names (`maxMinRuntime="2h"`),
and a `None` value leaves the field out. Jobs, with many more knobs, chain calls instead.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Self

from admitter.api.base import API_VERSION
from admitter.api.contract import (
    MAX_RUNTIME_ANNOTATION,
    MIN_RUNTIME_ANNOTATION,
    QUEUE_LABEL,
    RESUMABLE_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from admitter.core.model import GPU
from admitter.kube.objects import Obj
from admitter.testing import SIMULATED_RUNTIME_ANNOTATION


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


class JobWrapper:
    """A batch/v1 Job as a user writes it, built by chained calls (Kueue's testingjobs
    JobWrapper): `JobWrapper("train", ns).queue("team-a").gpus(4).pods(2).obj()`.

    Defaults: one pod of 8 GPUs in LocalQueue `default`, min runtime 1h, suspended as the
    mutating webhook would leave it; KWOK runs its pods for 300s. Each call returns the
    wrapper; `obj()` returns a copy of the Job, so a wrapper can make several."""

    def __init__(self, name: str, namespace: str) -> None:
        container = {"name": "main", "image": "registry.invalid/train",
                     "resources": {"limits": {GPU: "8"}}}
        self._job: Obj = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {QUEUE_LABEL: "default"},
                         "annotations": {MIN_RUNTIME_ANNOTATION: "1h"}},
            "spec": {
                "suspend": True, "parallelism": 1, "completions": 1, "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": {SIMULATED_RUNTIME_ANNOTATION: "300s"}},
                    "spec": {"restartPolicy": "Never", "containers": [container]},
                },
            },
        }

    @property
    def _pod(self) -> Obj:
        pod: Obj = self._job["spec"]["template"]["spec"]
        return pod

    @property
    def _main(self) -> Obj:
        main: Obj = self._pod["containers"][0]
        return main

    def obj(self) -> Obj:
        return copy.deepcopy(self._job)

    def queue(self, name: str | None) -> Self:
        """The LocalQueue label; None: unlabelled (not admitter's, unless opted in)."""
        _put(self._job["metadata"]["labels"], QUEUE_LABEL, name)
        return self

    def pods(self, count: int) -> Self:
        """Parallelism and completions both."""
        self._job["spec"].update(parallelism=count, completions=count)
        return self

    def completions(self, count: int) -> Self:
        self._job["spec"]["completions"] = count
        return self

    def gpus(self, count: int) -> Self:
        """GPUs per pod (the container's limit); 0: none, a CPU-only Job."""
        _put(self._main["resources"]["limits"], GPU, str(count) if count else None)
        return self

    def request(self, resource: str, quantity: str) -> Self:
        """A request of the main container (beside its GPU limit)."""
        self._main["resources"].setdefault("requests", {})[resource] = quantity
        return self

    def min_runtime(self, value: str | None) -> Self:
        """The min-runtime annotation; None: none (unfunded, or the queue's default)."""
        return self.annotation(MIN_RUNTIME_ANNOTATION, value)

    def max_runtime(self, value: str | None) -> Self:
        """The maximum run time annotation; None: none declared."""
        return self.annotation(MAX_RUNTIME_ANNOTATION, value)

    def resumable(self) -> Self:
        return self.annotation(RESUMABLE_ANNOTATION, "true")

    def required(self, level: str) -> Self:
        """The topology level all its pods must share."""
        return self.annotation(TOPOLOGY_REQUIRED_ANNOTATION, level)

    def preferred(self, level: str) -> Self:
        """The topology level its pods should share where they can."""
        return self.annotation(TOPOLOGY_PREFERRED_ANNOTATION, level)

    def annotation(self, key: str, value: str | None) -> Self:
        """Set an annotation; None removes it."""
        _put(self._job["metadata"]["annotations"], key, value)
        return self

    def annotations(self, values: Mapping[str, str]) -> Self:
        """Replace every annotation (the min runtime's too) by `values`."""
        self._job["metadata"]["annotations"] = dict(values)
        return self

    def runtime(self, value: str | None) -> Self:
        """How long KWOK runs its pods; None: KWOK's own default stage."""
        _put(self._job["spec"]["template"]["metadata"]["annotations"],
             SIMULATED_RUNTIME_ANNOTATION, value)
        return self

    def suspend(self, value: bool | None) -> Self:
        """`spec.suspend`; None leaves the field out, as a user may."""
        if value is None:
            self._job["spec"].pop("suspend", None)
        else:
            self._job["spec"]["suspend"] = value
        return self

    def label(self, key: str, value: str | None) -> Self:
        """Set a label; None removes it."""
        _put(self._job["metadata"]["labels"], key, value)
        return self

    def image(self, value: str) -> Self:
        self._main["image"] = value
        return self

    def priority_class(self, name: str) -> Self:
        self._pod["priorityClassName"] = name
        return self

    def node_selector(self, key: str, value: str) -> Self:
        self._pod.setdefault("nodeSelector", {})[key] = value
        return self

    def toleration(self, toleration: Obj) -> Self:
        self._pod.setdefault("tolerations", []).append(toleration)
        return self

    def affinity(self, affinity: Obj) -> Self:
        self._pod["affinity"] = affinity
        return self

    def init_container(self, container: Obj) -> Self:
        """An init container (with `restartPolicy: Always`, a native sidecar)."""
        self._pod.setdefault("initContainers", []).append(container)
        return self

    def uid(self, value: str) -> Self:
        """The uid the API server would have given it."""
        self._job["metadata"]["uid"] = value
        return self


def _put(fields: Obj, key: str, value: str | None) -> None:
    """Set `key`, or drop it for None."""
    if value is None:
        fields.pop(key, None)
    else:
        fields[key] = value


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
