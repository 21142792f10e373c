"""Builders and probes for controller tests on the real control plane: queues, Jobs, the
controller run in-process or as a separate `admitter run` process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.settings import Settings
from admitter.controller import kube
from admitter.controller.kube import Kube, Obj
from admitter.controller.reconciler import Reconciler
from admitter.testing import (
    BLOCK_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    RACK_LABEL,
    SIMULATED_RUNTIME_ANNOTATION,
)

QUEUE = "admitter.dev/queue-name"
FAST = Settings(cycle=1.0, pods_ready_timeout=120.0)


def cluster_queue(name: str, quota: int | str, parent: str | None = None,
                  limit: int | None = None) -> Obj:
    gpu: dict[str, Any] = {"quota": quota}
    if limit is not None:
        gpu["limit"] = limit
    spec: dict[str, Any] = {"resources": {GPU_RESOURCE: gpu}}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "admitter.dev/v1alpha1", "kind": "ClusterQueue",
            "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, cluster_queue_name: str, name: str = "default") -> Obj:
    return {"apiVersion": "admitter.dev/v1alpha1", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue_name}}


def gpu_job(namespace: str, name: str, pods: int = 1, gpus: int = 8, runtime: str = "300s",
            min_runtime: str = "1h", required: str | None = None, queue: str = "default",
            suspend: bool = True, resumable: bool = False) -> Obj:
    """A Job as a user writes it, already suspended as the mutating webhook would leave it."""
    annotations = {"admitter.dev/min-runtime": min_runtime}
    if resumable:
        annotations["admitter.dev/resumable"] = "true"
    if required:
        annotations["admitter.dev/topology-required"] = required
    container = {"name": "main", "image": "registry.invalid/train",
                 "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE: queue},
                     "annotations": annotations},
        "spec": {
            "suspend": suspend, "parallelism": pods, "completions": pods, "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {SIMULATED_RUNTIME_ANNOTATION: runtime}},
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
        },
    }


async def apply_all(client: Kube, *objects: Obj) -> None:
    kinds = {"ClusterQueue": kube.CLUSTER_QUEUES, "LocalQueue": kube.LOCAL_QUEUES,
             "Job": kube.JOBS, "Topology": kube.TOPOLOGIES}
    for obj in objects:
        await client.create(kinds[obj["kind"]], obj)


async def cluster_topology(client: Kube) -> None:
    """The Topology the test layout's labels describe (block, rack, host), created once for
    the session (later calls find it there)."""
    topology = {"apiVersion": "admitter.dev/v1alpha1", "kind": "Topology",
                "metadata": {"name": "default"},
                "spec": {"levels": [{"nodeLabel": label}
                                    for label in (BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL)]}}
    try:
        await client.create(kube.TOPOLOGIES, topology)
    except ApiException as error:
        if not kube.is_conflict(error):
            raise


async def workloads(client: Kube, namespace: str) -> list[Obj]:
    listed = await client.request("GET", kube.WORKLOADS.path(namespace))
    items: list[Obj] = listed["items"]
    return items


async def jobs(client: Kube, namespace: str) -> dict[str, Obj]:
    listed = await client.request("GET", kube.JOBS.path(namespace))
    return {j["metadata"]["name"]: j for j in listed["items"]}


async def pods(client: Kube, namespace: str, job_name: str | None = None) -> list[Obj]:
    query = {"labelSelector": f"batch.kubernetes.io/job-name={job_name}"} if job_name else {}
    listed = await client.request("GET", kube.PODS.path(namespace), query=query)
    items: list[Obj] = listed["items"]
    return items


def running(job: Obj) -> bool:
    return not job["spec"].get("suspend") and int((job.get("status") or {}).get("active", 0)) > 0


@contextlib.asynccontextmanager
async def in_process_controller(kubeconfig: Path, settings: Settings = FAST,
                                identity: str = "test") -> AsyncIterator[Reconciler]:
    client = await Kube.from_kubeconfig(str(kubeconfig))
    reconciler = Reconciler(client, settings, identity)
    tasks = [asyncio.create_task(reconciler.run_informers()),
             asyncio.create_task(reconciler.run())]
    try:
        yield reconciler
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()


class ControllerProcess:
    """`admitter run` as its own process, so it can be killed like a crashed pod."""

    def __init__(self, kubeconfig: Path, log: Path, *extra: str,
                 settings_yaml: str = "cycle: 1s\n") -> None:
        self.log = log
        settings = log.with_suffix(".settings.yaml")
        settings.write_text(settings_yaml)
        command = [sys.executable, "-m", "admitter.cli", "run", "--kubeconfig", str(kubeconfig),
                   "--config", str(settings), "--metrics-address", "127.0.0.1:0", *extra]
        self._out = log.open("ab")
        self.process = subprocess.Popen(command, stdout=self._out, stderr=subprocess.STDOUT,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def kill(self) -> None:
        """SIGKILL: no cleanup, exactly what a node failure or OOM kill does."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self._out.close()

    def alive(self) -> bool:
        return self.process.poll() is None


async def priority_class(client: Kube, name: str, value: int) -> None:
    """A PriorityClass, created once for the session (later calls find it there)."""
    with contextlib.suppress(ApiException):
        await client.create(kube.PRIORITY_CLASSES, {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value})
