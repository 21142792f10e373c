"""admitter's controller inside the calling process, for the demo, integration tests and
benchmarks: its informers and passes run as tasks for the duration of a block."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

from admitter.api.settings import Settings
from admitter.controller.reconciler import Reconciler
from admitter.kube.client import Kube


@contextlib.asynccontextmanager
async def background(*coroutines: Awaitable[Any]) -> AsyncIterator[list[asyncio.Task[Any]]]:
    """Run coroutines as tasks for the duration of the block, then cancel them and wait until
    they have stopped (a task left running would outlive the client it uses)."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def in_process_controller(kubeconfig: Path, settings: Settings,
                                identity: str) -> AsyncIterator[Reconciler]:
    """A controller against the cluster `kubeconfig` names, without leader election; its
    client (`reconciler.kube`) is closed after its tasks stopped."""
    client = await Kube.from_kubeconfig(str(kubeconfig))
    reconciler = Reconciler(client, settings, identity)
    try:
        async with background(reconciler.run_informers(), reconciler.run()):
            yield reconciler
    finally:
        await client.close()
