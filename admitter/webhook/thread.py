"""The webhooks on an event loop and API client of their own, in a thread.

Every Job creation waits on the webhooks. Served from the controller's event loop, a call
waited for whatever the loop was doing: building a pass's snapshot holds it for tens of
milliseconds at a time, and a fill of 2,000 Jobs took 100-135 s only to create the Jobs
(9-28 s without the webhooks). On a loop of their own, the webhooks wait at most for the
interpreter's thread switch.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager

from aiohttp import web

STOP_WAIT = 10.0
"""Seconds `stop` waits for the thread to end: reviews in flight take at most the server's
`DECISION_TIMEOUT` (4 s) to answer, and the process ends well within the 30 s Kubernetes
grants a terminating pod by default, whatever the thread (a daemon) still does."""


class WebhookThread:
    """`start` enters `serve` (a context that serves the webhooks while entered, yielding
    its runner) on a new loop in a daemon thread and returns the runner once it serves;
    `stop` leaves the context and ends the thread."""

    def __init__(self, serve: Callable[[], AbstractAsyncContextManager[web.AppRunner]]) -> None:
        self._serve = serve
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="webhooks", daemon=True)
        self._started: Future[web.AppRunner] = Future()

    async def start(self) -> web.AppRunner:
        self._thread.start()
        return await asyncio.wrap_future(self._started)

    def _main(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        try:
            async with self._serve() as runner:
                self._started.set_result(runner)
                await self._stopping.wait()
        except BaseException as error:
            if self._started.done():
                raise
            self._started.set_exception(error)

    async def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        await asyncio.to_thread(self._thread.join, STOP_WAIT)
