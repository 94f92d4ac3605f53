"""The testbed's per-PoP path reading for the controller (bench/control_testbed_wan.py): pure parts."""

from __future__ import annotations

import pytest

from inferslice.bench.control_testbed_wan import link_name, measured_rtts, path_excess_s
from inferslice.topology import load_topology

TOP = load_topology()  # gateway bristol; bristol-london 9 ms, bristol-dublin 18 ms, london-dublin 12 ms


def test_each_pops_route_to_the_gateway_is_judged_by_its_slowest_hop() -> None:
    result = [
        {"metric": {"pop": "london", "peer_pop": "bristol"}, "value": [0, "0.459"]},  # +0.45 s delay step
        {"metric": {"pop": "bristol", "peer_pop": "london"}, "value": [0, "0.458"]},
        {"metric": {"pop": "dublin", "peer_pop": "bristol"}, "value": [0, "0.019"]},  # within 1 ms of its 18
        {"metric": {"pop": "dublin", "peer_pop": "london"}, "value": [0, "NaN"]},  # no answered probe: ignored
    ]
    rtts = measured_rtts(result)
    assert ("dublin", "london") not in rtts
    got = path_excess_s(TOP, rtts)
    assert got["bristol"] == 0.0
    assert got["london"] == pytest.approx(0.459 - 0.009)
    assert got["dublin"] == pytest.approx(0.001)  # dublin routes straight to bristol (18 ms beats 12 + 9)


def test_unmeasured_paths_read_as_configured_and_link_names_are_the_testbeds() -> None:
    assert path_excess_s(TOP, {}) == {"bristol": 0.0, "london": 0.0, "dublin": 0.0}
    assert link_name("bristol|london") == "wan-bristol-london"
