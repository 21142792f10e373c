"""A TCP relay in front of the API server whose path can be cut and healed: a network
partition between one controller replica and the control plane, for fault-injection tests.

TLS passes through untouched (the API server's certificate names 127.0.0.1, where the relay
listens too). Cutting stops moving bytes in both directions without closing anything, as a
partition does: requests hang rather than fail, which is the harder case (only timeouts end
them). Healing moves the bytes held meanwhile, as TCP does once packets flow again.

The relay runs its own event loop in a thread, so tests may block (restart a component)
without stalling it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import Future
from pathlib import Path

import yaml

from admitter.api import yaml_text

CHUNK = 65536


class PartitionableRelay:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._open = asyncio.Event()
        self._ready: Future[int] = Future()
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="relay", daemon=True)

    def start(self) -> PartitionableRelay:
        self._thread.start()
        self.port = self._ready.result(timeout=10)
        return self

    def cut(self) -> None:
        self._loop.call_soon_threadsafe(self._open.clear)

    def heal(self) -> None:
        self._loop.call_soon_threadsafe(self._open.set)

    def close(self) -> None:
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(timeout=10)

    def kubeconfig(self, original: Path, path: Path) -> Path:
        """A copy of `original` whose server is this relay."""
        config = yaml.safe_load(original.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        path.write_text(yaml_text.dump(config))
        path.chmod(0o600)
        return path

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        self._open.set()
        connections: set[asyncio.Task[None]] = set()

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.ensure_future(self._relay(reader, writer))
            connections.add(task)
            task.add_done_callback(connections.discard)

        server = await asyncio.start_server(accepted, "127.0.0.1", 0)
        self._ready.set_result(server.sockets[0].getsockname()[1])
        async with server:
            await self._stopping.wait()
        for task in list(connections):
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                "127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(self._pump(reader, upstream_writer),
                                 self._pump(upstream_reader, writer))
        finally:
            for end in (writer, upstream_writer):
                end.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while True:
                await self._open.wait()
                data = await reader.read(CHUNK)
                if not data:
                    break
                await self._open.wait()
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()
