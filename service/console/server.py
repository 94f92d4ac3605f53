"""``ThreadedServer``: the API under uvicorn in a thread on loopback, stoppable and restartable.

For the console's browser tests and benchmark, which need a real HTTP server in process (the
browser cannot reach an in-memory test client) and need to stop and start it again on the same
port, as an API restart looks to an open page.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from inferslice.common.ports import free_port
from inferslice.errors import SourceUnavailable


class ThreadedServer:
    def __init__(self, make_app: Callable[[], FastAPI], port: int | None = None, start_timeout_s: float = 20.0) -> None:
        self.make_app = make_app  # called at each start: a restart builds the app afresh, as a new process would
        self.port = port or free_port()
        self.start_timeout_s = start_timeout_s
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        config = uvicorn.Config(self.make_app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(target=server.run, name=f"api-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise SourceUnavailable(f"the API did not start on {self.url}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=self.start_timeout_s)
        self._server = None
        self._thread = None


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """``with serve(app) as url:`` one app on a free loopback port for the block's duration."""
    server = ThreadedServer(lambda: app)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
