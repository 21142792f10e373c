"""Admissions being written: the next pass already counts them, so passes need not wait.

Carrying an admission out takes two round trips one after the other (the Workload's status,
then the Job), a quarter of a second each on a busy API server. A pass that waited for them
left every Job created meanwhile waiting too; a fill of thousands of Jobs spent most of its
time so. Instead each admission is written in the background and, until its writes are done,
the pass sees the Workload as admitted (the object it will be, `overlay`), so no later pass
counts its room as free, and converging Jobs leaves its Job alone.

A write that fails may still have landed: a timeout or a reset connection (the API server
stopped or restarted mid-request, etcd timed out after committing) says nothing of the
outcome, and a watch broken by the same fault may show the landed write only much later.
Dropping the overlay then gave the room to another Workload while the first one was admitted
too. So a failed admission stays in the overlay, *unsettled*, until its outcome is known: the
informer shows the Workload at a version other than the one the decision was made on (the
write, carrying that version as a precondition, landed or can never land), or the Workload is
gone. `settle` reads the Workload to learn it, and when the API still shows the decided-on
version it voids the write (`Actions.void_admission`: any change to the Workload moves its
version on), so the old write can never land later, and the next pass decides anew.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from admitter.kube.informer import Informer, Key, key_of
from admitter.kube.objects import Obj

log = logging.getLogger(__name__)
IN_FLIGHT = 32
"""Admissions written at once: enough to hide round trips, few enough not to crowd out the
job controller and kube-scheduler on a small API server."""


class NotWritten(Exception):
    """An admission dropped before its write was sent: its outcome is known (nothing)."""


@dataclass(frozen=True)
class Unsettled:
    """An admission whose write failed without telling whether it landed."""

    decided_on: str
    """The Workload's resourceVersion the decision was made on (the write's precondition)."""


Settle = Callable[[Key, str], Awaitable[Obj | None]]
"""Reads a Workload and voids an admission written on `decided_on` if it has not landed; the
Workload as it is now (None: gone)."""


class Admitting:
    def __init__(self, limit: int = IN_FLIGHT) -> None:
        self._gate = asyncio.Semaphore(limit)
        self.overlay: dict[Key, Obj] = {}
        """Workloads as their admission makes them, while it is being written or unsettled."""
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self.unsettled: dict[Key, Unsettled] = {}
        self._settling: dict[Key, asyncio.Task[None]] = {}

    def start(self, admitted: Obj, decided_on: str, write: Coroutine[Any, Any, None]) -> None:
        key = key_of(admitted)
        if key in self._tasks or key in self.unsettled:  # a pass sees it admitted meanwhile
            write.close()
            log.error("admission of %s/%s already being written; not written twice", *key)
            return
        self.overlay[key] = admitted
        task = asyncio.create_task(self._run(key, decided_on, write))
        self._tasks[key] = task

    async def _run(self, key: Key, decided_on: str, write: Coroutine[Any, Any, None]) -> None:
        unknown = True
        try:
            async with self._gate:
                await write
            unknown = False
        except NotWritten as error:
            unknown = False
            log.warning("admission of %s/%s dropped: %s", *key, error)
        except Exception as error:
            log.warning("admitting %s/%s failed, its room stays taken until its outcome is "
                        "known: %r", *key, error)
        finally:  # a cancelled write (the lease lost) may have been sent too
            self._tasks.pop(key, None)
            if unknown:
                self.unsettled[key] = Unsettled(decided_on)
            else:
                self.overlay.pop(key, None)

    def busy(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self._tasks

    def is_unsettled(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self.unsettled

    async def wait(self, namespace: str, name: str) -> None:
        """Until the admission of this Workload, if one is being written, is done."""
        task = self._tasks.get((namespace, name))
        if task is not None:
            await asyncio.shield(task)

    def settle(self, workloads: Informer, read: Settle) -> None:
        """Drop the unsettled admissions whose outcome the cache shows (a version other than
        the decided-on one, or no Workload), and start learning the others' (`read`)."""
        for key, unsettled in list(self.unsettled.items()):
            current = workloads.get(*key)
            if current is None or current["metadata"].get(
                    "resourceVersion") != unsettled.decided_on:
                self._settled(key)
            elif key not in self._settling:
                self._settling[key] = asyncio.create_task(
                    self._learn(key, unsettled.decided_on, read, workloads))

    async def _learn(self, key: Key, decided_on: str, read: Settle,
                     workloads: Informer) -> None:
        try:
            with workloads.reading() as touched:
                current = await read(key, decided_on)
        except Exception as error:  # the API server still unreachable: the next pass asks
            log.info("outcome of the admission of %s/%s still unknown: %r", *key, error)
            return
        finally:
            self._settling.pop(key, None)
        if current is not None:
            workloads.observe_read(current, touched)
        self._settled(key)

    def _settled(self, key: Key) -> None:
        if self.unsettled.pop(key, None) is not None:
            self.overlay.pop(key, None)
            log.info("outcome of the admission of %s/%s known; its room is decided anew", *key)

    async def drain(self) -> None:
        """Until every admission started so far is written (or failed)."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def cancel(self) -> None:
        for task in (*self._tasks.values(), *self._settling.values()):
            task.cancel()
