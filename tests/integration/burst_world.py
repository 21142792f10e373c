"""A burst of 8-GPU and 2-GPU Jobs admitted together into 8-GPU nodes, on the real control
plane, with admitter's webhooks and controller running under given settings: how many of the
admitted pods waited unschedulable, and the GPU-seconds admitted but not yet bound. Used by
tests/integration/test_pod_placement_cluster.py and benchmarks/bench_pod_placement.py (side by side,
`podPlacement: Domain` against `Node`)."""

from __future__ import annotations

import contextlib
import random
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from admitter_world import apply_all, earlier_work_gone, in_process_controller

from admitter.api.settings import Settings
from admitter.controller.reconciler import Reconciler
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.names import WEBHOOK_CONFIGURATION
from admitter.kube.objects import PLACEMENT_GATE, POD_SET_LABEL, Obj, parse_time
from admitter.testing.demo import ADMIN_USERNAME
from admitter.testing.waiting import eventually
from admitter.testing.webhooks import admitter_webhooks

from builders.kube import JobWrapper, leaf_queue

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Burst:
    """One round's outcome."""

    pods: int
    """Pods made (those of the Jobs admitted)."""
    unschedulable: int
    """Of those, pods kube-scheduler found no node for at least once (FailedScheduling)."""
    idle_gpu_seconds: float
    """GPUs standing free while the burst's work waited, from its submission until every pod
    is bound (or the round's end): the burst asks for exactly the cluster's GPUs, so that is
    each Job's GPUs times its wait for its pod to be bound, admitted or not."""
    unbound: int
    """Jobs whose pod was not bound when the round ended (not admitted, or unschedulable)."""


@contextlib.asynccontextmanager
async def admitter_running(api: Kube, kubeconfig: Path, settings: Settings,
                           cert_dir: Path) -> AsyncIterator[Reconciler]:
    """admitter's webhooks (those `settings` need) and its controller, in this process."""
    try:
        async with (admitter_webhooks(api.api, settings, cert_dir, [ADMIN_USERNAME]),
                    in_process_controller(kubeconfig, settings) as reconciler):
            yield reconciler
    finally:
        for kind in (kube.Kind("admissionregistration.k8s.io/v1",
                               "mutatingwebhookconfigurations", False),
                     kube.Kind("admissionregistration.k8s.io/v1",
                               "validatingwebhookconfigurations", False)):
            with contextlib.suppress(Exception):
                await api.delete(kind, WEBHOOK_CONFIGURATION)


async def placement_gate_in_effect(api: Kube, namespace: str) -> None:
    """Until a pod naming its pod set is created held (the webhook registered and served)."""
    probe = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "probe", "namespace": namespace,
                          "labels": {POD_SET_LABEL: "main"}},
             "spec": {"containers": [{"name": "c", "image": "registry.invalid/probe"}]}}

    async def gated() -> bool:
        made = await api.request("POST", kube.PODS.path(namespace), probe,
                                 query={"dryRun": "All"})
        return any(g.get("name") == PLACEMENT_GATE
                   for g in made["spec"].get("schedulingGates") or ())

    await eventually(gated, "the placement webhook in effect", 60)


async def queue(api: Kube, namespace: str, gpus: int) -> None:
    """A ClusterQueue of `gpus` GPUs and LocalQueue `default` in `namespace`."""
    await apply_all(api, *leaf_queue(f"burst-{secrets.token_hex(3)}", gpus, limit=gpus,
                                     namespace=namespace))


def burst_jobs(namespace: str, big: int, small: int, seed: int, prefix: str) -> list[Obj]:
    """`big` one-pod 8-GPU Jobs and `small` one-pod 2-GPU Jobs, shuffled, all running long."""
    sizes = [8] * big + [2] * small
    random.Random(seed).shuffle(sizes)
    return [JobWrapper(f"{prefix}-{i}-g{gpus}", namespace).gpus(gpus).runtime("2h").obj()
            for i, gpus in enumerate(sizes)]


async def burst(api: Kube, namespace: str, big: int, small: int, seed: int,
                settle: float) -> Burst:
    """Submit one burst, wait until every pod is bound or `settle` seconds passed, measure
    it, and delete the Jobs (until no pod or admission is left)."""
    prefix = f"b{secrets.token_hex(2)}"
    jobs = burst_jobs(namespace, big, small, seed, prefix)
    submitted = time.time()
    await apply_all(api, *jobs)
    gpus = {job["metadata"]["name"]: int(
        job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU])
        for job in jobs}

    async def pods() -> list[Obj]:
        listed = await api.request("GET", kube.PODS.path(namespace))
        return [p for p in listed["items"]
                if p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") in gpus]

    async def all_bound() -> bool:
        current = await pods()
        return len(current) == len(gpus) and all(p["spec"].get("nodeName") for p in current)

    with contextlib.suppress(TimeoutError):
        await eventually(all_bound, "every pod of the burst bound", settle)
    ended = min(time.time(), submitted + settle)
    current = await pods()
    events = (await api.request("GET", f"/api/v1/namespaces/{namespace}/events"))["items"]
    failed = {e["involvedObject"]["name"] for e in events if e.get("reason") == "FailedScheduling"}
    bound_at: dict[str, float] = {}
    for pod in current:
        scheduled = next((c for c in pod.get("status", {}).get("conditions") or ()
                          if c["type"] == "PodScheduled" and c["status"] == "True"), None)
        at = parse_time(scheduled["lastTransitionTime"]) if scheduled else None
        if at is not None:
            bound_at[pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]] = at
    idle = sum(count * max(0.0, min(bound_at.get(job, ended), ended) - submitted)
               for job, count in gpus.items())
    outcome = Burst(len(current), len({p["metadata"]["name"] for p in current} & failed),
                    idle, len(gpus) - len(bound_at))
    for name in gpus:
        await api.delete(kube.JOBS, name, namespace, {"propagationPolicy": "Background"})
    await eventually(lambda: earlier_work_gone(api), "the burst gone", 120)
    return outcome
