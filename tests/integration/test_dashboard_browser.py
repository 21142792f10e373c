"""`admitter dashboard` on the real control plane, read by headless Chromium: the queue bars
and the waiting rows are the API objects' figures, and a Job submitted while the page is open
appears without a reload and moves to the running table once admitted. Screenshots are kept
in the test's tmp directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from admitter_world import apply_all, in_process_controller, jobs, running
from devtools import Page, browser_page
from team_tree import two_teams

from admitter.api.quantity import parse_quantity
from admitter.api.workload import CONDITION_QUOTA_RESERVED
from admitter.commands.dashboard import dashboard
from admitter.core.model import GPU
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import condition
from admitter.testing import RACK_LABEL
from admitter.testing.waiting import eventually

from builders.kube import JobWrapper

pytestmark = pytest.mark.integration

ROWS = """[...document.querySelectorAll('#%s tr[data-workload]')].map(r => ({
  key: r.dataset.workload, reason: r.dataset.reason || null,
  position: r.dataset.position ? Number(r.dataset.position) : null,
  start: r.cells[r.cells.length - 1].textContent}))"""
QUEUES = """Object.fromEntries([...document.querySelectorAll('#queues tr[data-queue]')].map(
  r => [r.dataset.queue, {held: Number(r.dataset.held), budget: Number(r.dataset.budget),
                          owed: Number(r.dataset.owed), pending: Number(r.dataset.pending)}]))"""


async def rows(page: Page, section: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = await page.evaluate(ROWS % section)
    return found


async def api_workloads(api: Kube, namespace: str) -> dict[str, dict[str, Any]]:
    listed = await api.request("GET", kube.WORKLOADS.path(namespace))
    return {f"{namespace}/{wl['metadata']['name']}": wl for wl in listed["items"]}


async def test_the_dashboard_shows_the_api_objects_and_follows_a_new_job_live(
        api: Kube, namespace: str, kubeconfig: Path, tmp_path: Path) -> None:
    async with two_teams(api, namespace, "web") as (root, _, _):
        await apply_all(api, *(JobWrapper(f"b-{i}", namespace).queue("b").min_runtime("30m")
                               .runtime("1h").obj() for i in range(7)))
        async with in_process_controller(kubeconfig), \
                dashboard(str(kubeconfig), "127.0.0.1", 0) as url, browser_page() as page:
            async def all_running(count: int) -> bool:
                return sum(running(j) for j in (await jobs(api, namespace)).values()) == count

            # team b takes 7 nodes (beyond its deserved GPUs it leaves room for short jobs),
            # team a the eighth; then team a's next Jobs wait for team b's protection
            await eventually(lambda: all_running(7), "team b's work to run", timeout=60)
            await apply_all(api, JobWrapper("a-fill", namespace).queue("a").runtime("1h").obj())
            await eventually(lambda: all_running(8), "team a's first job to run", timeout=60)
            await apply_all(api, JobWrapper("a-first", namespace).queue("a").obj(),
                            # three whole nodes in one rack: a rack has two
                            JobWrapper("a-huge", namespace).queue("a").pods(3)
                            .required(RACK_LABEL).obj())

            async def explained(job: str) -> str | None:
                for key, wl in (await api_workloads(api, namespace)).items():
                    reserved = condition(wl, CONDITION_QUOTA_RESERVED) or {}
                    if f"/job-{job}-" in key and reserved.get("status") == "False":
                        return key
                return None

            await eventually(lambda: explained("a-first"), "why a-first waits", timeout=45)
            huge = await eventually(lambda: explained("a-huge"), "why a-huge waits", timeout=45)
            await page.goto(url)
            await page.evaluate("window.loadedOnce = true")

            async def page_shows_api() -> bool:
                """The bars and waiting rows are what the ClusterQueues and Workloads say."""
                listed = await api.request("GET", kube.CLUSTER_QUEUES.path())
                statuses = {cq["metadata"]["name"]: cq.get("status") or {}
                            for cq in listed["items"] if cq["metadata"]["name"].startswith(root)}
                shown = await page.evaluate(QUEUES)
                for name, status in statuses.items():
                    held = float(parse_quantity((status.get("allocated") or {}).get(GPU, 0)))
                    if shown.get(name) != {"held": held, "budget": status.get("gpuBudget"),
                                           "owed": status.get("owedGpuHoursInWindow"),
                                           "pending": status.get("pendingWorkloads", 0)}:
                        return False
                waiting = {key: condition(wl, CONDITION_QUOTA_RESERVED)["reason"]
                           for key, wl in (await api_workloads(api, namespace)).items()
                           if not (wl.get("status") or {}).get("admission")}
                return {r["key"]: r["reason"] for r in await rows(page, "pending")} == waiting

            await eventually(page_shows_api, "the page to show the API's figures", timeout=30)
            await page.screenshot(tmp_path / "dashboard-1-loaded.png")
            starts = {r["key"]: r["start"] for r in await rows(page, "pending")}
            assert starts[huge].startswith("never: no rack"), starts[huge]
            assert len(await rows(page, "running")) == 8

            # submitted while the page is open: it appears in the waiting rows ...
            await apply_all(api, JobWrapper("a-second", namespace).queue("a").obj())
            second = await eventually(lambda: explained("a-second"), "why a-second waits",
                                      timeout=45)

            async def appears() -> bool:
                return [r["key"] for r in await rows(page, "pending")][-1:] == [second]

            await eventually(appears, "a-second in the waiting rows", timeout=30)
            assert {r["key"]: r["position"] for r in await rows(page, "pending")}[second] == 3
            await page.screenshot(tmp_path / "dashboard-2-submitted.png")

            # ... and once team b's work is gone and it is admitted, it runs
            for i in range(7):
                await api.request("DELETE", kube.JOBS.path(namespace, f"b-{i}"),
                                  {"propagationPolicy": "Background"})

            async def moved() -> bool:
                return (second in {r["key"] for r in await rows(page, "running")}
                        and second not in {r["key"] for r in await rows(page, "pending")})

            await eventually(moved, "a-second to move to the running table", timeout=60)
            await page.screenshot(tmp_path / "dashboard-3-admitted.png")
            assert await page.evaluate("window.loadedOnce") is True, "the page was never reloaded"
            assert await page.evaluate("Number(document.body.dataset.updates)") >= 2

            await page.goto(f"{url}workload/{second}")
            facts = await page.evaluate(
                "Object.fromEntries([...document.querySelectorAll('td[data-fact]')].map("
                "c => [c.dataset.fact, c.textContent]))")
            assert facts["state"] == "Admitted" and facts["GPUs"] == "8"
            await page.screenshot(tmp_path / "dashboard-4-workload.png")
