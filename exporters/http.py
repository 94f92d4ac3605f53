"""The exporters' HTTP endpoint: /metrics through the fast text writer, and /healthz."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client.registry import Collector

from .text import CONTENT_TYPE, render_registry


def metrics_handler(registry: Collector) -> type[BaseHTTPRequestHandler]:
    """A request handler class serving ``registry`` (anything with ``collect()``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
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
