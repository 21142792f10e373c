"""`/metrics` after admissions, a reclaim and waits on the real control plane: each series
added for the dashboards is there, with the labels and values the objects show; the series
shaped like Kueue's give each queue's quota and limit, the Workloads it holds, its status, the
preemption by the queue that made it, and the time from admission until the pods ran; counters
of what never happened are there at 0."""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp
import pytest
from admitter_world import apply_all, in_process_controller, jobs, running, workloads
from prometheus_client.parser import text_string_to_metric_families
from team_tree import metrics_port, two_teams

from admitter.api.workload import CONDITION_QUOTA_RESERVED
from admitter.core.decisions import EvictionReason
from admitter.core.model import GPU
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, condition
from admitter.testing import RACK_LABEL
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper

pytestmark = pytest.mark.integration
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return values


def series(values: Samples, name: str, /, **labels: str) -> float | None:
    return values.get((name, tuple(sorted(labels.items()))))


async def queue_statuses(api: Kube) -> dict[str, Obj]:
    listed = await api.request("GET", "/apis/admitter.dev/v1alpha1/clusterqueues")
    return {cq["metadata"]["name"]: cq.get("status") or {} for cq in listed["items"]}


async def story(api: Kube, namespace: str) -> str:
    """The namespace's Events in order, one a line: what a failure needs to be told."""
    listed = (await api.request("GET", kube.EVENTS.path(namespace)))["items"]
    lines = sorted(f"{e.get('lastTimestamp') or e.get('eventTime')} {e['involvedObject']['name']}"
                   f" {e['reason']}: {e['message']}" for e in listed)
    return "\n".join(lines)


def waiting_reason(wl: Obj) -> str | None:
    reserved = condition(wl, CONDITION_QUOTA_RESERVED) or {}
    return reserved.get("reason") if reserved.get("status") == "False" else None


async def test_the_dashboards_series_after_admissions_a_reclaim_and_waits(
        api: Kube, namespace: str, kubeconfig: Path) -> None:
    began = time.time()
    async with two_teams(api, namespace, "met") as (root, team_a, team_b):
        protected = JobWrapper("b-protected", namespace).queue("b").min_runtime("10m").obj()
        borrowers = [JobWrapper(f"b-{i}", namespace).queue("b").min_runtime("3s").resumable().obj()
                     for i in range(6)]
        await apply_all(api, protected, *borrowers)
        async with in_process_controller(kubeconfig) as reconciler, \
                metrics_port(reconciler) as port:
            async def b_running() -> bool:
                return sum(running(j) for j in (await jobs(api, namespace)).values()) == 7

            await eventually(b_running, "team b to take all it may", timeout=60)
            # a reclaim, and a gang that never fits (three whole nodes in a rack of two)
            await apply_all(api, JobWrapper("a-train", namespace).queue("a").pods(2)
                            .min_runtime("1m").obj(),
                            JobWrapper("a-huge", namespace).queue("a").pods(3)
                            .required(RACK_LABEL).obj())

            async def a_running_and_huge_explained() -> Obj | None:
                if not running((await jobs(api, namespace))["a-train"]):
                    return None
                huge = [wl for wl in await workloads(api, namespace)
                        if "a-huge" in wl["metadata"]["name"]]
                return huge[0] if huge and waiting_reason(huge[0]) else None

            huge = await eventually(a_running_and_huge_explained,
                                    "team a to reclaim and the gang's reason", timeout=60)

            async def scraped() -> Samples:
                async with aiohttp.ClientSession() as session, session.get(
                        f"http://127.0.0.1:{port}/metrics") as response:
                    return samples(await response.text())

            async def settled() -> tuple[Samples, dict[str, Obj], dict[str, Obj]] | None:
                """A scrape from a pass that saw what the API shows: the gang's reason, and
                a protection series for exactly the admitted Workloads."""
                held = {wl["metadata"]["name"]: wl for wl in await workloads(api, namespace)
                        if (wl.get("status") or {}).get("admission")}
                values = await scraped()
                shown = series(values, "admitter_pending_workloads_by_reason",
                               cluster_queue=team_a, reason=waiting_reason(huge) or "")
                protected = {dict(labels)["workload"] for name, labels in values
                             if name == "admitter_workload_protection_remaining_seconds"
                             and dict(labels)["namespace"] == namespace}
                statuses = await queue_statuses(api)
                agrees = all(series(values, "admitter_cluster_queue_resource_reservation",
                                    cluster_queue=name, resource=GPU)
                             == float((statuses[name].get("allocated") or {}).get(GPU, 0))
                             for name in (root, team_a, team_b))
                ready = (series(values, "admitter_admitted_until_ready_wait_time_seconds_count",
                                cluster_queue=team_b) or 0) >= 1
                return ((values, held, statuses)
                        if shown == 1 and protected == set(held) and agrees and ready else None)

            values, held, queues = await eventually(settled, "the metrics to show the API's state",
                                            timeout=30)
        evicted = [wl for wl in await workloads(api, namespace)
                   if (wl.get("status") or {}).get("evictionCount")]
        assert len(evicted) == 1, await story(api, namespace)
        assert series(values, "admitter_evicted_workloads_total", cluster_queue=team_b,
                      reason=EvictionReason.RECLAIMED.value) == 1
        assert (series(values, "admitter_admission_attempts_total", result="success") or 0) >= 8
        assert (series(values, "admitter_admission_attempts_total", result="inadmissible")
                or 0) >= 1
        for result in ("success", "inadmissible"):
            assert (series(values, "admitter_admission_attempt_duration_seconds_count",
                           result=result) or 0) >= 1
        for name in (team_a, team_b, root):
            assert series(values, "admitter_cluster_queue_resource_reservation",
                          cluster_queue=name, resource=GPU) == float(queues[name]["allocated"][GPU])
            assert series(values, "admitter_cluster_queue_owed_gpu_hours_in_window",
                          cluster_queue=name) == queues[name]["owedGpuHoursInWindow"]
        assert queues[team_a]["owedGpuHoursInWindow"] == 32 * 7 * 24
        assert (series(values, "admitter_cluster_queue_gpu_hours_in_window",
                       cluster_queue=team_b) or 0) > 0, "team b has held GPUs for seconds"
        guarded = next(name for name in held if name.startswith("job-b-protected-"))
        left = series(values, "admitter_workload_protection_remaining_seconds",
                      cluster_queue=team_b, namespace=namespace, workload=guarded)
        assert left is not None and 0 < left <= 600
        for name, wl in held.items():
            assert series(values, "admitter_workload_protection_remaining_seconds",
                          cluster_queue=wl["status"]["admission"]["clusterQueue"],
                          namespace=namespace, workload=name) is not None, name
        by_queue = {name: [wl for wl in held.values()
                           if wl["status"]["admission"]["clusterQueue"] == name]
                    for name in (team_a, team_b)}
        for name, local in ((team_a, "a"), (team_b, "b")):
            assert series(values, "admitter_cluster_queue_nominal_quota", cluster_queue=name,
                          resource=GPU) == 32
            assert series(values, "admitter_cluster_queue_borrowing_limit", cluster_queue=name,
                          resource=GPU) == float("inf")
            for prefix, labels in (("admitter", {"cluster_queue": name}),
                                   ("admitter_local_queue", {"name": local,
                                                             "namespace": namespace})):
                for state in ("admitted", "reserving"):
                    assert series(values, f"{prefix}_{state}_active_workloads",
                                  **labels) == len(by_queue[name]), (prefix, state, name)
            assert series(values, "admitter_cluster_queue_status", cluster_queue=name,
                          status="active") == 1
            assert series(values, "admitter_local_queue_status", name=local,
                          namespace=namespace, active="True") == 1
        assert series(values, "admitter_admitted_active_workloads", cluster_queue=root) == len(
            held), "a parent counts its subtree"
        # The reclaim was made for team a's Job; nothing was preempted by priority.
        assert series(values, "admitter_preempted_workloads_total",
                      preempting_cluster_queue=team_a,
                      reason=EvictionReason.RECLAIMED.value) == 1
        for name in (team_a, team_b):
            assert series(values, "admitter_preempted_workloads_total",
                          preempting_cluster_queue=name,
                          reason=EvictionReason.PREEMPTED.value) == 0
        assert series(values, "admitter_evicted_workloads_total", cluster_queue=team_a,
                      reason=EvictionReason.DRAINED.value) == 0
        assert series(values, "admitter_failed_writes_total", step="restore") == 0
        waited = series(values, "admitter_admitted_until_ready_wait_time_seconds_sum",
                        cluster_queue=team_b)
        timed = series(values, "admitter_admitted_until_ready_wait_time_seconds_count",
                       cluster_queue=team_b)
        assert waited is not None and timed, "timed"
        assert 0 <= waited / timed <= time.time() - began, "within the test's own time"
        assert (series(values, "admitter_local_queue_ready_wait_time_seconds_count", name="b",
                       namespace=namespace) or 0) >= 1
