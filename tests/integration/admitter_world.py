"""Probes for controller tests on the real control plane, and the controller run in-process or
as a separate `admitter run` process; the objects come from `builders.kube`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.settings import Settings
from admitter.controller.reconciler import Reconciler
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import TERMINAL_POD_PHASES, Obj
from admitter.testing import in_process
from admitter.testing.cluster import schedulable

from builders.core import LEVELS
from builders.kube import topology

FAST = Settings(cycle=1.0, pods_ready_timeout=120.0)


async def earlier_work_gone(api: Kube) -> bool:
    """No earlier test's pod holds a node or is about to: none bound and not terminated, and
    none waiting to be bound without a scheduling gate; no earlier test's Workload still holds
    an admission (one in a namespace being deleted outlives its pods for a while, and the
    controller counts its room at its hints until it is gone); and every node is Ready and
    untainted (`nodes_ready`). Hazard: a pod the scheduler binds
    after this check (its Job started just before the earlier test ended) takes GPUs the test
    counted as idle, and the test sees one preemption more than it planned."""
    listed = await api.request("GET", kube.PODS.path())
    if any((p.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES and (
            p["spec"].get("nodeName") or not p["spec"].get("schedulingGates"))
           for p in listed["items"]):
        return False
    admitted = await api.request("GET", kube.WORKLOADS.path())
    if any((wl.get("status") or {}).get("admission") for wl in admitted["items"]):
        return False
    return await nodes_ready(api)


async def nodes_ready(api: Kube) -> bool:
    """Every node schedulable: after a fault test stopped the API server or etcd, the node
    lifecycle controller taints the KWOK nodes whose heartbeats lapsed until they report
    again, and a test starting meanwhile finds fewer nodes."""
    listed = await api.request("GET", kube.NODES.path())
    return all(schedulable(node) for node in listed["items"])


async def apply_all(client: Kube, *objects: Obj) -> None:
    kinds = {"ClusterQueue": kube.CLUSTER_QUEUES, "LocalQueue": kube.LOCAL_QUEUES,
             "Job": kube.JOBS, "Topology": kube.TOPOLOGIES}
    for obj in objects:
        await client.create(kinds[obj["kind"]], obj)


async def cluster_topology(client: Kube) -> None:
    """The Topology the test layout's labels describe (block, rack, host), created once for
    the session (later calls find it there)."""
    try:
        await client.create(kube.TOPOLOGIES, topology("default", *LEVELS))
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


def in_process_controller(kubeconfig: Path, settings: Settings = FAST, identity: str = "test",
                          ) -> contextlib.AbstractAsyncContextManager[Reconciler]:
    """The controller in this process, FAST unless told otherwise."""
    return in_process.in_process_controller(kubeconfig, settings, identity)


class ControllerProcess:
    """`admitter run` as its own process, so it can be killed like a crashed pod."""

    def __init__(self, kubeconfig: Path, log: Path, *extra: str,
                 settings_yaml: str = "cycle: 1s\n",
                 program: tuple[str, ...] = (sys.executable, "-m", "admitter.cli")) -> None:
        self.log = log
        settings = log.with_suffix(".settings.yaml")
        settings.write_text(settings_yaml)
        command = [*program, "run", "--kubeconfig", str(kubeconfig),
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
