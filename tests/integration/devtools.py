"""Headless Chromium (Debian's `chromium` package) driven over the DevTools protocol with
aiohttp's websocket client: load a page, read it with JavaScript, take screenshots."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

BROWSERS = ("chromium", "chromium-browser")
START_TIMEOUT = 30.0


def browser_binary() -> str:
    """The installed Chromium; `make setup` installs Debian's package where it can."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("no chromium on PATH: `apt-get install chromium` (see README, "
                       "`make browser`)")


class Page:
    """One tab: commands are sent with ids and their answers awaited; events are ignored."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket = socket
        self._ids = itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        await self.socket.send_str(json.dumps({"id": number, "method": method,
                                               "params": params}))
        while True:
            message = json.loads((await self.socket.receive()).data)
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able)."""
        found = await self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                                awaitPromise=True)
        if "exceptionDetails" in found:
            raise RuntimeError(f"{expression}: {found['exceptionDetails']}")
        return found["result"].get("value")

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)
        deadline = time.monotonic() + START_TIMEOUT
        while await self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load")
            await asyncio.sleep(0.1)

    async def screenshot(self, path: Path) -> Path:
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


@contextlib.asynccontextmanager
async def browser_page(width: int = 1280, height: int = 1000) -> AsyncIterator[Page]:
    """A fresh headless Chromium with one page, closed afterwards."""
    with tempfile.TemporaryDirectory(prefix="admitter-chromium-") as profile:
        process = subprocess.Popen(
            [browser_binary(), "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--remote-debugging-port=0", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            port = await _devtools_port(Path(profile) / "DevToolsActivePort", process)
            async with aiohttp.ClientSession() as session:
                async with session.put(f"http://127.0.0.1:{port}/json/new?about:blank") as new:
                    target = await new.json()
                async with session.ws_connect(target["webSocketDebuggerUrl"],
                                              max_msg_size=0) as socket:
                    page = Page(socket)
                    await page.send("Page.enable")
                    yield page
        finally:  # the browser and the helpers it started, by its process group's id
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


async def _devtools_port(active: Path, process: subprocess.Popen[bytes]) -> int:
    """Chromium writes the port it chose into the profile once it listens."""
    deadline = time.monotonic() + START_TIMEOUT
    while not active.exists() or not active.read_text().strip():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("chromium did not start its DevTools endpoint")
        await asyncio.sleep(0.1)
    return int(active.read_text().split()[0])
