"""Priority preemption inside a queue that is at its limit, on the real control plane: the
usual Kueue setup without borrowing (`quota = limit`). A high-priority Job used to wait on
`LimitExceeded` forever, because the limit check returned before any preemption was tried; and
when its victims ran on other nodes than the idle one it fits on, because victims were planned
per node only."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from admitter_world import (
    apply_all,
    in_process_controller,
    jobs,
    priority_class,
    running,
    workloads,
)

from admitter.api.workload import CONDITION_EVICTED
from admitter.controller.kube import Kube, Obj
from admitter.core.decisions import EvictionReason
from admitter.testing import HOSTNAME_LABEL, GpuNodeLayout
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper, leaf_queue

pytestmark = pytest.mark.integration


def _job(namespace: str, name: str, queue: str, priority_class: str, gpus: int = 8) -> JobWrapper:
    return (JobWrapper(name, namespace).queue(queue).runtime("1h").min_runtime("2s").resumable()
            .priority_class(priority_class).gpus(gpus))


async def _why_not_running(api: Kube, namespace: str) -> str:
    reasons = {w["metadata"]["name"]: [(c["type"], c["reason"], c.get("message"))
                                       for c in w.get("status", {}).get("conditions", [])]
               for w in await workloads(api, namespace)}
    return f"the high-priority Job never ran: {reasons}"


def _preempted(listed: list[Obj]) -> list[Obj]:
    return [w for w in listed
            if any(c["type"] == CONDITION_EVICTED and c["reason"] == EvictionReason.PREEMPTED.value
                   for c in (w.get("status") or {}).get("conditions", []))]


async def test_a_high_priority_job_preempts_inside_a_queue_at_its_limit(
        api: Kube, namespace: str, kubeconfig: Path) -> None:
    await priority_class(api, "limit-test-low", 10)
    await priority_class(api, "limit-test-high", 50)
    name = f"capped-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 16, limit=16, namespace=namespace, local_name="capped"))
    low = [_job(namespace, f"low-{i}", "capped", "limit-test-low").obj() for i in range(2)]
    async with in_process_controller(kubeconfig):
        await apply_all(api, *low)

        async def queue_full() -> bool:
            current = await jobs(api, namespace)
            return all(running(current[f"low-{i}"]) for i in range(2))

        await eventually(queue_full, "two 8-GPU Jobs to fill the queue's 16-GPU limit", 60)
        await apply_all(api, _job(namespace, "high", "capped", "limit-test-high").obj())

        async def high_running() -> bool:
            return running((await jobs(api, namespace))["high"])

        try:
            await eventually(high_running, "the high-priority Job to preempt a low one", 90)
        except TimeoutError:
            pytest.fail(await _why_not_running(api, namespace))
        current = await jobs(api, namespace)
        assert sum(running(current[f"low-{i}"]) for i in range(2)) == 1, "the limit holds"
        assert len(_preempted(await workloads(api, namespace))) == 1


async def test_a_high_priority_job_takes_victims_on_other_nodes_than_its_own(
        api: Kube, namespace: str, kubeconfig: Path) -> None:
    """Two 4-GPU priority-10 Jobs, pinned to two nodes, fill a queue's limit of 8; an 8-GPU
    priority-50 Job fits on an idle node and only the limit holds it back: both go."""
    await priority_class(api, "limit-test-low", 10)
    await priority_class(api, "limit-test-high", 50)
    name = f"capped-{secrets.token_hex(3)}"
    await apply_all(api, *leaf_queue(name, 8, limit=8, namespace=namespace, local_name="capped"))
    nodes = GpuNodeLayout().node_names()
    low = [_job(namespace, f"low-{i}", "capped", "limit-test-low", gpus=4)
           .node_selector(HOSTNAME_LABEL, nodes[i]).obj() for i in range(2)]
    async with in_process_controller(kubeconfig):
        await apply_all(api, *low)

        async def queue_full() -> bool:
            current = await jobs(api, namespace)
            return all(running(current[f"low-{i}"]) for i in range(2))

        await eventually(queue_full, "two 4-GPU Jobs on two nodes to fill the limit of 8", 60)
        await apply_all(api, _job(namespace, "high", "capped", "limit-test-high").obj())

        async def high_alone() -> bool:
            current = await jobs(api, namespace)
            return running(current["high"]) and not any(
                running(current[f"low-{i}"]) for i in range(2))

        try:
            await eventually(high_alone, "the high-priority Job to preempt both", 90)
        except TimeoutError:
            pytest.fail(await _why_not_running(api, namespace))
        assert len(_preempted(await workloads(api, namespace))) == 2
