"""Poll-with-timeout helpers: tests wait for a state instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], bool],
    timeout: float,
    what: str,
    on_poll: Callable[[], None] = lambda: None,
) -> None:
    """Poll `condition` every 100 ms; `on_poll` may raise early (e.g. a process died)."""
    deadline = time.monotonic() + timeout
    while not condition():
        on_poll()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    what: str,
    timeout: float = 30.0,
    interval: float = 0.2,
) -> T:
    """Await `probe` until it returns something other than None or False, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = await probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(interval)
