"""Workloads whose job is gone, finished so their quota is released: a job deleted with
`--cascade=orphan` leaves its Workload behind (the garbage collector only drops the owner
reference), admitted and charged forever otherwise (Kueue #1789)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from admitter.api.workload import Reason
from admitter.controller.pacing import SWEEP_EVERY
from admitter.jobs.registry import SUSPENDABLE
from admitter.jobs.workloads import job_owner, resource_of
from admitter.kube import client as kube
from admitter.kube.client import Kube
from admitter.kube.objects import Obj

FINISH_ORPHAN = "finish-orphan"
"""The write that finishes a Workload whose job is gone."""

Isolated = Callable[[str, Obj, Coroutine[Any, Any, None]], Coroutine[Any, Any, bool]]
Finish = Callable[[Obj, Obj | None, str, str, float], Coroutine[Any, Any, None]]


class Orphans:
    def __init__(self, client: Kube) -> None:
        self.kube = client
        self.checked: dict[str, float] = {}
        """Orphan candidates whose job was looked up (uid → when), at most once a sweep."""

    async def finish(self, orphans: list[Obj], now: float, isolated: Isolated,
                     finish: Finish) -> None:
        """Finish each of `orphans` (Workloads whose job the cache lacks) whose job is gone;
        a job missing from the cache is looked up first: it may only be lagging."""
        self.checked = {uid: at for uid, at in self.checked.items() if now - at < SWEEP_EVERY}
        writes = []
        for wl in orphans:
            uid = wl["metadata"].get("uid", "")
            if uid in self.checked:
                continue
            self.checked[uid] = now
            writes.append(isolated(FINISH_ORPHAN, wl, self._finish_one(wl, now, finish)))
        await kube.each(writes)

    async def _finish_one(self, wl: Obj, now: float, finish: Finish) -> None:
        owner = job_owner(wl)
        if owner is not None:
            try:
                job = await self.kube.get(resource_of(SUSPENDABLE[owner["kind"]]),
                                          owner["name"], wl["metadata"]["namespace"])
            except ApiException as error:
                if not kube.is_not_found(error):
                    raise  # a kind whose CRD is gone answers 404 too: its jobs are gone
            else:
                if job["metadata"].get("uid") == owner.get("uid"):
                    return  # the job is there: the cache lags, or it left the queue
        await finish(wl, None, Reason.JOB_GONE,
                     "its job was deleted, leaving this Workload behind", now)
