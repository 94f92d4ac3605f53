"""HTB classes read by batched class GETs: every class, across several datagrams, through device churn."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from inferslice import metric_names as mn
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.network import HtbMap, HtbSource, KernelMaps
from inferslice.exporters.network import netlink as nl

from .conftest import needs_root, sh


def _devices(ns: str, peer: str, n: int, start: int = 0) -> None:
    links = "".join(f"link add vb{i} type veth peer name vp{i} netns {peer}\nlink set vb{i} up\n" for i in range(start, start + n))
    sh("ip", "-n", ns, "-batch", "-", stdin=links)
    # Each device gets a distinct ceil, so a reply matched to the wrong request would show.
    qdiscs = "".join(
        f"qdisc add dev vb{i} root handle 1: htb default 1 r2q 1000\n"
        f"class add dev vb{i} parent 1: classid 1:1 htb rate {i + 1}mbit ceil {i + 1}mbit\n"
        for i in range(start, start + n)
    )
    sh("tc", "-n", ns, "-batch", "-", stdin=qdiscs)


@needs_root
def test_batched_gets_match_every_class_and_report_missing_ones(perf_netns: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    ns, peer = perf_netns
    _devices(ns, peer, 20)
    monkeypatch.setattr(nl, "_REPLY_TRUESIZE", 1 << 30)  # batches of 8: three datagrams for 20 classes
    sock = nl.NetlinkSocket(ns)
    try:
        index = {name: idx for idx, name in sock.link_names().items()}
        wanted = [(index[f"vb{i}"], 0x10001) for i in range(20)] + [(index["vb0"], 0x10002), (999_999, 0x10001)]
        got = sock.htb_class_get(wanted)
        assert set(got) == set(wanted)
        for i in range(20):
            c = got[(index[f"vb{i}"], 0x10001)]
            assert c is not None and c.ifindex == index[f"vb{i}"] and c.ceil_bps == (i + 1) * 1e6
        assert got[(index["vb0"], 0x10002)] is None  # no such class
        assert got[(999_999, 0x10001)] is None  # no such device
        # The socket stays usable after error replies.
        assert sock.htb_class_get(wanted[:1])[wanted[0]] is not None
    finally:
        sock.close()


@needs_root
def test_htb_source_follows_a_recreated_device(perf_netns: tuple[str, str]) -> None:
    ns, peer = perf_netns
    _devices(ns, peer, 3)
    maps = KernelMaps((), tuple(HtbMap(f"vb{i}", 0x10001, "premium", "bristol", f"l{i}", "transmit", ns) for i in range(3)))
    source = HtbSource(lambda: maps)
    reg = CollectorRegistry()
    reg.register(GuardedCollector([source]))
    try:
        cap = {"slice": "premium", "pop": "bristol", "link": "l1", "direction": "transmit"}
        assert reg.get_sample_value(mn.LINK_CAP_BPS, cap) == 2e6
        sh("ip", "-n", ns, "link", "del", "vb1")
        assert reg.get_sample_value(mn.LINK_CAP_BPS, cap) is None
        assert reg.get_sample_value(mn.LINK_CAP_BPS, {**cap, "link": "l2"}) == 3e6
        sh("ip", "-n", ns, "link", "add", "vb1", "type", "veth", "peer", "name", "vq1", "netns", peer)
        sh("tc", "-n", ns, "qdisc", "add", "dev", "vb1", "root", "handle", "1:", "htb", "r2q", "1000")
        sh("tc", "-n", ns, "class", "add", "dev", "vb1", "parent", "1:", "classid", "1:1", "htb", "rate", "7mbit", "ceil", "9mbit")
        assert reg.get_sample_value(mn.LINK_CAP_BPS, cap) == 9e6  # new ifindex, found after one name refresh
        assert reg.get_sample_value(mn.SOURCE_UP, {"source": "network_htb"}) == 1.0
    finally:
        source.close()


@needs_root
def test_the_kernels_class_replies_take_the_learned_layout(perf_netns: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is used on this kernel's real replies, and gives what the full parse gives."""
    ns, peer = perf_netns
    _devices(ns, peer, 12)
    fast: list[nl.HtbClassStats] = []
    read = nl.ClassLayout.read

    def counting(self: nl.ClassLayout, payload: bytes | memoryview, start: int, end: int) -> nl.HtbClassStats | None:
        got = read(self, payload, start, end)
        if got is not None:
            assert got == nl.parse_tclass_message(payload, start, end)
            fast.append(got)
        return got

    monkeypatch.setattr(nl.ClassLayout, "read", counting)
    sock = nl.NetlinkSocket(ns)
    try:
        index = {name: idx for idx, name in sock.link_names().items()}
        wanted = [(index[f"vb{i}"], 0x10001) for i in range(12)]
        got = sock.htb_class_get(wanted)
        assert all(got[w] is not None and got[w].ceil_bps == (i + 1) * 1e6 for i, w in enumerate(wanted))  # type: ignore[union-attr]
        assert len(fast) == 11  # the first reply taught the layout
    finally:
        sock.close()
