"""Fixtures for the engine emulator and serving front tests (all on 127.0.0.1, loopback plan)."""

from __future__ import annotations

import random
import socket
from typing import Any

import pytest

from inferslice.topology import Topology, load_topology, topology_from_dict


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture
def base_port() -> int:
    """A loopback base port whose plan ports (fronts, replicas, host admins) are all free."""
    rng = random.Random()
    for _ in range(50):
        base = rng.randrange(20000, 60000, 10)
        ports = [base + i for i in range(3)] + [base + 100 + i for i in range(60)] + [base + 200 + i for i in range(3)]
        if all(_free(p) for p in ports):
            return base
    raise RuntimeError("no free port range")


def fast_topology(**tier_overrides: Any) -> Topology:
    """The default topology with compressed timing (and optional per-tier overrides)."""
    data = load_topology().model_dump(mode="json")
    data["timing"] = {
        "cold_start_s": 0.3,
        "upscale_delay_s": 0.4,
        "downscale_delay_s": 0.8,
        "look_back_period_s": 0.4,
        "scrape_interval_s": 1.0,
    }
    for tier in data["tiers"]:
        tier.update(tier_overrides.get(tier["name"], {}))
    return topology_from_dict(data)
