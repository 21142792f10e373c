"""The live board: the cluster read with the caller's kubeconfig, read again whenever a watch
on Workloads or ClusterQueues sees a change, and pushed to every open page as server-sent
events. It writes nothing and keeps only the GPU samples of the chart, in memory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from kubernetes_asyncio.client.exceptions import ApiException

from admitter.core.model import GPU
from admitter.core.nodes import ClusterState
from admitter.core.usage import HOUR
from admitter.dashboard import render, workload_page
from admitter.kube import client as kube
from admitter.kube.client import CONNECTION_ERRORS, Kube
from admitter.kube.core_values import core_node
from admitter.kube.objects import parse_time
from admitter.kubectl.clusters import cluster_rows
from admitter.kubectl.explain import would_start
from admitter.kubectl.queues import queue_rows
from admitter.kubectl.state import QueueReading, gpus, job_name, read_state, waiting_reason
from admitter.kubectl.top import top_rows

log = logging.getLogger(__name__)
READ_ERRORS: tuple[type[BaseException], ...] = (ApiException, *CONNECTION_ERRORS)
"""A read or watch that failed; the next change or tick tries again."""
SAMPLES = 720
"""GPU samples kept for the chart (one per change, at least one per TICK)."""
TICK = 5.0
"""Seconds between reads when nothing changes: protection left counts down."""
HOURLY_NOTE = ("; hours before this page's server started show the funded GPUs each queue "
               "held on average, from its usage in the ClusterQueue status")
SETTLE = 0.3
"""Seconds to wait after a change for the rest of its burst before reading."""


def _name(namespace: str, wl: dict[str, Any]) -> str:
    return f"{namespace}/{job_name(wl) or wl['metadata']['name']}"


async def schedulable_gpus(client: Kube) -> int:
    """GPUs of the schedulable nodes, as the core counts them; 0 if the caller may not read
    the nodes."""
    try:
        nodes = (await client.list(kube.NODES))["items"]
    except ApiException as error:
        if error.status in (401, 403):
            return 0
        raise
    return ClusterState([core_node(node, {}) for node in nodes]).schedulable_capacity().get(GPU, 0)


def board(state: QueueReading, capacity: int, history: Any, title: str) -> render.Board:
    """What the page shows, from the same reading of the cluster `kubectl admitter` uses;
    `capacity` is the schedulable GPUs (`schedulable_gpus`)."""
    pending = []
    for queue in sorted({state.cluster_queue_of(wl) for wl in state.pending()}):
        for position, wl in enumerate(state.queue_order(queue), 1):
            meta = wl["metadata"]
            pending.append({
                "key": f"{meta['namespace']}/{meta['name']}",
                "name": _name(meta["namespace"], wl),
                "href": f"/workload/{meta['namespace']}/{meta['name']}",
                "clusterQueue": queue, "gpus": gpus(wl), "position": position,
                "reason": waiting_reason(wl)[0],
                "wouldStart": would_start(state, wl)})
    running = [{**row, "key": f"{row['namespace']}/{row['workload']}",
                "name": f"{row['namespace']}/{row['job'] or row['workload']}",
                "href": f"/workload/{row['namespace']}/{row['workload']}"}
               for row in top_rows(state, None)]
    return {"title": title, "live": True, "now": state.now, "capacity": capacity,
            "queues": queue_rows(state), "history": history, "pending": pending,
            "running": running, "clusters": cluster_rows(state)}


def hourly_use(state: QueueReading, leaves: list[str],
               before: float) -> list[tuple[float, dict[str, float]]]:
    """The window before `before`, from the leaves' persisted usage: the funded GPUs each
    held on average in every hour (what the chart shows until live samples take over)."""
    hours: dict[float, dict[str, float]] = {}
    for leaf in leaves:
        for bucket in (state.cluster_queues[leaf].get("status") or {}).get("usage") or []:
            start = parse_time(bucket.get("start"))
            if start is not None and start + HOUR <= before:
                hours.setdefault(start, {})[leaf] = float(bucket.get("gpuSeconds", 0)) / HOUR
    return sorted(hours.items())


class LiveBoard:
    """One reading of the cluster at a time, shared by every open page."""

    def __init__(self, client: Kube, title: str = "admitter") -> None:
        self.client = client
        self.title = title
        self.changed = asyncio.Event()
        self.board: render.Board | None = None
        self.state: QueueReading | None = None
        self._samples: deque[tuple[float, dict[str, float]]] = deque(maxlen=SAMPLES)
        self._listeners: set[asyncio.Queue[None]] = set()
        self.closed = False
        """Set when the server shuts down: open event streams end instead of being waited
        for."""

    async def refresh(self) -> None:
        state = await read_state(self.client)
        leaves = [q for q in state.cluster_queues if q not in state.children]
        held = {row["name"]: row["held"] for row in queue_rows(state) if row["name"] in leaves}
        self._samples.append((state.now, held))
        past = hourly_use(state, leaves, before=self._samples[0][0])
        samples = [*past, *self._samples]
        names = sorted({name for _, sample in samples for name in sample})
        history = {"leaves": names, "points": [(at, [sample.get(n, 0.0) for n in names])
                                               for at, sample in samples],
                   "note": HOURLY_NOTE if past else ""}
        self.state = state
        self.board = board(state, await schedulable_gpus(self.client), history, self.title)
        for listener in self._listeners:
            listener.put_nowait(None)

    async def run(self) -> None:
        """Read on every change (after SETTLE) and at least every TICK."""
        watches = [asyncio.create_task(self._watch(kind))
                   for kind in (kube.WORKLOADS, kube.CLUSTER_QUEUES)]
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), TICK)
                await asyncio.sleep(SETTLE)
                self.changed.clear()
                try:
                    await self.refresh()
                except READ_ERRORS as error:
                    log.warning("reading the cluster failed, trying again: %s", error)
        finally:
            for watch in watches:
                watch.cancel()

    async def _watch(self, kind: kube.Kind) -> None:
        while True:
            try:
                listed = await self.client.request("GET", kind.path(), query={"limit": "1"})
                self.changed.set()
                async for _ in self.client.watch(kind, listed["metadata"]["resourceVersion"]):
                    self.changed.set()
            except READ_ERRORS as error:
                log.info("watch on %s ended, starting again: %s", kind.plural, error)
                await asyncio.sleep(1.0)

    def close(self) -> None:
        """End every open event stream."""
        self.closed = True
        for listener in self._listeners:
            listener.put_nowait(None)

    @contextlib.asynccontextmanager
    async def listening(self) -> AsyncIterator[asyncio.Queue[None]]:
        queue: asyncio.Queue[None] = asyncio.Queue()
        self._listeners.add(queue)
        try:
            yield queue
        finally:
            self._listeners.discard(queue)


def application(live: LiveBoard) -> web.Application:
    """GET only: the overview, a page per Workload, and the event stream both listen to."""

    async def overview(_request: web.Request) -> web.Response:
        if live.board is None:
            await live.refresh()
        assert live.board is not None
        return web.Response(text=render.overview(live.board), content_type="text/html")

    async def workload(request: web.Request) -> web.Response:
        if live.state is None:
            await live.refresh()
        assert live.state is not None
        found = await workload_page.explained(live.client, live.state,
                                              request.match_info["namespace"],
                                              request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound(text="no such Workload")
        return web.Response(text=workload_page.page(found, live.state.now),
                            content_type="text/html")

    async def events(request: web.Request) -> web.StreamResponse:
        path = request.query.get("path", "/")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        async with live.listening() as updates:
            while not live.closed:
                parts = await _parts(live, path)
                if parts:
                    await response.write(f"data: {json.dumps(parts)}\n\n".encode())
                await updates.get()
        return response

    async def end_streams(_app: web.Application) -> None:
        live.close()

    app = web.Application()
    app.on_shutdown.append(end_streams)
    app.router.add_get("/", overview)
    app.router.add_get("/workload/{namespace}/{name}", workload)
    app.router.add_get("/events", events)
    return app


async def _parts(live: LiveBoard, path: str) -> dict[str, str]:
    """The sections of the page at `path`, rendered from the latest reading."""
    if live.board is None or live.state is None:
        return {}
    if path.startswith("/workload/"):
        namespace, _, name = path.removeprefix("/workload/").partition("/")
        found = await workload_page.explained(live.client, live.state, namespace, name)
        return {} if found is None else {"workload": workload_page.section(found,
                                                                           live.state.now)}
    return render.sections(live.board)
