"""`admitter dashboard`: the live web view, served on this machine with the caller's
kubeconfig (their RBAC applies; it writes nothing)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from admitter.controller.server import serve
from admitter.dashboard.live import LiveBoard, application
from admitter.kubectl.state import connect

DEFAULT_PORT = 8090


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "dashboard", help="serve a live, read-only web view of queues, budgets and waits")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, "
                        "~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")
    parser.add_argument("--address", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on; 0 picks a free one (default {DEFAULT_PORT})")
    parser.set_defaults(handler=run)


@contextlib.asynccontextmanager
async def dashboard(kubeconfig: str | None, address: str, port: int,
                    context: str | None = None) -> AsyncIterator[str]:
    """The dashboard served while the context is open; yields its URL."""
    client, _ = await connect(kubeconfig, context)
    live = LiveBoard(client)
    updating = asyncio.create_task(live.run())
    runner = await serve(application(live), address, port)
    try:
        host, bound = runner.addresses[0][:2]
        yield f"http://{host}:{bound}/"
    finally:
        updating.cancel()
        await runner.cleanup()
        await client.close()


async def _serve(args: argparse.Namespace, announce: Callable[[str], None]) -> None:
    async with dashboard(args.kubeconfig, args.address, args.port, args.context) as url:
        announce(url)
        await asyncio.Event().wait()


def run(args: argparse.Namespace) -> int:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args, lambda url: print(f"admitter dashboard: {url}", flush=True)))
    return 0
