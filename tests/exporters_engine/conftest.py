"""Stand-in replicas for the engine exporter: a tiny threaded http.server on 127.0.0.1 serving the
captured vLLM 0.32.0 expositions (or a fault: 500, garbage, a slow answer). No emulator import."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
IDLE = (FIXTURES / "vllm-0.32.0-cpu-metrics-idle.txt").read_text()
AFTER = (FIXTURES / "vllm-0.32.0-cpu-metrics-after-bench.txt").read_text()


def set_sample(text: str, sample: str, value: float) -> str:
    """Replace the value of the sample line that starts with ``sample`` (name{labels})."""
    pattern = re.compile("^" + re.escape(sample) + r" .*$", re.M)
    new, n = pattern.subn(f"{sample} {value!r}", text)
    assert n == 1, sample
    return new


def ttft_bucket(le: str) -> str:
    return f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{le}",model_name="tiny"}}'


def slow_variant() -> str:
    """AFTER with 11 of its 41 requests above the 0.5 s SLO (TTFT in (0.5, 0.75])."""
    text = AFTER
    for le in ("0.04", "0.06", "0.08", "0.1", "0.25", "0.5"):
        text = set_sample(text, ttft_bucket(le), 30.0)
    return text


@dataclass
class Behaviour:
    body: str = AFTER
    status: int = 200
    delay_s: float = 0.0
    gate: threading.Event | None = None  # when set, each answer waits for the test to open it
    hits: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class StandIn:
    """One replica (or router) on 127.0.0.1:<ephemeral>; change ``behaviour`` between scrapes."""

    def __init__(self, body: str = AFTER) -> None:
        self.behaviour = Behaviour(body=body)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                b = outer.behaviour
                with b.lock:
                    b.hits += 1
                if b.gate is not None:
                    b.gate.wait(10.0)
                if b.delay_s:
                    time.sleep(b.delay_s)
                data = b.body.encode()
                try:
                    self.send_response(b.status)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def refused_url() -> str:
    """A 127.0.0.1 port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def kit() -> Iterator[SimpleNamespace]:
    """Helpers for the tests (importlib import mode: tests cannot import conftest directly)."""
    made: list[StandIn] = []

    def standin(body: str = AFTER) -> StandIn:
        s = StandIn(body)
        made.append(s)
        return s

    yield SimpleNamespace(
        IDLE=IDLE, AFTER=AFTER, FIXTURES=FIXTURES, set_sample=set_sample, ttft_bucket=ttft_bucket,
        slow_variant=slow_variant, refused_url=refused_url, standin=standin,
    )
    for s in made:
        s.close()
