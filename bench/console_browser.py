"""The console's page load and live-update render time in headless chromium (``bench.cdp``)."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable
from typing import Any

from .cdp import Browser

# Resolves once every tier card has both charts drawn: the page is usable, not just loaded.
_RENDERED = (
    "window.inferslice && window.inferslice.last !== null && "
    "document.querySelectorAll('article.tier .uplot').length === 2 * window.inferslice.last.tiers.length"
)


async def _measure(url: str, add_windows: Callable[[], None], updates: int) -> dict[str, Any]:
    async with Browser(1440, 1000) as b:
        await b.goto("about:blank")
        await b.eval("performance.clearResourceTimings()")
        await b.send("Page.navigate", url=url + "/console")
        await b.wait_for("document.readyState === 'complete'", timeout_s=60)
        await b.wait_for(_RENDERED, timeout_s=60)
        timing = await b.eval(
            "(() => { const n = performance.getEntriesByType('navigation')[0]; "
            "return { load: n.loadEventEnd, rendered: window.inferslice.firstRenderMs }; })()"
        )
        live = []
        for _ in range(updates):
            add_windows()
            ms = await b.eval(
                "(async () => { const t0 = performance.now(); const before = window.inferslice.lastOk; "
                "await window.inferslice.pollNow(); return window.inferslice.lastOk !== before ? performance.now() - t0 : null; })()"
            )
            if ms is not None:
                live.append(float(ms))
        errors = [m for m in b.console if m.startswith("EXCEPTION")]
    return {
        "load_event_ms": float(timing["load"]),
        "first_render_ms": float(timing["rendered"]),
        "live_update_ms": statistics.median(live) if live else None,
        "updates": len(live),
        "page_errors": errors,
    }


def measure_page(url: str, add_windows: Callable[[], None], updates: int = 10) -> dict[str, Any]:
    return asyncio.run(_measure(url, add_windows, updates))
