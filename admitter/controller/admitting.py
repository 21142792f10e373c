"""Admissions being written: the next pass already counts them, so passes need not wait.

Carrying an admission out takes two round trips one after the other (the Workload's status,
then the Job), a quarter of a second each on a busy API server. A pass that waited for them
left every Job created meanwhile waiting too; a fill of thousands of Jobs spent most of its
time so. Instead each admission is written in the background and, until its writes are done,
the pass sees the Workload as admitted (the object it will be, `overlay`), so no later pass
counts its room as free, and converging Jobs leaves its Job alone. A write that fails drops
the overlay: the API state, which the informer shows, is what the next pass decides on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from admitter.controller.informer import Key, key_of
from admitter.controller.kube import Obj

log = logging.getLogger(__name__)
IN_FLIGHT = 32
"""Admissions written at once: enough to hide round trips, few enough not to crowd out the
job controller and kube-scheduler on a small API server."""


class Admitting:
    def __init__(self, limit: int = IN_FLIGHT) -> None:
        self._gate = asyncio.Semaphore(limit)
        self.overlay: dict[Key, Obj] = {}
        """Workloads as their admission makes them, while it is being written."""
        self._tasks: dict[Key, asyncio.Task[None]] = {}

    def start(self, admitted: Obj, write: Coroutine[Any, Any, None]) -> None:
        key = key_of(admitted)
        if key in self._tasks:  # a pass sees it admitted meanwhile, so this cannot happen
            write.close()
            log.error("admission of %s/%s already being written; not written twice", *key)
            return
        self.overlay[key] = admitted
        task = asyncio.create_task(self._run(key, write))
        self._tasks[key] = task

    async def _run(self, key: Key, write: Coroutine[Any, Any, None]) -> None:
        try:
            async with self._gate:
                await write
        except Exception as error:  # the next pass starts over from the API state
            log.warning("admitting %s/%s failed, a later pass retries: %s", *key, error)
        finally:
            self.overlay.pop(key, None)
            self._tasks.pop(key, None)

    def busy(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self._tasks

    async def wait(self, namespace: str, name: str) -> None:
        """Until the admission of this Workload, if one is being written, is done."""
        task = self._tasks.get((namespace, name))
        if task is not None:
            await asyncio.shield(task)

    async def drain(self) -> None:
        """Until every admission started so far is written (or failed)."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def cancel(self) -> None:
        for task in self._tasks.values():
            task.cancel()
