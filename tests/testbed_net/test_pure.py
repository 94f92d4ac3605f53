"""Pure parts: rate parsing, HTB stats parsing, the network plan, the CLI wiring."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from inferslice.cli import testbed as cmd
from inferslice.errors import ConfigError, InputError, NotPrivilegedError
from inferslice.testbed.net import htb, lifecycle, parse_htb_class, parse_rate
from inferslice.testbed.net.plan import IFNAMSIZ_MAX, net_plan
from inferslice.topology import load_topology, topology_from_dict


@pytest.mark.parametrize(
    ("text", "bps"),
    [("500k", 5e5), ("0.5M", 5e5), ("2Mbit", 2e6), ("1000000", 1e6), ("10gbit", 1e10), ("300kbit", 3e5)],
)
def test_parse_rate(text: str, bps: float) -> None:
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["none", "None", "off"])
def test_parse_rate_none(text: str) -> None:
    assert parse_rate(text) is None


@pytest.mark.parametrize("text", ["fast", "2 Mbyte", "-1M", "0"])
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(InputError):
        parse_rate(text)


def test_parse_htb_class_from_dict_form() -> None:
    msg = {
        "handle": 0x10011,
        "attrs": [
            ("TCA_KIND", "htb"),
            ("TCA_OPTIONS", {"attrs": [("TCA_HTB_PARMS", {"rate": 62500, "ceil": 62500})]}),
            (
                "TCA_STATS2",
                {
                    "attrs": [
                        ("TCA_STATS_BASIC", {"bytes": 1234, "packets": 5}),
                        ("TCA_STATS_QUEUE", {"qlen": 2, "backlog": 3028, "drops": 1, "overlimits": 7}),
                    ]
                },
            ),
        ],
    }
    st = parse_htb_class(msg)
    assert st == htb.HtbClassStats("1:11", 1234, 5, 1, 7, 3028, 2, 500_000.0, 500_000.0)


def test_parse_htb_class_ignores_other_kinds() -> None:
    assert parse_htb_class({"handle": 1, "attrs": [("TCA_KIND", "pfifo")]}) is None


def test_burst_is_small_at_low_rates_and_covers_timer_at_high() -> None:
    assert htb.burst_bytes(0.3e6) == htb.MIN_BURST_BYTES
    assert htb.burst_bytes(100e6) >= 100e6 / 8 * 0.001


def test_plan_names_fit_ifnamsiz_and_classids_are_hex() -> None:
    plan = net_plan(load_topology(None), "isl-t9999-")
    names = [plan.mgmt_host_if] + [w.ifname for w in plan.wan] + [t.bridge for t in plan.tiers] + [t.vxlan for t in plan.tiers]
    assert all(len(n) <= IFNAMSIZ_MAX for n in names)
    assert [t.classid for t in plan.tiers] == ["1:11", "1:12", "1:13"]
    # every placement slot gets its replica address on the bridge of its PoP
    assert ("t-premium", "10.203.0.14/24") in plan.bridge_addrs["dublin"]
    assert ("t-premium", "10.203.0.1/24") in plan.bridge_addrs["bristol"]
    # ... and an address at every other PoP, where a move starts its successor: premium has 6 slots,
    # so slot 0 at dublin (the third PoP) is .(10 + 6*3 + 0), slot 4 at bristol .(10 + 6*1 + 4)
    assert ("t-premium", "10.203.0.28/24") in plan.bridge_addrs["dublin"]
    assert ("t-premium", "10.203.0.20/24") in plan.bridge_addrs["bristol"]
    premium = [a for pop in plan.pops for br, a in plan.bridge_addrs[pop] if br == "t-premium"]
    assert len(premium) == len(set(premium)) == 1 + 6 * 3


def test_plan_routes_non_mesh_through_gateway() -> None:
    top = topology_from_dict(
        {
            "client": {"gateway": "a"},
            "pops": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
            "links": [{"a": "a", "b": "b", "rtt_ms": 5}, {"a": "a", "b": "c", "rtt_ms": 7}],
            "tiers": [
                {
                    "name": "x",
                    "subnet": "10.201.0.0/24",
                    "vni": 201,
                    "gpu_quota": 0.5,
                    "cpu_quota": 1,
                    "replicas_max": 1,
                    "placement": ["c/gpu0"],
                }
            ],
        }
    )
    plan = net_plan(top)
    b_to_c = [r for r in plan.routes["b"] if r.dst == f"{plan.node_ips['c']}/32"]
    assert b_to_c and b_to_c[0].via == plan.wan[0].ip_a  # via a, the only neighbour of b


def test_invalid_topology_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = (Path(__file__).parents[2] / "testbed" / "topology.yaml").read_text()
    bad.write_text(text.replace("replicas_max: 3", "replicas_max: 0"))
    with pytest.raises(ConfigError) as err:
        load_topology(bad)
    assert err.value.field == "tiers[1].replicas_max"


def test_not_root_raises_before_creating_anything(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(lifecycle.os, "geteuid", lambda: 1000)
    with pytest.raises(NotPrivilegedError, match="root"):
        lifecycle.up(None, tmp_path / "s", services=False, prefix="isl-tnope-")
    assert not (tmp_path / "s").exists()


def test_cli_table_and_parsing() -> None:
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    args = parser.parse_args(["cap", "free", "0.5M", "--direction", "transmit", "--state-dir", "/tmp/x"])
    assert (args.testbed_command, args.tier, args.rate, args.direction) == ("cap", "free", "0.5M", "transmit")
    args = parser.parse_args(["up", "--no-services"])
    assert args.no_services and args.topology is None
    assert {"up", "down", "status", "cap"} <= set(cmd.HANDLERS)


def test_a_transfers_peak_rate_is_its_best_window_and_a_stall_cannot_raise_it() -> None:
    from inferslice.testbed.net.probe import Transfer

    # 1 Mbit/s (125,000 bytes a second, sampled every 0.25 s) with a 1 s stall from 1.0 to 2.0 s:
    # the mean over 0-4 s is 0.75 Mbit/s, every 1 s window clear of the stall reads 1 Mbit/s.
    samples, total = [(0.0, 0)], 0
    for k in range(1, 17):
        t = k * 0.25
        total += 0 if 1.0 < t <= 2.0 else 31_250
        samples.append((t, total))
    tr = Transfer(samples)
    assert tr.rate_bps(0.0, 4.0) == pytest.approx(0.75e6)
    assert tr.peak_rate_bps(1.0) == pytest.approx(1e6)
    assert tr.peak_rate_bps(1.0, start_s=1.0) == pytest.approx(1e6)  # 2.0-3.0 and 3.0-4.0
    assert tr.peak_rate_bps(1.0, start_s=1.5) == pytest.approx(1e6)  # 2.0-3.0
    assert tr.peak_rate_bps(2.5, start_s=1.0) == pytest.approx(0.8e6)  # 1.5-4.0: 2 s of data in 2.5 s
    assert tr.peak_rate_bps(5.0) == 0.0  # no window that long
