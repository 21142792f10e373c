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
from admitter.core.decisions import EvictionReason
from admitter.kube.client import Kube
from admitter.kube.objects import Obj
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


@pytest.mark.parametrize(("low_gpus", "pinned", "preempted"), [
    # two 8-GPU Jobs fill a limit of 16; the 8-GPU one takes the place of one of them
    (8, False, 1),
    # two 4-GPU Jobs pinned to two nodes fill a limit of 8; the 8-GPU one fits on an idle
    # node, held back by the limit only, and takes both
    (4, True, 2),
], ids=["one-victim", "victims-on-other-nodes"])
async def test_a_high_priority_job_preempts_inside_a_queue_at_its_limit(
        api: Kube, namespace: str, kubeconfig: Path, low_gpus: int, pinned: bool,
        preempted: int) -> None:
    await priority_class(api, "limit-test-low", 10)
    await priority_class(api, "limit-test-high", 50)
    name = f"capped-{secrets.token_hex(3)}"
    limit = 2 * low_gpus
    await apply_all(api, *leaf_queue(name, limit, limit=limit, namespace=namespace,
                                     local_name="capped"))
    nodes = GpuNodeLayout().node_names()
    low = [_job(namespace, f"low-{i}", "capped", "limit-test-low", low_gpus) for i in range(2)]
    if pinned:
        low = [job.node_selector(HOSTNAME_LABEL, nodes[i]) for i, job in enumerate(low)]
    async with in_process_controller(kubeconfig):
        await apply_all(api, *(job.obj() for job in low))

        async def queue_full() -> bool:
            current = await jobs(api, namespace)
            return all(running(current[f"low-{i}"]) for i in range(2))

        await eventually(queue_full, f"two Jobs to fill the queue's limit of {limit}", 60)
        await apply_all(api, _job(namespace, "high", "capped", "limit-test-high").obj())

        async def high_running_and_the_limit_held() -> bool:
            current = await jobs(api, namespace)
            return running(current["high"]) and sum(
                running(current[f"low-{i}"]) for i in range(2)) == 2 - preempted

        try:
            await eventually(high_running_and_the_limit_held,
                             f"the high-priority Job to preempt {preempted}", 90)
        except TimeoutError:
            pytest.fail(await _why_not_running(api, namespace))
        assert len(_preempted(await workloads(api, namespace))) == preempted
