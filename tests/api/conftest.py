from __future__ import annotations

import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from inferslice.bottleneck import HysteresisPolicy
from inferslice.service.app import create_app
from inferslice.service.store import Store
from inferslice.topology import Topology, load_topology

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's testclient warns about httpx; the client still works
    from fastapi.testclient import TestClient


# A liveness deadline, not a speed bound: the API starts in 1-2 s when idle; under make test's load
# (2 cores, 4 workers, this worker niced) one start took over 20 s in CI (2026-12-07).
READY_TIMEOUT_S = 90.0


def wait_ready(url: str, proc: subprocess.Popen[Any], log: Path | None = None, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Until ``url`` answers 200; fails at once, with the server's log, when the server exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    said = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else "(no log)"
    state = f"exited with {proc.returncode}" if proc.poll() is not None else f"not ready after {timeout_s:.0f} s"
    raise AssertionError(f"{url}: the server {state}; its log ends:\n{said}")


class FakeClock:
    """The API takes its clock as an argument; tests move time by hand."""

    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def topology() -> Topology:
    return load_topology()


AppFactory = Callable[[Path | str], tuple[TestClient, Store]]
TOKEN = "test-token"  # mutating endpoints need it; the client fixture sends it


@pytest.fixture
def make_client(topology: Topology, clock: FakeClock) -> Iterator[AppFactory]:
    stores: list[Store] = []

    def make(db: Path | str = ":memory:") -> tuple[TestClient, Store]:
        store = Store(db)
        stores.append(store)
        app = create_app(store, topology, clock=clock, hysteresis=HysteresisPolicy(open_windows=3, close_windows=2), token=TOKEN)
        return TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}), store

    yield make
    for s in stores:
        s.close()


@pytest.fixture
def client(make_client: AppFactory) -> TestClient:
    return make_client(":memory:")[0]
