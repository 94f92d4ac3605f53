from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from inferslice.bottleneck import HysteresisPolicy
from inferslice.service.app import create_app
from inferslice.service.store import Store
from inferslice.topology import Topology, load_topology

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's testclient warns about httpx; the client still works
    from fastapi.testclient import TestClient


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
