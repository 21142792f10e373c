"""Node-sized training on the real control plane: 8 KWOK nodes of 8 `nvidia.com/gpu`, one parent
queue over two teams (quota 32 and 16), every Job 8 GPUs protected for an hour, and a few 1-GPU
debug Jobs that ran and finished earlier. Whenever a whole node is idle and a waiting Job fits
it, that Job starts in the first cycle that sees the node free, however the node came free: a
deleted Job, a finished Job, a raised limit, a new team under its quota. The short jobs' room
(a GPU, which no short-job demand fills) never keeps a node idle (docs/admission-cycle.md,
Short jobs and their headroom)."""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import admitter_world
import pytest
from teams_world import all_running, recorded_cycles, workload_key, workload_of

from admitter.controller.reconciler import Reconciler
from admitter.core.decisions import CycleResult
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, cluster_queue, local_queue

pytestmark = pytest.mark.integration
ROOM = ("kept for short jobs", "short pod's room")
"""What a reason says when the short jobs' room turns a Job away."""


@dataclass(frozen=True)
class Tree:
    """The parent queue and its teams' ClusterQueues, by LocalQueue name."""

    root: str
    teams: dict[str, str]


async def _tree(api: Kube, namespace: str, big_limit: int = 64) -> Tree:
    """A parent of 64 GPUs over `big` (quota 32, limit `big_limit`) and `small` (quota 16,
    limit 64), a LocalQueue each."""
    root = f"nodes-{secrets.token_hex(3)}"
    teams = {"big": f"{root}-big", "small": f"{root}-small"}
    await admitter_world.apply_all(
        api, cluster_queue(root, 64),
        cluster_queue(teams["big"], 32, parent=root, limit=big_limit),
        cluster_queue(teams["small"], 16, parent=root, limit=64),
        *(local_queue(cq, name=team, namespace=namespace) for team, cq in teams.items()))
    return Tree(root, teams)


def _training(namespace: str, name: str, team: str, runtime: str = "2h") -> Obj:
    """An 8-GPU Job (one whole node), protected for an hour."""
    return JobWrapper(name, namespace).queue(team).min_runtime("1h").runtime(runtime).obj()


async def _debug_jobs_ran(api: Kube, namespace: str) -> None:
    """Three 1-GPU debug Jobs (short: 10 min protected) that run two seconds and finish: the
    short jobs' average stays well under one GPU."""
    names = [f"debug-{i}" for i in range(3)]
    await admitter_world.apply_all(api, *(
        JobWrapper(name, namespace).queue("small").gpus(1).min_runtime("10m").runtime("2s")
        .obj() for name in names))

    async def finished() -> bool:
        current = await admitter_world.jobs(api, namespace)
        return all(int((current[name].get("status") or {}).get("succeeded", 0)) == 1
                   for name in names if name in current) and set(names) <= set(current)

    await eventually(finished, "the debug Jobs to finish", 90)


@asynccontextmanager
async def _controller(kubeconfig: Path, api: Kube,
                      namespace: str) -> AsyncIterator[tuple[Reconciler, list[CycleResult]]]:
    """The controller in-process, the debug Jobs run and finished long enough ago that short
    jobs held less than a GPU on average (the room is the 2 % floor, one GPU, which no demand
    fills), and every cycle result from then on."""
    async with admitter_world.in_process_controller(kubeconfig) as reconciler:
        cycles = recorded_cycles(reconciler)
        await _debug_jobs_ran(api, namespace)

        async def under_a_gpu() -> bool:
            return reconciler.usage.ledger.short_gpus(float(math.floor(time.time()))) < 1

        await eventually(under_a_gpu, "the short jobs' average to fall under one GPU", 120)
        yield reconciler, cycles


async def _waited_only_while_nothing_fit(api: Kube, namespace: str, job: str,
                                         cycles: list[CycleResult]) -> None:
    """`job` runs, and every cycle that left it waiting said it did not fit or was past a
    limit: no cycle saw a node free for it and kept it off for the short jobs' room."""
    await all_running(api, namespace, job)
    key = await workload_key(api, namespace, job)
    reasons = [(p.reason, p.message) for c in cycles for p in c.pending if p.key == key]
    assert not [r for r in reasons if any(room in r[1] for room in ROOM)], reasons
    assert all(reason in ("NoFit", "ProtectedVictims", "LimitExceeded")
               for reason, _ in reasons), reasons
    admitted = [a for c in cycles for a in c.admissions if a.key == key]
    assert len(admitted) == 1, admitted


async def _fill(api: Kube, namespace: str, jobs: dict[str, str], runtime: dict[str, str]
                ) -> None:
    """Submits the Jobs (name → team) and waits until they all run."""
    await admitter_world.apply_all(api, *(
        _training(namespace, name, team, runtime.get(name, "2h")) for name, team in jobs.items()))
    await all_running(api, namespace, *jobs)


def _eight_nodes() -> dict[str, str]:
    """Eight node-sized Jobs: four of big's (its quota), four of small's (past its quota)."""
    return {**{f"big-{i}": "big" for i in range(4)}, **{f"small-{i}": "small" for i in range(4)}}


async def test_a_deleted_job_frees_its_node_for_the_next(
        api: Kube, namespace: str, kubeconfig: Path, idle_cluster: None) -> None:
    """The cluster is full (all eight nodes, the last one too: no GPU stays idle for the
    room); `small-4` waits. A running Job is deleted: `small-4` starts on its node as soon as a
    cycle sees it free."""
    await _tree(api, namespace)
    async with _controller(kubeconfig, api, namespace) as (_, cycles):
        await _fill(api, namespace, _eight_nodes(), {})
        await admitter_world.apply_all(api, _training(namespace, "small-4", "small"))
        await api.delete(kube.JOBS, "big-0", namespace, {"propagationPolicy": "Background"})
        await _waited_only_while_nothing_fit(api, namespace, "small-4", cycles)


async def test_a_finished_job_frees_its_node_for_the_next(
        api: Kube, namespace: str, kubeconfig: Path, idle_cluster: None) -> None:
    """The same, where `big-0` runs 20 s and finishes."""
    await _tree(api, namespace)
    async with _controller(kubeconfig, api, namespace) as (_, cycles):
        await _fill(api, namespace, _eight_nodes(), {"big-0": "20s"})
        await admitter_world.apply_all(api, _training(namespace, "small-4", "small"))

        async def finished() -> bool:
            job = (await admitter_world.jobs(api, namespace))["big-0"]
            return int((job.get("status") or {}).get("succeeded", 0)) == 1

        await eventually(finished, "big-0 to finish", 90)
        await _waited_only_while_nothing_fit(api, namespace, "small-4", cycles)


async def test_a_raised_limit_starts_the_next_job_on_the_idle_node(
        api: Kube, namespace: str, kubeconfig: Path, idle_cluster: None) -> None:
    """big's limit is its quota (32): four of its Jobs and three of small's run, one node is
    idle and `big-4` waits at the limit. The limit is raised to 64: `big-4` takes the idle
    node in the next cycle."""
    tree = await _tree(api, namespace, big_limit=32)
    async with _controller(kubeconfig, api, namespace) as (_, cycles):
        seven = {name: team for name, team in _eight_nodes().items() if name != "small-3"}
        await _fill(api, namespace, seven, {})
        await admitter_world.apply_all(api, _training(namespace, "big-4", "big"))
        async def at_the_limit() -> bool:
            made = await workload_of(api, namespace, "big-4")
            key = made and f"{namespace}/{made['metadata']['name']}"
            return any(p.key == key and p.reason == "LimitExceeded"
                       for c in cycles[-2:] for p in c.pending)

        await eventually(at_the_limit, "big-4 to wait at big's limit", 60)
        await api.patch(kube.CLUSTER_QUEUES, tree.teams["big"],
                        {"spec": {"resources": {"nvidia.com/gpu": {"quota": 32, "limit": 64}}}})
        await _waited_only_while_nothing_fit(api, namespace, "big-4", cycles)


async def test_a_new_team_under_its_quota_starts_on_the_idle_node(
        api: Kube, namespace: str, kubeconfig: Path, idle_cluster: None) -> None:
    """Seven nodes run big's and small's Jobs, one is idle and nothing waits. A new team
    (quota 16 under the same parent) submits an 8-GPU Job: it starts in the next cycle."""
    tree = await _tree(api, namespace, big_limit=32)
    async with _controller(kubeconfig, api, namespace) as (_, cycles):
        seven = {name: team for name, team in _eight_nodes().items() if name != "small-3"}
        await _fill(api, namespace, seven, {})
        fresh = f"{tree.root}-fresh"
        await admitter_world.apply_all(
            api, cluster_queue(fresh, 16, parent=tree.root, limit=64),
            local_queue(fresh, name="fresh", namespace=namespace))
        await admitter_world.apply_all(api, _training(namespace, "fresh-0", "fresh"))
        await _waited_only_while_nothing_fit(api, namespace, "fresh-0", cycles)
