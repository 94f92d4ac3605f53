"""The client edge as an access link (pure parts): its delay-line link, where its shapers sit, the
time-sized drop-tail buffer, and the TCP-statistics parsers used to see what TCP does there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inferslice.errors import ConfigError
from inferslice.testbed.net import htb, tcpinfo
from inferslice.testbed.net.plan import EDGE_IF, EDGE_IFB, net_plan
from inferslice.topology import load_topology, topology_from_dict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _topology(**client: Any) -> Any:
    return topology_from_dict(
        {
            "client": {"gateway": "a", **client},
            "pops": [{"name": "a"}, {"name": "b"}],
            "links": [{"a": "a", "b": "b", "rtt_ms": 5}],
            "tiers": [
                {"name": "x", "subnet": "10.201.0.0/24", "vni": 201, "gpu_quota": 0.5, "cpu_quota": 1, "replicas_max": 1,
                 "placement": ["b/gpu0"]},
            ],
        }
    )  # fmt: skip


def test_the_edge_is_a_delay_line_link_with_the_clients_rtt() -> None:
    plan = net_plan(_topology(rtt_ms=20, edge_buffer_ms=250))
    assert plan.delay_links[-1] == ("isl-a", "isl-client", EDGE_IF, pytest.approx(0.020))
    assert plan.delay_links[0] == ("isl-a", "isl-b", "isl-w0", pytest.approx(0.005))
    assert plan.edge_buffer_s == pytest.approx(0.25)


def test_both_shapers_sit_at_the_client_end_receive_on_the_ifb() -> None:
    plan = net_plan(_topology())
    assert plan.shaper("receive") == ("isl-client", EDGE_IFB)
    assert plan.shaper("transmit") == ("isl-client", EDGE_IF)
    assert plan.edge_buffer_s is None  # unset: the kernel's default leaf queue


def test_the_default_topology_edge_has_delay_and_a_bounded_buffer() -> None:
    client = load_topology(None).client
    assert client.rtt_ms >= 5 and client.edge_buffer_ms is not None


@pytest.mark.parametrize("bad", [{"edge_buffer_ms": 0}, {"edge_buffer_ms": -5}, {"rtt_ms": -1}, {"edge_buffer_ms": 20_000}])
def test_edge_settings_are_validated(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError) as err:
        _topology(**bad)
    assert err.value.field == f"client.{next(iter(bad))}"  # the message names the field


def test_leaf_buffer_is_time_at_the_rate_with_floor_and_ceiling() -> None:
    assert htb.leaf_limit_bytes(0.5e6, 1.0) == 62_500  # one second at the paper's cap
    assert htb.leaf_limit_bytes(0.5e6, 0.01) == 2 * htb.FRAME_BYTES  # never less than two full frames
    assert htb.leaf_limit_bytes(10e9, 1.0) == htb.MAX_LEAF_BYTES  # uncapped: bounded memory
    assert htb.leaf_handle(0x10011) == 0x110000


class FakeIpr:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def tc(self, command: str, kind: str = "", index: int = 0, handle: Any = 0, **kwarg: Any) -> None:
        self.calls.append((command, kind, handle, kwarg.get("parent"), kwarg.get("limit")))


def test_install_gives_each_tier_class_a_drop_tail_leaf_and_a_rate_change_resizes_it() -> None:
    ipr = FakeIpr()
    htb.install(ipr, 3, [(0x10011, 0.5e6, 0x0ACA0000, 24, 12), (0x10012, 2e6, 0x0ACB0000, 24, 12)], 0x10, 10e9, buffer_s=0.5)
    leaves = [c for c in ipr.calls if c[1] == "bfifo"]
    assert leaves == [("add", "bfifo", 0x110000, 0x10011, 31_250), ("add", "bfifo", 0x120000, 0x10012, 125_000)]
    ipr.calls.clear()
    htb.change_rate(ipr, 3, 0x10011, 1e6, buffer_s=0.5)
    assert ("change", "bfifo", 0x110000, 0x10011, 62_500) in ipr.calls


def test_without_a_buffer_setting_no_leaf_is_installed() -> None:
    ipr = FakeIpr()
    htb.install(ipr, 3, [(0x10011, 0.5e6, 0x0ACA0000, 24, 12)], 0x10, 10e9)
    htb.change_rate(ipr, 3, 0x10011, 1e6)
    assert not [c for c in ipr.calls if c[1] == "bfifo"]


SNMP = """Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs
Tcp: 1 200 120000 -1 10 12 0 0 3 500 900 25
Udp: InDatagrams NoPorts
Udp: 4 0
TcpExt: SyncookiesSent TCPTimeouts TCPLossProbes
TcpExt: 0 7 3
"""


def test_parse_snmp_pairs_headers_with_values() -> None:
    c = tcpinfo.parse_snmp(SNMP)
    assert c["Tcp:RetransSegs"] == 25 and c["Tcp:OutSegs"] == 900 and c["TcpExt:TCPTimeouts"] == 7
    assert c["Tcp:MaxConn"] == -1 and c["Udp:NoPorts"] == 0


# A line of `ss -tinOH state established` (no State column) from a flow in RTO backoff.
BACKED_OFF = (
    "0      2896   10.202.0.1:8000 10.253.0.2:51234 cubic wscale:7,7 rto:1632 backoff:2 rtt:406.2/10.5 ato:40 mss:1448 pmtu:1500 "
    "rcvmss:536 advmss:1448 cwnd:1 ssthresh:2 bytes_sent:90211 bytes_retrans:4344 bytes_acked:83000 segs_out:310 segs_in:160 "
    "data_segs_out:300 send 28.5Kbps lastsnd:120 lastrcv:5000 lastack:300 pacing_rate 57.0Kbps unacked:2 retrans:1/9 lost:1"
)


def test_parse_ss_reads_rto_backoff_and_retransmissions() -> None:
    (flow,) = tcpinfo.parse_ss(BACKED_OFF + "\n\n")
    assert (flow.local, flow.peer) == ("10.202.0.1:8000", "10.253.0.2:51234")
    assert flow.rto_ms == 1632 and flow.backoff == 2 and flow.rtt_ms == pytest.approx(406.2)
    assert (flow.retrans_total, flow.lost, flow.unacked, flow.cwnd, flow.send_q_bytes) == (9, 1, 2, 1, 2896)


def test_parse_ss_accepts_the_state_column_and_a_captured_edge_sample() -> None:
    (flow,) = tcpinfo.parse_ss("ESTAB " + BACKED_OFF)
    assert flow.backoff == 2
    captured = tcpinfo.parse_ss((FIXTURES / "ss-tinOH-edge-0.5mbit.txt").read_text())
    assert captured and all(f.local.endswith(":8000") and f.rto_ms is not None and f.rto_ms >= 200 for f in captured)


def test_summarise_counts_deltas_and_flows_that_retransmitted() -> None:
    calm = tcpinfo.parse_ss(BACKED_OFF.replace("backoff:2 ", "").replace("retrans:1/9", "retrans:0/0"))
    hit = tcpinfo.parse_ss(BACKED_OFF)
    before = {"Tcp:OutSegs": 100, "Tcp:RetransSegs": 1, "TcpExt:TCPTimeouts": 0}
    after = {"Tcp:OutSegs": 300, "Tcp:RetransSegs": 11, "TcpExt:TCPTimeouts": 2}
    s = tcpinfo.summarise(before, after, [calm, hit], 2.0)
    assert s["counters"]["Tcp:RetransSegs"] == 10 and s["counters"]["TcpExt:TCPTimeouts"] == 2
    assert s["retrans_per_100_segs"] == 5.0
    assert (s["flows"], s["flows_that_retransmitted"], s["samples_in_rto_backoff"]) == (1, 1, 1)
    assert s["rto_ms"]["max"] == 1632


class BurstIpr:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any, Any, Any]] = []

    def tc(self, command: str, kind: str = "", index: int = 0, handle: Any = 0, **kwarg: Any) -> None:
        self.calls.append((command, kind, handle, kwarg.get("burst"), kwarg.get("limit")))


def test_a_policer_edge_is_a_token_bucket_of_kube_ovns_size_with_no_queue() -> None:
    top = _topology(rtt_ms=20)
    plan = net_plan(top.model_copy(update={"client": top.client.model_copy(update={"edge_mode": "policer"})}))
    # Kube-OVN's egress_rate: ingress_policing_burst = 80 % of the rate (kbit over kbit/s): 0.8 s
    assert plan.edge_shape(0.5e6) == (0.8, 0.0)
    assert plan.edge_shape(10e9)[0] is None  # uncapped binds nothing: the default burst, a deep leaf
    ipr = BurstIpr()
    htb.install(ipr, 3, [(0x10011, 0.5e6, 0x0ACA0000, 24, 12), (0x10012, 10e9, 0x0ACB0000, 24, 12)], 0x10, 10e9, shape=plan.edge_shape)
    capped = [c for c in ipr.calls if c[2] == 0x10011 and c[1] == "htb"]
    assert capped[0][3] == 50_000  # 0.8 s at 0.5 Mbit/s: 400 kbit, Kube-OVN's burst for a 500 kbps policer
    leaves = {c[2]: c[4] for c in ipr.calls if c[1] == "bfifo"}
    assert leaves[0x110000] == 2 * htb.FRAME_BYTES  # nothing waits beyond the frame in service and one more
    assert leaves[0x120000] == htb.MAX_LEAF_BYTES
    ipr.calls.clear()
    burst_s, buffer_s = plan.edge_shape(2e6)
    htb.change_rate(ipr, 3, 0x10011, 2e6, buffer_s, burst_s)
    assert ("change-class", "htb", 0x10011, 200_000, None) in ipr.calls  # the bucket follows the new rate


def test_a_shaper_edge_keeps_its_small_burst_and_configured_queue() -> None:
    plan = net_plan(_topology(rtt_ms=20, edge_buffer_ms=250))
    assert plan.edge_mode == "shaper" and plan.edge_shape(0.5e6) == (None, 0.25)
    assert htb.burst_bytes(0.5e6, None) == htb.MIN_BURST_BYTES
