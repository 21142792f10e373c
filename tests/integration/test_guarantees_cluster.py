"""A queue's promises on the real control plane, as a platform engineer meets them: a queue
within its quota gets idle GPUs whatever the cycle keeps for short jobs, priority orders a
queue that holds its quota on a full cluster, and a waiting Job's reason names times a person
can read (docs/admission-cycle.md, Guarantees)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import admitter_world
import pytest
from teams_world import (
    admitted_at,
    all_running,
    evicted,
    long_job,
    recorded_cycles,
    shown_condition,
    teams,
    workload_key,
)

from admitter.api.workload import CONDITION_QUOTA_RESERVED
from admitter.core.decisions import EvictionReason
from admitter.kube.client import Kube
from admitter.kube.objects import Obj
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper

pytestmark = pytest.mark.integration
READABLE_MOMENT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in (\d+[dhms])+\)")


async def _others_fill_six_nodes(api: Kube, namespace: str, nodes: int = 6) -> None:
    """Queue `other` runs six (or `nodes`) 8-GPU Jobs protected for an hour: 16 of the 64 GPUs
    stay idle."""
    fill = [long_job(namespace, f"other-{i}", "other").min_runtime("1h").obj()
            for i in range(nodes)]
    await admitter_world.apply_all(api, *fill)
    await all_running(api, namespace, *(j["metadata"]["name"] for j in fill))


def _vision_jobs(namespace: str) -> list[Obj]:
    return [JobWrapper(f"vision-{i}", namespace).queue("vision").runtime("1h").obj()
            for i in range(2)]


async def test_a_queue_within_its_quota_starts_both_jobs_on_idle_gpus(
        api: Kube, namespace: str, kubeconfig: Path, idle_cluster: None) -> None:
    """Quota 16, 16 GPUs idle, two 8-GPU Jobs: both start, neither is ever told to wait,
    although nothing is left for short jobs afterwards (their room is made of surplus)."""
    await teams(api, namespace, {"vision": 16, "other": 48})
    async with admitter_world.in_process_controller(kubeconfig) as reconciler:
        await _others_fill_six_nodes(api, namespace)
        cycles = recorded_cycles(reconciler)
        await admitter_world.apply_all(api, *_vision_jobs(namespace))
        await all_running(api, namespace, "vision-0", "vision-1")
        keys = {await workload_key(api, namespace, f"vision-{i}") for i in range(2)}
        waited = [p for c in cycles for p in c.pending if p.key in keys]
        assert waited == [], waited


async def test_priority_orders_a_queue_at_its_quota_on_a_full_cluster(
        api: Kube, namespace: str, kubeconfig: Path, idle_cluster: None) -> None:
    """`prio` holds its quota of 16 with two priority-10 Jobs (not resumable) past their 2 s
    min runtime; the cluster is full. A priority-50 Job of the same size takes one's place."""
    await teams(api, namespace, {"prio": 16, "other": 48})
    await admitter_world.priority_class(api, "guarantee-low", 10)
    await admitter_world.priority_class(api, "guarantee-high", 50)
    low = [JobWrapper(f"low-{i}", namespace).queue("prio").runtime("1h").min_runtime("2s")
           .priority_class("guarantee-low").obj() for i in range(2)]
    async with admitter_world.in_process_controller(kubeconfig):
        await _others_fill_six_nodes(api, namespace)
        await admitter_world.apply_all(api, *low)
        await all_running(api, namespace, "low-0", "low-1")
        protected_until = max((await admitted_at(api, namespace)).values()) + 2

        async def protections_over() -> bool:
            return time.time() > protected_until + 1  # admittedAt is rounded down to seconds

        await eventually(protections_over, "the low Jobs' 2 s min runtimes to end")
        await admitter_world.apply_all(
            api, JobWrapper("high", namespace).queue("prio").runtime("1h")
            .priority_class("guarantee-high").obj())
        await all_running(api, namespace, "high")
        requeued = await evicted(api, namespace)
        assert set(requeued) <= {"low-0", "low-1"} and len(requeued) == 1, requeued
        [why] = requeued.values()
        high = await workload_key(api, namespace, "high")
        assert why["reason"] == EvictionReason.PREEMPTED.value
        assert f"preempted by {high} (priority 50 > 10)" in why["message"]


async def test_a_waiting_jobs_reason_names_a_time_a_person_can_read(
        api: Kube, namespace: str, kubeconfig: Path, idle_cluster: None) -> None:
    """Quota 8, held by a priority-10 Job protected for an hour; the other team's Jobs fill the
    other seven nodes. A priority-50 Job of 8 GPUs, past the queue's guarantee, finds no node
    free. Its reason says so in GPUs and names the protected Jobs it could replace (the low one,
    or the other team's when that team is ranked clearly worse by then) and when their
    protection ends, as RFC 3339 and how long from now."""
    await teams(api, namespace, {"vision": 8, "other": 56})
    await admitter_world.priority_class(api, "guarantee-low", 10)
    await admitter_world.priority_class(api, "guarantee-high", 50)
    async with admitter_world.in_process_controller(kubeconfig):
        await _others_fill_six_nodes(api, namespace, nodes=7)
        await admitter_world.apply_all(
            api, long_job(namespace, "low", "vision").min_runtime("1h")
            .priority_class("guarantee-low").obj())
        await all_running(api, namespace, "low")
        await admitter_world.apply_all(
            api, long_job(namespace, "high", "vision").priority_class("guarantee-high").obj())

        async def explained() -> Obj | None:
            shown = await shown_condition(api, namespace, "high", CONDITION_QUOTA_RESERVED)
            return shown if shown is not None and shown["status"] == "False" else None

        waiting = await eventually(explained, "the high Job's pending reason", 60)
        message = waiting["message"]
        assert waiting["reason"] == "ProtectedVictims", waiting
        assert message.startswith(
            "no node offers 8 nvidia.com/gpu per pod; the largest node has 0"), message
        assert f"; evicting {namespace}/" in message and (
            " would make room, and their min runtime protects them until ") in message, message
        assert READABLE_MOMENT.search(message), message
        assert "e+09" not in message and "t=" not in message, message
