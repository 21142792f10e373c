"""Which changes wake the loop for a pass: all of them while something waits for room; with
nothing waiting, not the stream of pod and Job status updates of pods starting up. A wakeup
never swallows the cancellation that ends the loop."""

from __future__ import annotations

import asyncio

from fake_api import FakeApi, reconciler, submitted_jobs

from admitter.controller.pacing import SWEEP_EVERY, periodic_wait
from admitter.controller.reconciler import Reconciler
from admitter.core.decisions import Admission, CycleResult
from admitter.core.fairshare import FairShare
from admitter.kube.objects import Obj


def pod() -> Obj:
    return {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n0"}, "status": {"phase": "Running"}}


def finished(stored: Obj) -> Obj:
    return {**stored, "kind": "Job", "status": {"conditions": [
        {"type": "Complete", "status": "True"}]}}


async def world(jobs: int) -> tuple[FakeApi, Reconciler]:
    """One 8-GPU node, and `jobs` Jobs of 4 GPUs each after two passes."""
    api = FakeApi()
    controller = reconciler(api)
    await submitted_jobs(api, controller, jobs, gpus=4, n0=8)
    controller.wakeup.clear()
    return api, controller


async def test_with_nothing_waiting_pod_and_job_status_changes_wait_for_the_periodic_pass(
        ) -> None:
    _, controller = await world(jobs=2)
    assert not controller.waiting, "both Jobs admitted"
    controller._changed("MODIFIED", pod())
    controller._changed("ADDED", pod())
    running = {**controller.caches.jobs["Job"].get("ns", "j0"), "kind": "Job"}  # type: ignore[dict-item]
    controller._changed("MODIFIED", running)
    assert not controller.wakeup.is_set()
    controller._changed("MODIFIED", finished(running))
    assert controller.wakeup.is_set(), "a finished Job releases its quota at once"


async def test_while_a_workload_waits_any_change_wakes_the_loop() -> None:
    _, controller = await world(jobs=3)
    assert controller.waiting, "the third Job waits for room"
    controller._changed("MODIFIED", pod())
    assert controller.wakeup.is_set()


def _result(admitted: bool, settled: bool, next_change: float | None) -> CycleResult:
    admissions = (Admission("ns/j", "team", ({"n0": 1},), {}, "placed"),) if admitted else ()
    return CycleResult(admissions, (), (), FairShare({}, ()), next_change, settled, dict)


def test_the_periodic_pass_waits_for_what_could_change_the_answer() -> None:
    assert periodic_wait(None, 10.0, 100.0) == 10.0, "after a failed pass: the next cycle"
    assert periodic_wait(_result(True, False, None), 10.0, 100.0) == 10.0
    assert periodic_wait(_result(True, True, 104.0), 10.0, 100.0) == 4.0
    assert periodic_wait(_result(False, True, 250.0), 10.0, 100.0) == SWEEP_EVERY
    assert periodic_wait(_result(False, True, None), 10.0, 100.0) == SWEEP_EVERY
    assert periodic_wait(_result(False, True, 90.0), 10.0, 100.0) == 0.0


async def test_the_loop_ends_when_cancelled_as_a_wakeup_lands() -> None:
    """The leader cancels the loop when its lease is lost, then waits for it to end. Python
    3.11's `asyncio.wait_for` returns when its awaitable completes together with a
    cancellation, and drops the cancellation: the loop ran on, and the leader waited forever."""
    _, controller = await world(jobs=1)
    for informer in controller.caches.all():
        informer.synced.set()
    loop_task = asyncio.create_task(controller.run())
    passes = controller.passes
    for _ in range(500):  # the first pass runs its cycle in a thread
        if controller.passes > passes:
            break
        await asyncio.sleep(0.01)
    for _ in range(5):
        await asyncio.sleep(0)  # the loop now waits for a wakeup
    assert not loop_task.done()
    controller.wakeup.set()
    loop_task.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    assert loop_task.cancelled()
