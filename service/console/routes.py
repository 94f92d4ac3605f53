"""Mount the console on the API: ``GET /console`` (the page), its static files, ``GET /v1/console/state``.

Everything the page needs arrives in one read-only document per poll; mutations (approve, reject)
go to the controller's own authenticated endpoints, with the token the operator typed in.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request, Response
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from inferslice.service.console.feed import ConsoleFeed, ConsoleStore
from inferslice.service.console.links import LinkTelemetry
from inferslice.topology import Topology

GZIP_LEVEL = 5  # a live update's ~50 kB of JSON (10 tiers) shrinks ~8x for well under a millisecond
STATIC_DIR = Path(str(resources.files("inferslice.service.console").joinpath("static")))


def index_html() -> str:
    return (STATIC_DIR / "index.html").read_text(encoding="utf-8")


class _AppSources:
    """The API's own diagnosis loop as a console source, read at each poll (it is attached after mounting)."""

    def __init__(self, app: FastAPI, clock: Callable[[], float]) -> None:
        self.app = app
        self.clock = clock

    def __call__(self) -> Sequence[Mapping[str, Any]]:
        loop = getattr(self.app.state, "loop", None)
        if loop is None:
            return []
        stats, interval = loop.stats, loop.settings.interval_s
        age = None if stats.last_run_s is None else max(0.0, self.clock() - stats.last_run_s)
        ok = age is not None and age <= 5 * interval  # the loop's last good read is recent: one failed poll is not an outage
        detail = f"last good read {age:.0f} s ago" if age is not None else "no good read yet"
        if stats.failures:
            detail += f"; {stats.failures} failed, last: {stats.last_error}"
        return [{"name": "metric source", "ok": ok, "detail": detail, "age_s": age}]


AUDIT_SCAN = 10_000  # the audit log lists oldest first: read this many and show the newest


class _AppActions:
    """The controller's audit log when the app serves it (``app.state.control_audit``), else the store's actions."""

    def __init__(self, app: FastAPI, store: Any) -> None:
        self.app = app
        self.store = store

    def __call__(self, n: int) -> Sequence[Mapping[str, Any]]:
        audit = getattr(self.app.state, "control_audit", None)
        if audit is not None:
            return list(reversed(audit.actions(limit=AUDIT_SCAN)))[:n]
        return list(self.store.actions(limit=n))


def console_feed(
    app: FastAPI, store: Any, topology: Topology, clock: Callable[[], float], links: LinkTelemetry | None = None
) -> ConsoleFeed:
    """The feed the API mounts: the store's history, the controller's actions, the app's loop as a source."""
    history: ConsoleStore = store
    return ConsoleFeed(history, topology, clock, actions=_AppActions(app, store), links=links, sources=_AppSources(app, clock))


def mount_console(app: FastAPI, feed: ConsoleFeed) -> None:
    app.mount("/console/static", StaticFiles(directory=STATIC_DIR), name="console-static")
    page = index_html()

    @app.get("/console", include_in_schema=False)
    def console_page() -> HTMLResponse:
        # no-cache: a new release's page must not pair with a cached old module
        return HTMLResponse(page, headers={"Cache-Control": "no-cache"})

    @app.get(
        "/v1/console/state",
        tags=["console"],
        responses={
            200: {"description": "topology, tiers, controller and sources in one document", "content": {"application/json": {}}},
            422: {"description": "`since` is not a finite number"},
        },
    )
    def console_state(
        request: Request,
        since: Annotated[
            float | None, Query(allow_inf_nan=False, description="unix seconds: send only windows newer than this (the page's newest)")
        ] = None,
    ) -> Response:
        """Everything the console shows, with the windows after ``since``; read-only and cheap to poll."""
        body = json.dumps(feed.state(since), separators=(",", ":"), allow_nan=False).encode()
        headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", ""):
            body = gzip.compress(body, GZIP_LEVEL)
            headers["Content-Encoding"] = "gzip"
        return Response(body, media_type="application/json", headers=headers)
