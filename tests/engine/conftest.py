"""Fixtures for the engine emulator and serving front tests (all on 127.0.0.1, loopback plan)."""

from __future__ import annotations

from typing import Any

import pytest

from inferslice.common.ports import free_base_port
from inferslice.topology import Topology, load_topology, topology_from_dict


@pytest.fixture
def base_port() -> int:
    """A loopback base port whose plan ports (fronts, replicas, host admins) are all free."""
    return free_base_port([*range(3), *range(100, 160), *range(200, 203)])


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
