"""The WAN link emulator's rate and buffer, its control socket, link naming and routing (no root needed)."""

from __future__ import annotations

import select
import threading
from pathlib import Path

import pytest

from inferslice.cli.testbed_wan import parse_rtt
from inferslice.common.registry import LinkEntry
from inferslice.errors import InputError
from inferslice.exporters.network.mapping import maps_from_links
from inferslice.testbed.net import delayline, net_plan
from inferslice.testbed.net.delayline import Control, Direction, format_link, parse_link
from inferslice.topology import load_topology, topology_from_dict


def test_a_rated_direction_serialises_and_drops_tail() -> None:
    # 1 Mbit/s, 10 ms buffer = 1250 B (raised to the two-packet floor, 3000 B), 5 ms one way
    d = Direction(0, 1, 0.005, "w", rate_bps=1e6, buffer_s=0.010)
    assert d.buffer_bytes() == 3000
    first = d.admit(0.0, 1000)  # 8 ms on the wire, then 5 ms of delay
    second = d.admit(0.0, 1000)  # waits for the first
    third = d.admit(0.0, 1000)  # 3000 B waiting: still fits
    fourth = d.admit(0.0, 1000)  # would make 4000 B: dropped
    assert first == pytest.approx(0.013) and second == pytest.approx(0.021) and third == pytest.approx(0.029)
    assert fourth is None and d.dropped_full == 1
    assert d.backlog_bytes(0.012) == pytest.approx(1500)  # 12 of the 24 ms of serialisation done
    later = d.admit(0.1, 500)  # the wire is free again: only its own 4 ms
    assert later == pytest.approx(0.109)


def test_an_unrated_direction_only_delays_and_never_reorders() -> None:
    d = Direction(0, 1, 0.010, "w")
    assert d.admit(0.0, 1500) == pytest.approx(0.010)
    d.delay_s = 0.001  # a delay cut: the next packet may not overtake the one in flight
    assert d.admit(0.002, 100) == pytest.approx(0.010)
    assert d.admit(0.020, 100) == pytest.approx(0.021)
    assert d.buffer_bytes() == float("inf")


def test_link_arguments_round_trip() -> None:
    spec = parse_link(format_link("isl-a", "isl-b", "isl-w0", 0.009, 27.9e6, 0.05))
    got = (spec.ns_a, spec.ns_b, spec.ifname, spec.rtt_s, spec.rate_bps, spec.buffer_s)
    assert got == ("isl-a", "isl-b", "isl-w0", 0.009, 27.9e6, 0.05)
    assert parse_link(format_link("isl-a", "isl-c", "isl-edge", 0.02)).rate_bps is None
    assert parse_link("isl-a,isl-b,isl-w0,0.009").rate_bps is None  # the old four-field form still reads


def test_control_socket_changes_delay_and_rate_of_one_link(tmp_path: Path) -> None:
    dirs = [Direction(0, 1, 0.0045, "isl-w0"), Direction(1, 0, 0.0045, "isl-w0"), Direction(2, 3, 0.006, "isl-w1")]
    ctl = Control(str(tmp_path / "dl.sock"), dirs, compensation_s=0.0)
    ctl.rtts = {"isl-w0": 0.009, "isl-w1": 0.012}
    try:
        def serve() -> None:  # as run() does: wait until a client connects, then answer it
            if select.select([ctl.fileno()], [], [], 5.0)[0]:
                ctl.serve_one()

        served = threading.Thread(target=serve)
        assert ctl.answer({"op": "set_rtt", "ifname": "isl-w0", "rtt_s": 0.03})["ok"]
        assert [d.delay_s for d in dirs] == [0.015, 0.015, 0.006]
        assert ctl.answer({"op": "set_rate", "ifname": "isl-w1", "rate_bps": 5e6})["ok"]
        assert [d.rate_bps for d in dirs] == [None, None, 5e6]
        assert ctl.answer({"op": "set_rate", "ifname": "isl-w1", "rate_bps": None})["ok"] and dirs[2].rate_bps is None
        assert not ctl.answer({"op": "set_rtt", "ifname": "isl-w9", "rtt_s": 0.01})["ok"]
        assert "rtt_s must be" in str(ctl.answer({"op": "set_rtt", "ifname": "isl-w0", "rtt_s": -1})["error"])
        assert not ctl.answer({"op": "set_rate", "ifname": "isl-w0", "rate_bps": 0})["ok"]
        assert not ctl.answer({"op": "reboot"})["ok"]
        # over the socket, as the testbed's CLI talks to it
        served.start()
        reply = delayline.request(ctl.path, {"op": "status"})
        served.join(timeout=5)
    finally:
        ctl.close()
    links = reply["links"]
    assert isinstance(links, dict) and links["isl-w0"]["rtt_s"] == 0.03 and len(links["isl-w0"]["directions"]) == 2


def test_wan_links_by_either_name_and_their_rate() -> None:
    plan = net_plan(load_topology(None))
    w = plan.wan_link("london-bristol")
    assert w is plan.wan_link("wan-bristol-london") and (w.a, w.b) == ("bristol", "london")
    assert w.end("london")[0] == plan.netns("london") and w.other("london") == "bristol"
    assert w.rate_bps == pytest.approx(27.9e6) and w.buffer_s == pytest.approx(0.05)
    with pytest.raises(KeyError, match="no WAN link"):
        plan.wan_link("bristol-paris")


def test_route_follows_the_lowest_rtt() -> None:
    top = topology_from_dict({
        "client": {"gateway": "a"},
        "pops": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
        "links": [{"a": "a", "b": "b", "rtt_ms": 2}, {"a": "b", "b": "c", "rtt_ms": 3}, {"a": "a", "b": "c", "rtt_ms": 20}],
        "tiers": [{"name": "t", "subnet": "10.9.0.0/24", "vni": 9, "gpu_quota": 0.5, "cpu_quota": 1, "replicas_max": 1,
                   "placement": ["c/gpu0"]}],
    })  # fmt: skip
    assert top.route("c", "a") == ["c", "b", "a"]  # 5 ms via b beats the direct 20 ms
    assert top.route("a", "a") == ["a"]
    assert net_plan(top).routes["c"][0].dev == net_plan(top).wan_link("b-c").ifname


def test_rtt_arguments() -> None:
    assert parse_rtt("30ms") == pytest.approx(0.03)
    assert parse_rtt("30") == pytest.approx(0.03)
    assert parse_rtt("0.05s") == pytest.approx(0.05)
    assert parse_rtt("none") is None
    with pytest.raises(InputError, match="RTT"):
        parse_rtt("fast")


def test_the_exporter_maps_a_declared_capacity() -> None:
    links = [LinkEntry("wan-a-b", "wan", "isl-a", "isl-w0", "a", peer_pop="b", rtt_s=0.01, capacity_bps=1e7),
             LinkEntry("overlay-t-a", "overlay", "isl-a", "vx9", "a", tier="t")]  # fmt: skip
    maps = maps_from_links(links)
    assert [m.capacity_bps for m in maps.interfaces] == [1e7, None]
