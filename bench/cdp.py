"""A minimal Chrome DevTools Protocol driver: headless Debian ``chromium``, one page, over a websocket.

No browser download, no Node: the browser is the distribution's, the websocket client is aiohttp's
(already a dependency). Enough for the console tests: navigate, evaluate JavaScript, wait for a
condition, type and click via the DOM, capture a screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--hide-scrollbars",
)


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    pass


class Browser:
    """``async with Browser(width, height) as b: await b.goto(url)``; the process is ended by PID."""

    def __init__(self, width: int = 1440, height: int = 1000) -> None:
        self.width, self.height = width, height
        # chromium's helper processes may still flush the profile as the main one exits
        self._profile = tempfile.TemporaryDirectory(prefix="inferslice-chromium-", ignore_cleanup_errors=True)
        self._proc: subprocess.Popen[bytes] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._id = 0
        self.console: list[str] = []  # console messages and uncaught exceptions of the page
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Browser:
        exe = chromium_path()
        if exe is None:
            raise BrowserError("chromium not installed")
        profile = Path(self._profile.name)
        self._proc = subprocess.Popen(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={self.width},{self.height}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: the renderers and helpers end with it
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise BrowserError("chromium did not open its DevTools port")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as r:
            targets = await r.json()
        page = next(t for t in targets if t["type"] == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=64 * 1024 * 1024)
        self._reader = asyncio.create_task(self._read())
        await self.send("Page.enable")
        await self.send("Runtime.enable")
        await self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height, deviceScaleFactor=1, mobile=False)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)  # the group we started: helpers left behind
        self._profile.cleanup()

    async def _read(self) -> None:
        assert self._ws is not None
        async for msg in self._ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            elif data.get("method") == "Runtime.consoleAPICalled":
                args = data["params"].get("args", [])
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))
            elif data.get("method") == "Runtime.exceptionThrown":
                details = data["params"]["exceptionDetails"]
                self.console.append("EXCEPTION " + str(details.get("exception", {}).get("description", details.get("text"))))

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        assert self._ws is not None
        self._id += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._id] = fut
        await self._ws.send_str(json.dumps({"id": self._id, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, timeout=30)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    async def goto(self, url: str) -> float:
        """Navigate and wait for the load event; returns seconds until it fired."""
        start = time.perf_counter()
        await self.send("Page.navigate", url=url)
        await self.wait_for("document.readyState === 'complete'")
        return time.perf_counter() - start

    async def eval(self, expression: str) -> Any:
        reply = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression[:80]}: {reply['exceptionDetails'].get('exception', {}).get('description')}")
        return reply["result"].get("value")

    async def wait_for(self, expression: str, timeout_s: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                value = await self.eval(expression)
            except BrowserError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression!r}; page console: {self.console[-5:]}")
            await asyncio.sleep(0.1)

    async def screenshot(self, path: Path) -> Path:
        height = await self.eval("Math.ceil(document.documentElement.scrollHeight)")
        reply = await self.send(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": self.width, "height": max(self.height, int(height or 0)), "scale": 1},
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(reply["data"]))
        return path

    async def press_tab(self, times: int = 1) -> None:
        for _ in range(times):
            await self.send("Input.dispatchKeyEvent", type="keyDown", key="Tab", code="Tab", windowsVirtualKeyCode=9)
            await self.send("Input.dispatchKeyEvent", type="keyUp", key="Tab", code="Tab", windowsVirtualKeyCode=9)
