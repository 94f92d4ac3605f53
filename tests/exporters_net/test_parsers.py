"""Pure parsers on captured-style inputs, and fuzzing: they return or raise ParseError, never crash."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferslice.errors import ParseError
from inferslice.exporters.gpu.pods import allocations_from_pods, parse_cgroup
from inferslice.exporters.network import netlink as nl
from inferslice.exporters.network.ovs import parse_response, parse_transact_result


def attr(atype: int, value: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(value), atype) + value
    return raw + b"\0" * ((4 - len(raw) % 4) % 4)


def message(mtype: int, seq: int, payload: bytes) -> bytes:
    return struct.pack("=IHHII", 16 + len(payload), mtype, 2, seq, 0) + payload


def stats_payload(ifindex: int, counters: list[int]) -> bytes:
    stats64 = struct.pack("=24Q", *(counters + [0] * (24 - len(counters))))
    return struct.pack("=BBHII", 0, 0, 0, ifindex, 1) + attr(nl.IFLA_STATS_LINK_64, stats64)


def htb_payload(ifindex: int, handle: int, rate_Bps: int, ceil_Bps: int, nbytes: int, pkts: int,
                drops: int, over: int, backlog: int, qlen: int, rate64: int | None = None) -> bytes:
    spec = struct.Struct("=BBHhHI")
    parms = spec.pack(0, 1, 0, -1, 0, rate_Bps) + spec.pack(0, 1, 0, -1, 0, ceil_Bps) + struct.pack("=5I", 1600, 1600, 1500, 0, 0)
    options = attr(nl.TCA_HTB_PARMS, parms)
    if rate64 is not None:
        options += attr(nl.TCA_HTB_RATE64, struct.pack("=Q", rate64))
    stats2 = attr(nl.TCA_STATS_BASIC, struct.pack("=QI4x", nbytes, pkts))
    stats2 += attr(nl.TCA_STATS_QUEUE, struct.pack("=5I", qlen, backlog, drops, 0, over))
    return (struct.pack("=BBHiIII", 0, 0, 0, ifindex, handle, 0xFFFFFFFF, 0) + attr(nl.TCA_KIND, b"htb\0")
            + attr(nl.TCA_OPTIONS | 0x8000, options) + attr(nl.TCA_STATS2 | 0x8000, stats2))


def test_stats_dump_parses_counters_in_kernel_order() -> None:
    data = message(nl.RTM_NEWSTATS, 7, stats_payload(3, [10, 20, 1000, 2000, 1, 2, 3, 4])) + message(nl.NLMSG_DONE, 7, b"\0" * 4)
    msgs = list(nl.iter_messages(data))
    assert [m[0] for m in msgs] == [nl.RTM_NEWSTATS, nl.NLMSG_DONE]
    s = nl.parse_stats_message(msgs[0][2])
    assert s == nl.LinkStats(3, rx_packets=10, tx_packets=20, rx_bytes=1000, tx_bytes=2000,
                             rx_errors=1, tx_errors=2, rx_dropped=3, tx_dropped=4)


def test_htb_class_rate_ceil_in_bits_and_64bit_rates() -> None:
    c = nl.parse_tclass_message(htb_payload(5, 0x10011, 1_250_000, 2_500_000, 999, 9, 2, 5, 3000, 2))
    assert c is not None
    assert (c.rate_bps, c.ceil_bps) == (10e6, 20e6)
    assert (c.bytes, c.packets, c.drops, c.overlimits, c.backlog_bytes, c.backlog_packets) == (999, 9, 2, 5, 3000, 2)
    assert nl.format_classid(c.handle) == "1:11"
    big = nl.parse_tclass_message(htb_payload(5, 0x10011, 0xFFFFFFFF, 1, 0, 0, 0, 0, 0, 0, rate64=10**10))
    assert big is not None and big.rate_bps == 8e10


def test_non_htb_class_is_skipped() -> None:
    payload = struct.pack("=BBHiIII", 0, 0, 0, 1, 0x10001, 0, 0) + attr(nl.TCA_KIND, b"tbf\0")
    assert nl.parse_tclass_message(payload) is None


def test_classid_notation_is_hex() -> None:
    assert nl.parse_classid("1:11") == 0x10011
    assert nl.parse_classid("ffff:0") == 0xFFFF0000
    with pytest.raises(ValueError):
        nl.parse_classid("111")


def test_truncated_netlink_raises_parse_error() -> None:
    data = message(nl.RTM_NEWSTATS, 1, stats_payload(1, [1] * 8))
    with pytest.raises(ParseError):
        list(nl.iter_messages(data[:-8] + struct.pack("=I", 9999)))
    with pytest.raises(ParseError):
        nl.parse_stats_message(struct.pack("=BBHII", 0, 0, 0, 1, 1) + attr(nl.IFLA_STATS_LINK_64, b"\0" * 16))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_netlink_parsers_never_crash(data: bytes) -> None:
    for fn in (nl.parse_stats_message, nl.parse_tclass_message, nl.parse_link_name, lambda d: list(nl.iter_messages(d))):
        try:
            fn(data)
        except ParseError:
            pass


# -- OVSDB ---------------------------------------------------------------------------------------

OVS_RESULT: list[Any] = [
    {"rows": [
        {"_uuid": ["uuid", "i-tun"], "name": "ovn-4a1b2c-0", "type": "geneve", "statistics": ["map", [["rx_bytes", 10], ["tx_bytes", 20]]],
         "ingress_policing_rate": 0, "external_ids": ["map", []], "options": ["map", [["remote_ip", "10.252.0.2"]]]},
        {"_uuid": ["uuid", "i-pod"], "name": "0123456789ab_h", "type": "",
         "statistics": ["map", [["rx_bytes", 500], ["tx_bytes", 7000], ["rx_packets", 5], ["tx_packets", 9], ["rx_dropped", 1]]],
         "ingress_policing_rate": 2000, "external_ids": ["map", [["iface-id", "vllm-0.premium"]]], "options": ["map", []]},
    ]},
    {"rows": [
        {"_uuid": ["uuid", "p-pod"], "name": "0123456789ab_h", "interfaces": ["uuid", "i-pod"], "qos": ["uuid", "q1"]},
        {"_uuid": ["uuid", "p-tun"], "name": "ovn-4a1b2c-0", "interfaces": ["set", [["uuid", "i-tun"]]], "qos": ["set", []]},
    ]},
    {"rows": [{"_uuid": ["uuid", "q1"], "type": "linux-htb", "other_config": ["map", [["max-rate", "10000000"]]],
               "queues": ["map", [[0, ["uuid", "qu0"]]]]}]},
    {"rows": [{"_uuid": ["uuid", "qu0"], "other_config": ["map", [["max-rate", "8000000"]]]}]},
]


def test_ovsdb_transact_result_parses_ports_qos_and_tunnels() -> None:
    snap = parse_response({"id": 4, "result": OVS_RESULT, "error": None}, 4)
    tun, pod = snap.interfaces
    assert tun.is_tunnel and tun.remote_ip == "10.252.0.2" and tun.statistics["tx_bytes"] == 20
    assert pod.iface_id == "vllm-0.premium" and pod.port == "0123456789ab_h"
    assert pod.qos_type == "linux-htb" and pod.qos_max_rate_bps == 8e6  # the queue binds below the QoS max-rate
    assert pod.ingress_policing_kbps == 2000


def test_ovsdb_errors_raise_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_response({"id": 1, "result": None, "error": "unknown database"}, 1)
    with pytest.raises(ParseError):
        parse_transact_result([{"error": "constraint violation", "details": "x"}])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_ovsdb_parser_never_crashes(value: Any) -> None:
    try:
        parse_transact_result(value)
    except ParseError:
        pass
    mutated = json.loads(json.dumps(OVS_RESULT))
    mutated[0]["rows"][1]["statistics"] = value
    try:
        parse_transact_result(mutated)
    except ParseError:
        pass


# -- cgroups and pods ------------------------------------------------------------------------------

SYSTEMD_CGROUP = (
    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1f2e3d4c_5b6a_7980_a1b2_c3d4e5f60718.slice/"
    "cri-containerd-4f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0.scope\n"
)
CGROUPFS_CGROUP = (
    "12:memory:/kubepods/besteffort/pod1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718/4f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0\n"
)


def test_cgroup_paths_of_both_kubelet_drivers() -> None:
    for text in (SYSTEMD_CGROUP, CGROUPFS_CGROUP):
        ref = parse_cgroup(text)
        assert ref is not None
        assert ref.pod_uid == "1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718"
        assert ref.container_id == "4f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0"
    assert parse_cgroup("0::/user.slice/user-0.slice/session-1.scope\n") is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_cgroup_parser_never_crashes(text: str) -> None:
    parse_cgroup(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values, max_size=4))
def test_pod_allocation_parser_never_crashes(pods: list[Any]) -> None:
    try:
        allocations_from_pods([p for p in pods if isinstance(p, dict)], {}, {}, ["premium"])
    except ParseError:
        pass


def test_pod_with_odd_shapes_does_not_crash() -> None:
    odd = [{"metadata": {"name": "a"}, "spec": {"containers": [{"resources": []}, "x", {"resources": {"limits": 3}}]}}]
    assert allocations_from_pods(odd) == []
