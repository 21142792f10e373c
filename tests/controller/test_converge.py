"""Jobs converge to their Workloads: a burst of finished Jobs releases its quota in one pass,
its writes going out together rather than one round trip after another."""

from __future__ import annotations

import asyncio

from fake_api import CLOCK, FakeApi, SlowApi, add, reconciler, submitted_jobs

from admitter.api.workload import CONDITION_FINISHED
from admitter.controller.pacing import SWEEP_EVERY
from admitter.jobs.workloads import workload_name
from admitter.kube import client as kube
from admitter.kube.objects import format_time


async def test_finished_jobs_release_their_quota_with_concurrent_writes() -> None:
    api = SlowApi()
    api.open.set()
    controller = reconciler(api)
    caches = controller.caches
    await submitted_jobs(api, controller, 8, gpus=1, node_a=8)
    api.open.clear()
    for stored in caches.jobs["Job"].items():
        assert not stored["spec"]["suspend"], "all eight admitted and started"
        done = {**stored, "status": {"conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": format_time(0)}]}}
        add(api, caches.jobs["Job"], kube.JOBS, done)
    every = {("Job", *key): job for key, job in caches.jobs["Job"].store.items()}
    converging = asyncio.create_task(controller.converge_jobs(0.0, every))
    for _ in range(1000):  # let every write that can start start
        if api.waiting >= 8 or converging.done():
            break
        await asyncio.sleep(0)
    api.open.set()
    await converging
    assert api.most == 8, "the eight finishes were in flight together"
    assert all(any(c["type"] == CONDITION_FINISHED for c in wl["status"]["conditions"])
               for wl in caches.workloads.items())


async def test_a_pass_checks_the_jobs_that_changed_and_every_job_once_per_sweep() -> None:
    """Thousands of finished Jobs stay in the cache; checking all of them on every pass cost
    more than the cycle. A pass checks the Jobs whose Job or Workload changed, and all of
    them once per sweep (a failed write leaves no change behind)."""
    now = [CLOCK]
    api = FakeApi()
    controller = reconciler(api, lambda: now[0])
    caches = controller.caches
    await submitted_jobs(api, controller, 3, gpus=1, node_a=8)
    assert controller.jobs_to_check(now[0]) == {}, "nothing changed since the last pass"
    changed = caches.jobs["Job"].get("ns", "j1")
    assert changed is not None
    wl = caches.workloads.get("ns", workload_name(changed))
    assert wl is not None
    controller._changed("MODIFIED", wl)
    assert [name for _, _, name in controller.jobs_to_check(now[0])] == ["j1"], \
        "a Workload's change checks its Job"
    now[0] += SWEEP_EVERY
    assert len(controller.jobs_to_check(now[0])) == 3, "the sweep checks every Job"
