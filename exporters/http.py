"""The exporters' HTTP endpoint: /metrics through the fast text writer, and /healthz."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client.registry import Collector

from .text import CONTENT_TYPE, render_registry

_PAUSES = [0, 0]  # [scrapes in progress, 1 if the collector was on when the first of them began]
_PAUSES_LOCK = threading.Lock()


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a scrape runs; reference counting still frees everything.

    A 1,000-interface scrape allocates ~30,000 short-lived tuples and strings, all alive until the
    body is written: the collector's generation-0 passes walked them again every 700 allocations,
    promoted them and set off full collections over the label caches (measured here: median 19.6 ms
    either way, 90th percentile 32 ms with the collector, 21.5 ms without). The scrape makes no
    reference cycles, so nothing is left for the collector once it is back on."""
    with _PAUSES_LOCK:
        if _PAUSES[0] == 0:
            _PAUSES[1] = int(gc.isenabled())
            gc.disable()
        _PAUSES[0] += 1
    try:
        yield
    finally:
        with _PAUSES_LOCK:
            _PAUSES[0] -= 1
            if _PAUSES[0] == 0 and _PAUSES[1]:
                gc.enable()


def metrics_handler(registry: Collector) -> type[BaseHTTPRequestHandler]:
    """A request handler class serving ``registry`` (anything with ``collect()``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                with cyclic_gc_paused():
                    body, ctype = render_registry(registry), CONTENT_TYPE
            elif path == "/healthz":
                body, ctype = b"ok\n", "text/plain; charset=utf-8"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # scrapes every 2 s would flood stderr
            pass

    return Handler
