"""Time-slicing on the real control plane: the controller runs the same ranking rule as the
simulator (docs/admission-cycle.md), so work past its min runtime is requeued for an
under-served team's Job, a debug Job displaces resumable work, and a rack is drained for a
starving gang. Min runtimes are seconds long so that the tests stay short."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import admitter_world
import pytest
from teams_world import (
    admitted_at,
    all_running,
    event_on,
    evicted,
    long_job,
    recorded_cycles,
    shown_condition,
    teams,
    usage_in_window,
    workload_key,
    workload_of,
)

from admitter.api.settings import FairShareSettings
from admitter.api.workload import CONDITION_ADMITTED, CONDITION_QUOTA_RESERVED
from admitter.core.decisions import EvictionReason, PendingReason
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj, parse_time
from admitter.testing import HOSTNAME_LABEL, RACK_LABEL
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper

RECLAIMED = EvictionReason.RECLAIMED.value

pytestmark = pytest.mark.integration
HELD_NOW = admitter_world.FAST.model_copy(update={"fair_share": FairShareSettings(window=0)})
"""Time-based fair share off: a queue's use is the GPUs it holds now, which a test sets
exactly (usage over a window grows with every second the test runs)."""


async def test_an_over_served_teams_job_is_requeued_past_its_min_runtime_for_an_under_served_one(
        api: Kube, namespace: str, kubeconfig: Path, idle_cluster: None) -> None:
    """Both teams have half of the root's 64 GPUs as budget. The over-served team fills the
    cluster and is charged for it; the under-served team, which used nothing, then submits a
    Job: one of the over-served team's Jobs is requeued once past its 2 s min runtime."""
    cast = await teams(api, namespace, {"over": 32, "under": 32})
    first = [long_job(namespace, f"over-{i}", "over").obj() for i in range(4)]
    # 60 of 64 GPUs: long starts leave one node with 4 GPUs for a short job's pod.
    second = [long_job(namespace, f"over-{i}", "over").gpus(8 if i < 7 else 4).obj()
              for i in range(4, 8)]
    async with admitter_world.in_process_controller(kubeconfig):
        await admitter_world.apply_all(api, *first)
        await all_running(api, namespace, *(j["metadata"]["name"] for j in first))
        # Admitting the second wave changes the queue's allocation, which writes its status
        # and charges the first wave's GPU time to its usage. Usage is kept in whole seconds
        # (the API's resolution) and the first wave runs within a second of its admission, so
        # the second wave waits for the next whole second: else the write charges 0 and the
        # next one is a minute away.
        first_admitted = max((await admitted_at(api, namespace)).values())
        await asyncio.sleep(max(first_admitted + 1 - time.time(), 0.0))
        await admitter_world.apply_all(api, *second)
        await all_running(api, namespace, *(f"over-{i}" for i in range(8)))

        async def charged() -> bool:
            return await usage_in_window(api, cast.cluster_queues["over"]) > 0

        await eventually(charged, "the over-served team's GPU time to be charged")
        assert await usage_in_window(api, cast.cluster_queues["under"]) == 0
        started = await admitted_at(api, namespace)
        await admitter_world.apply_all(
            api, JobWrapper("under", namespace).gpus(8).runtime("1h").queue("under").obj())
        await all_running(api, namespace, "under")
        requeued = await evicted(api, namespace)
        assert len(requeued) == 1, requeued
        [(victim, why)] = requeued.items()
        under_key = await workload_key(api, namespace, "under")
        assert why["reason"] == RECLAIMED
        assert f"requeued past its min runtime for {under_key}" in why["message"]
        assert "has used more of its GPU budget" in why["message"]
        assert parse_time(why["lastTransitionTime"]) >= started[victim] + 2, \
            "the protected min runtime is never cut"
        assert (await admitter_world.jobs(api, namespace))[victim]["spec"]["suspend"] is True
        event = await event_on(api, namespace, victim, RECLAIMED)
        assert under_key in event["message"]


async def test_a_debug_job_displaces_resumable_work_within_two_cycles(
        api: Kube, namespace: str, kubeconfig: Path, idle_cluster: None) -> None:
    """A full cluster of long resumable work past its min runtime, and a debug Job (1 pod of
    2 GPUs, min runtime 5 min) of a team ranked worse than the one running it (it asks for 2
    GPUs on a budget of 1): only the short-job rule can make room, and it does at once. Long
    starts leave one node with 4 GPUs for a short pod: a short Job of the long team fills it."""
    await teams(api, namespace, {"long": 63, "debug": 1})
    fill = [long_job(namespace, f"long-{i}", "long").gpus(8 if i < 7 else 4).obj()
            for i in range(8)]
    hole = (JobWrapper("short-hold", namespace).queue("long").gpus(4).runtime("1h")
            .min_runtime("5m").obj())
    async with admitter_world.in_process_controller(kubeconfig, HELD_NOW) as reconciler:
        await admitter_world.apply_all(api, *fill)
        await all_running(api, namespace, *(j["metadata"]["name"] for j in fill))
        await admitter_world.apply_all(api, hole)
        await all_running(api, namespace, "short-hold")
        protected_until = max((await admitted_at(api, namespace)).values()) + 2

        async def protections_over() -> bool:
            return time.time() > protected_until + 1  # admittedAt is rounded down to seconds

        await eventually(protections_over, "the long Jobs' 2 s min runtimes to end")
        cycles = recorded_cycles(reconciler)
        await admitter_world.apply_all(api, JobWrapper("debug", namespace).queue("debug").gpus(2)
                                       .runtime("1h").min_runtime("5m").obj())
        await all_running(api, namespace, "debug")
        debug = await workload_key(api, namespace, "debug")
        seen = [i for i, c in enumerate(cycles)
                if any(p.key == debug for p in c.pending)
                or any(a.key == debug for a in c.admissions)]
        admitted = [i for i in seen if any(a.key == debug for a in cycles[i].admissions)]
        assert admitted and admitted[0] - seen[0] <= 1, "admitted by the second cycle seeing it"
        requeued = await evicted(api, namespace)
        assert len(requeued) == 1, requeued
        [why] = requeued.values()
        assert why["reason"] == RECLAIMED
        assert f"requeued past its min runtime for {debug}" in why["message"]
        assert "a short job may requeue resumable work" in why["message"]


async def test_a_rack_is_drained_for_a_starving_two_node_gang(
        api: Kube, namespace: str, kubeconfig: Path, idle_cluster: None) -> None:
    """Team b holds every node but the last with long resumable Jobs pinned to one node
    each; the one next to the free node (same rack) is protected for 20 s, the others for an
    hour. Team a's gang of two whole nodes, required in one rack, starves at once (bound
    0.5 s): that rack is reserved, a long Job that would fit its free node is kept off, the
    occupant is requeued when its protection ends, and the gang starts there. No short job ran:
    the short jobs' room is the 2 % floor, which no demand backs and which keeps no node idle,
    so it does not hold the gang back."""
    await teams(api, namespace, {"a": 32, "b": 32})
    labels = {n["metadata"]["name"]: n["metadata"]["labels"]
              for n in (await api.request("GET", kube.NODES.path()))["items"]}
    names = sorted(labels)
    free, neighbour = names[-1], names[-2]
    rack = labels[free][RACK_LABEL]
    assert labels[neighbour][RACK_LABEL] == rack, "the test layout's last rack holds two nodes"
    fill = [long_job(namespace, f"b-{i}", "b").node_selector(HOSTNAME_LABEL, node)
            .min_runtime("20s" if node == neighbour else "1h").obj()
            for i, node in enumerate(names[:-1])]
    occupant = fill[-1]["metadata"]["name"]
    # Starving before its first pending reason is written (a Workload is explained once a
    # second old, and a changed reason only every 30 s), so that reason is the drain.
    settings = HELD_NOW.model_copy(update={"starvation_bound": 0.5})
    async with admitter_world.in_process_controller(kubeconfig, settings):
        await admitter_world.apply_all(api, *fill)
        await all_running(api, namespace, *(j["metadata"]["name"] for j in fill))
        await admitter_world.apply_all(api, JobWrapper("gang", namespace).queue("a").pods(2)
                                       .runtime("1h").required(RACK_LABEL).obj())

        async def reserved() -> Obj | None:
            shown = await shown_condition(api, namespace, "gang", CONDITION_QUOTA_RESERVED)
            return shown if shown and shown["reason"] == PendingReason.RESERVED else None

        drain = await eventually(reserved, "the starving gang's drain", 60)
        assert free in drain["message"] and neighbour in drain["message"], drain
        # Four GPUs of long protected work: only the held free node would hold it.
        await admitter_world.apply_all(
            api, long_job(namespace, "late", "b").gpus(4).min_runtime("1h").obj())

        async def late_waits() -> Obj | None:
            return await shown_condition(api, namespace, "late", CONDITION_QUOTA_RESERVED)

        waiting = await eventually(late_waits, "the late long Job's pending reason")
        assert waiting["status"] == "False"
        assert (await shown_condition(api, namespace, "gang", CONDITION_ADMITTED)) is None, \
            "the late Job was turned away while the rack was being drained"

        async def gang_bound() -> list[Obj] | None:
            gang = await admitter_world.pods(api, namespace, "gang")
            bound = [p for p in gang if p["spec"].get("nodeName")]
            return bound if len(bound) == 2 else None

        bound = await eventually(gang_bound, "the gang's pods to be bound", 90)
        assert {p["spec"]["nodeName"] for p in bound} == {free, neighbour}
        requeued = await evicted(api, namespace)
        assert set(requeued) == {occupant}, requeued
        gang_key = await workload_key(api, namespace, "gang")
        assert f"requeued past its min runtime for {gang_key}" in requeued[occupant]["message"]
        late = await workload_of(api, namespace, "late")
        assert late is not None and not (late.get("status") or {}).get("admission")
        assert "evictionCount" not in late["status"], "it never landed in the rack"
