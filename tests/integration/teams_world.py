"""Teams on the real control plane: leaf ClusterQueues under one root of the whole test
cluster, a LocalQueue each, and what tests read back about their Jobs and Workloads."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import admitter_world

from admitter.api.workload import CONDITION_EVICTED
from admitter.controller.reconciler import Reconciler
from admitter.core.decisions import CycleResult
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, condition, parse_time
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, cluster_queue, local_queue


@dataclass(frozen=True)
class Teams:
    """Two leaf ClusterQueues under one root of 64 GPUs (the whole test cluster), with a
    LocalQueue each in the test's namespace, named like the leaves' roles."""

    namespace: str
    cluster_queues: dict[str, str]
    """LocalQueue name (the team) → its ClusterQueue."""


async def teams(api: Kube, namespace: str, quotas: dict[str, int]) -> Teams:
    """A root of 64 GPUs and one leaf per team with that GPU quota (its budget)."""
    root = f"slicing-{secrets.token_hex(3)}"
    named = {team: f"{root}-{team}" for team in quotas}
    await admitter_world.apply_all(
        api, cluster_queue(root, 64),
        *(cluster_queue(named[team], quota, parent=root) for team, quota in quotas.items()),
        *(local_queue(named[team], name=team, namespace=namespace) for team in quotas))
    return Teams(namespace, named)


def long_job(namespace: str, name: str, queue: str) -> JobWrapper:
    """Resumable long work (an hour to run), protected for 2 s."""
    return JobWrapper(name, namespace).queue(queue).runtime("1h").min_runtime("2s").resumable()


async def all_running(api: Kube, namespace: str, *names: str) -> None:
    async def probe() -> bool:
        current = await admitter_world.jobs(api, namespace)
        return all(name in current and admitter_world.running(current[name]) for name in names)

    await eventually(probe, f"Jobs {', '.join(names)} to run", 90)


async def workload_of(api: Kube, namespace: str, job_name: str) -> Obj | None:
    """The Workload made for the Job, once the controller made it."""
    for wl in await admitter_world.workloads(api, namespace):
        if any(o.get("name") == job_name for o in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


async def shown_condition(api: Kube, namespace: str, job_name: str, kind: str) -> Obj | None:
    """The condition of that type on the Job's Workload, if both exist yet."""
    wl = await workload_of(api, namespace, job_name)
    return None if wl is None else condition(wl, kind)


async def workload_key(api: Kube, namespace: str, job_name: str) -> str:
    """The core's key of the Job's Workload, as eviction messages name it."""
    wl = await workload_of(api, namespace, job_name)
    assert wl is not None, f"no Workload for Job {job_name}"
    return f"{namespace}/{wl['metadata']['name']}"


async def admitted_at(api: Kube, namespace: str) -> dict[str, float]:
    """Job name → when its Workload was admitted, for the admitted ones."""
    found = {}
    for wl in await admitter_world.workloads(api, namespace):
        admission = (wl.get("status") or {}).get("admission")
        owners = wl["metadata"].get("ownerReferences", [])
        if admission and owners:
            found[owners[0]["name"]] = parse_time(admission["admittedAt"]) or 0.0
    return found


async def evicted(api: Kube, namespace: str) -> dict[str, Obj]:
    """Job name → the Evicted condition of its Workload, for the evicted ones."""
    found = {}
    for wl in await admitter_world.workloads(api, namespace):
        evicted_condition = condition(wl, CONDITION_EVICTED)
        if evicted_condition is not None and evicted_condition["status"] == "True":
            found[wl["metadata"]["ownerReferences"][0]["name"]] = evicted_condition
    return found


async def event_on(api: Kube, namespace: str, job_name: str, reason: str) -> Obj:
    """The Event with `reason` recorded on the Job (sent in the background: waited for)."""
    async def probe() -> Obj | None:
        listed = await api.request("GET", kube.EVENTS.path(namespace))
        return next((e for e in listed["items"] if e["involvedObject"]["name"] == job_name
                     and e["reason"] == reason), None)

    found: Obj = await eventually(probe, f"a {reason} Event on Job {job_name}")
    return found


def recorded_cycles(reconciler: Reconciler) -> list[CycleResult]:
    """Every cycle result the controller gets from now on, in order."""
    results: list[CycleResult] = []
    reconcile = reconciler.reconcile

    async def recording() -> CycleResult:
        result = await reconcile()
        results.append(result)
        return result

    reconciler.reconcile = recording  # type: ignore[method-assign]
    return results


async def usage_in_window(api: Kube, cluster_queue_name: str) -> float:
    """GPU-hours the ClusterQueue's status says it used inside the window (the usage the
    controller charges and the ranking reads back)."""
    cq = await api.request("GET", kube.CLUSTER_QUEUES.path(name=cluster_queue_name))
    return float((cq.get("status") or {}).get("gpuHoursInWindow", 0.0))
