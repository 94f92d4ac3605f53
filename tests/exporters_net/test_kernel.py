"""Kernel link and HTB sources against real veth pairs and HTB classes in namespaces we create."""

from __future__ import annotations

import socket
import time

from prometheus_client import CollectorRegistry

from inferslice import metric_names as mn
from inferslice.common.netns import in_netns
from inferslice.exporters.network import HtbMap, HtbSource, InterfaceMap, KernelLinkSource, KernelMaps
from inferslice.exporters.network.netlink import parse_classid

from .conftest import Namespaces, needs_root, registry_with, sh

PAYLOAD = 1000
L2_OVERHEAD = 14 + 20 + 8  # Ethernet + IPv4 + UDP headers as counted on a veth


def veth_pair(netns: Namespaces) -> tuple[str, str]:
    """ns a (10.77.0.1, dev va) <-> ns b (10.77.0.2, dev vb), no IPv6 and static ARP: no background traffic."""
    a, b = netns.add("a"), netns.add("b")
    for ns in (a, b):
        sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
    sh("ip", "-n", a, "link", "add", "va", "address", "02:00:00:00:00:0a", "type", "veth",
       "peer", "name", "vb", "address", "02:00:00:00:00:0b", "netns", b)
    sh("ip", "-n", a, "addr", "add", "10.77.0.1/24", "dev", "va")
    sh("ip", "-n", b, "addr", "add", "10.77.0.2/24", "dev", "vb")
    sh("ip", "-n", a, "neigh", "add", "10.77.0.2", "lladdr", "02:00:00:00:00:0b", "dev", "va", "nud", "permanent")
    sh("ip", "-n", b, "neigh", "add", "10.77.0.1", "lladdr", "02:00:00:00:00:0a", "dev", "vb", "nud", "permanent")
    sh("ip", "-n", a, "link", "set", "va", "up")
    sh("ip", "-n", b, "link", "set", "vb", "up")
    return a, b


def send_udp(ns: str, count: int, dst: str = "10.77.0.2") -> None:
    sock = in_netns(ns, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    try:
        for _ in range(count):
            sock.sendto(b"x" * PAYLOAD, (dst, 9))
    finally:
        sock.close()


def wait_drained(reg: CollectorRegistry, cap: dict[str, str], timeout_s: float = 2.0) -> None:
    deadline = time.monotonic() + timeout_s
    while reg.get_sample_value(mn.HTB_BACKLOG_PACKETS, cap) and time.monotonic() < deadline:
        time.sleep(0.01)


def labels(link: str, slice_: str = "premium") -> dict[str, str]:
    return {"slice": slice_, "pop": "bristol", "link": link}


@needs_root
def test_counts_bytes_sent_across_a_veth_exactly(netns: Namespaces) -> None:
    a, b = veth_pair(netns)
    maps = KernelMaps((InterfaceMap("va", "premium", "bristol", "edge-a", a),
                       InterfaceMap("vb", "premium", "bristol", "edge-b", b, invert=True)))
    reg, _ = registry_with(KernelLinkSource(lambda: maps))
    before = {k: reg.get_sample_value(k, labels("edge-a")) for k in (mn.LINK_TRANSMIT_BYTES, mn.LINK_TRANSMIT_PACKETS)}
    before_b = reg.get_sample_value(mn.LINK_TRANSMIT_BYTES, labels("edge-b"))
    send_udp(a, 50)
    assert reg.get_sample_value(mn.LINK_TRANSMIT_BYTES, labels("edge-a")) - before[mn.LINK_TRANSMIT_BYTES] == 50 * (PAYLOAD + L2_OVERHEAD)
    assert reg.get_sample_value(mn.LINK_TRANSMIT_PACKETS, labels("edge-a")) - before[mn.LINK_TRANSMIT_PACKETS] == 50
    # The far end, inverted, reads the same wire in the same direction.
    assert reg.get_sample_value(mn.LINK_TRANSMIT_BYTES, labels("edge-b")) - before_b == 50 * (PAYLOAD + L2_OVERHEAD)
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "network_kernel"}) == 1.0


@needs_root
def test_vanished_interface_drops_series_and_vanished_namespace_reports_down(netns: Namespaces) -> None:
    a, _b = veth_pair(netns)
    c = netns.add("c")
    sh("ip", "-n", c, "link", "add", "vc", "type", "veth", "peer", "name", "vc2")  # no dummy driver in this kernel
    maps_ab = KernelMaps((InterfaceMap("va", "premium", "bristol", "edge-a", a), InterfaceMap("vc", "free", "bristol", "edge-c", c)))
    reg, _guarded = registry_with(KernelLinkSource(lambda: maps_ab))
    assert reg.get_sample_value(mn.LINK_RECEIVE_BYTES, labels("edge-a")) is not None
    sh("ip", "-n", a, "link", "del", "va")  # takes vb with it
    assert reg.get_sample_value(mn.LINK_RECEIVE_BYTES, labels("edge-a")) is None
    assert reg.get_sample_value(mn.LINK_RECEIVE_BYTES, labels("edge-c", "free")) is not None
    # A whole namespace gone: its series go, the other namespace keeps serving.
    sh("ip", "netns", "del", a)
    netns.made.remove(a)
    assert reg.get_sample_value(mn.LINK_RECEIVE_BYTES, labels("edge-c", "free")) is not None
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "network_kernel"}) == 1.0
    # Only a vanished namespace left: the source is down, the exporter still answers.
    only_gone = KernelMaps((InterfaceMap("va", "premium", "bristol", "edge-a", a),))
    reg2, guarded2 = registry_with(KernelLinkSource(lambda: only_gone), KernelLinkSource(lambda: maps_ab, name="other"))
    assert reg2.get_sample_value(mn.SOURCE_UP, {"source": "network_kernel"}) == 0.0
    assert reg2.get_sample_value(mn.SOURCE_UP, {"source": "other"}) == 1.0
    assert "does not exist" in guarded2.last_errors["network_kernel"]


@needs_root
def test_recreated_interface_is_found_under_its_new_index(netns: Namespaces) -> None:
    a = netns.add("a")
    sh("ip", "-n", a, "link", "add", "d0", "type", "veth", "peer", "name", "d1")
    maps = KernelMaps((InterfaceMap("d0", "free", "bristol", "d", a),))
    reg, _ = registry_with(KernelLinkSource(lambda: maps))
    assert reg.get_sample_value(mn.LINK_RECEIVE_BYTES, labels("d", "free")) == 0
    sh("ip", "-n", a, "link", "del", "d0")
    sh("ip", "-n", a, "link", "add", "d0", "type", "veth", "peer", "name", "d1")
    assert reg.get_sample_value(mn.LINK_RECEIVE_BYTES, labels("d", "free")) == 0


@needs_root
def test_htb_reports_rate_ceil_exactly_and_after_a_live_change(netns: Namespaces) -> None:
    a, _b = veth_pair(netns)
    sh("tc", "-n", a, "qdisc", "add", "dev", "va", "root", "handle", "1:", "htb", "default", "11")
    sh("tc", "-n", a, "class", "add", "dev", "va", "parent", "1:", "classid", "1:11", "htb", "rate", "10mbit", "ceil", "20mbit")
    sh("tc", "-n", a, "class", "add", "dev", "va", "parent", "1:", "classid", "1:12", "htb", "rate", "5mbit", "ceil", "5mbit")
    maps = KernelMaps(htb=(
        HtbMap("va", parse_classid("1:11"), "premium", "bristol", "client-edge", "receive", a),
        HtbMap("va", parse_classid("1:12"), "free", "bristol", "client-edge", "receive", a),
    ))
    reg, _ = registry_with(HtbSource(lambda: maps))
    cap = {"slice": "premium", "pop": "bristol", "link": "client-edge", "direction": "receive"}
    assert reg.get_sample_value(mn.LINK_CAP_BPS, cap) == 20e6  # the ceil binds, not the rate
    assert reg.get_sample_value(mn.LINK_CAP_BPS, {**cap, "slice": "free"}) == 5e6
    before = reg.get_sample_value(mn.LINK_RECEIVE_BYTES, labels("client-edge"))
    send_udp(a, 20)
    wait_drained(reg, cap)  # HTB counts bytes when it dequeues them: ~8 ms at 20 Mbit/s
    assert reg.get_sample_value(mn.LINK_RECEIVE_BYTES, labels("client-edge")) - before == 20 * (PAYLOAD + L2_OVERHEAD)
    assert reg.get_sample_value(mn.LINK_RECEIVE_PACKETS, labels("client-edge", "free")) == 0
    sh("tc", "-n", a, "class", "change", "dev", "va", "parent", "1:", "classid", "1:11", "htb", "rate", "10mbit", "ceil", "30mbit")
    assert reg.get_sample_value(mn.LINK_CAP_BPS, cap) == 30e6
    assert reg.get_sample_value(mn.HTB_BACKLOG_BYTES, cap) == 0
    assert reg.get_sample_value(mn.HTB_OVERLIMITS, cap) is not None


@needs_root
def test_htb_overlimits_and_drops_under_a_tight_cap(netns: Namespaces) -> None:
    a, _b = veth_pair(netns)
    sh("tc", "-n", a, "qdisc", "add", "dev", "va", "root", "handle", "1:", "htb", "default", "11")
    sh("tc", "-n", a, "class", "add", "dev", "va", "parent", "1:", "classid", "1:11", "htb", "rate", "100kbit", "ceil", "100kbit")
    sh("tc", "-n", a, "qdisc", "add", "dev", "va", "parent", "1:11", "handle", "11:", "pfifo", "limit", "5")
    maps = KernelMaps(htb=(HtbMap("va", parse_classid("1:11"), "free", "bristol", "edge", "transmit", a),))
    reg, _ = registry_with(HtbSource(lambda: maps))
    send_udp(a, 200)
    cap = {"slice": "free", "pop": "bristol", "link": "edge", "direction": "transmit"}
    assert reg.get_sample_value(mn.HTB_OVERLIMITS, cap) > 0
    assert reg.get_sample_value(mn.LINK_TRANSMIT_DROPS, labels("edge", "free")) > 0
    assert reg.get_sample_value(mn.HTB_BACKLOG_PACKETS, cap) > 0  # 100 kbit/s drains 5 packets in ~0.4 s
