"""Run a ``Controller`` until stopped: a step every interval, ``/metrics`` and ``/healthz`` on a port.

    loop = ControlLoop(controller, interval_s=2.0); loop.serve(host, port); loop.run_forever(stop_event)

``/metrics`` (Prometheus text): ``inferslice_control_actions_total{slice,kind,outcome}``, desired vs
applied targets per tier and kind, the forecast arrival rate (mean and upper bound) against the
measured one, at-ceiling flags, the last step's time. ``/healthz``: JSON, 200 while steps complete
within three intervals, 503 otherwise.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from inferslice.errors import InferSliceError
from inferslice.service.controller.core import Controller

log = logging.getLogger(__name__)


class ControlLoop:
    def __init__(self, controller: Controller, interval_s: float) -> None:
        self.controller = controller
        self.interval_s = interval_s
        self._server: ThreadingHTTPServer | None = None
        self.steps = 0

    def step(self) -> None:
        try:
            self.controller.tick()
            self.steps += 1
        except InferSliceError as err:  # one bad step (a backend hiccup) must not stop the loop
            self.controller.last_error = str(err)
            log.warning("control step failed: %s", err)

    def run_forever(self, stop: threading.Event) -> None:
        self.controller.drive()  # first finish what a previous run left recorded
        while not stop.is_set():
            t0 = time.monotonic()
            self.step()
            stop.wait(max(0.0, self.interval_s - (time.monotonic() - t0)))

    def healthy(self) -> tuple[bool, dict[str, Any]]:
        h = self.controller.health()
        last = self.controller.last_tick_s
        ok = last is not None and self.controller.clock() - last <= 3 * self.interval_s
        return ok, {**h, "ok": ok, "steps": self.steps}

    def serve(self, host: str, port: int) -> int:
        loop = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/metrics"):
                    body, ctype, code = generate_latest(loop.controller.metrics.registry), CONTENT_TYPE_LATEST, 200
                elif self.path.startswith("/healthz"):
                    ok, data = loop.healthy()
                    body, ctype, code = json.dumps(data).encode(), "application/json", 200 if ok else 503
                else:
                    body, ctype, code = b"not found\n", "text/plain", 404
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self._server.serve_forever, name="control-http", daemon=True).start()
        return int(self._server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
