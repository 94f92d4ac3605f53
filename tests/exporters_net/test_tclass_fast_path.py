"""The class-reply fast path: the flat compat ``tc_stats`` is read when present (the kernel writes it beside
TCA_STATS2 with the same counters), offsets into a reused receive buffer parse like a fresh payload."""

from __future__ import annotations

import struct

from inferslice.exporters.network import netlink as nl

from .test_parsers import attr, htb_payload


def test_flat_tc_stats_gives_the_same_counters_as_the_nested_ones() -> None:
    nested = htb_payload(5, 0x10011, 1_250_000, 2_500_000, 999, 9, 2, 5, 3000, 2)
    flat = attr(nl.TCA_STATS, struct.pack("=QIIIIIII4x", 999, 9, 2, 5, 0, 0, 2, 3000))
    a = nl.parse_tclass_message(nested)
    b = nl.parse_tclass_message(nested + flat)
    assert a is not None and a == b


def test_a_payload_inside_a_larger_buffer_parses_by_offsets() -> None:
    payload = htb_payload(7, 0x10001, 125_000, 250_000, 10, 1, 0, 0, 0, 0)
    buf = memoryview(b"\xff" * 12 + payload + b"\xee" * 20)
    c = nl.parse_tclass_message(buf, 12, 12 + len(payload))
    assert c == nl.parse_tclass_message(payload)
    assert c is not None and (c.ifindex, c.ceil_bps) == (7, 2e6)


def _flat(nbytes: int, pkts: int, drops: int, over: int, qlen: int, backlog: int) -> bytes:
    return attr(nl.TCA_STATS, struct.pack("=QIIIIIII4x", nbytes, pkts, drops, over, 0, 0, qlen, backlog))


def test_a_learned_layout_reads_another_reply_like_the_full_parse() -> None:
    first = htb_payload(5, 0x10011, 1_250_000, 2_500_000, 999, 9, 2, 5, 3000, 2) + _flat(999, 9, 2, 5, 2, 3000)
    layout = nl.ClassLayout.learn(first, 0, len(first))
    assert layout is not None
    other = htb_payload(8, 0x10012, 125_000, 375_000, 10**12, 77, 3, 4, 1500, 1) + _flat(10**12, 77, 3, 4, 1, 1500)
    fast = layout.read(other, 0, len(other))
    assert fast is not None and fast == nl.parse_tclass_message(other)
    assert (fast.ifindex, fast.ceil_bps, fast.bytes, fast.backlog_bytes, fast.backlog_packets) == (8, 3e6, 10**12, 1500, 1)
    buf = memoryview(b"\xff" * 8 + other)
    assert layout.read(buf, 8, 8 + len(other)) == fast


def test_a_reply_of_another_shape_is_refused_by_the_layout() -> None:
    first = htb_payload(5, 0x10011, 1, 2, 3, 4, 5, 6, 7, 8) + _flat(3, 4, 5, 6, 8, 7)
    layout = nl.ClassLayout.learn(first, 0, len(first))
    assert layout is not None
    # 64-bit rate attribute: longer, and a different walk.
    wide = htb_payload(5, 0x10011, 0xFFFFFFFF, 2, 3, 4, 5, 6, 7, 8, rate64=10**10) + _flat(3, 4, 5, 6, 8, 7)
    assert layout.read(wide, 0, len(wide)) is None
    # Same length, another kind: refused by the kind check, and the full parse says it is no HTB class.
    tbf = first.replace(b"htb\0", b"tbf\0")
    assert layout.read(tbf, 0, len(tbf)) is None and nl.parse_tclass_message(tbf) is None
    # Same length, attributes swapped in type: refused by the header check.
    swapped = bytearray(first)
    struct.pack_into("=H", swapped, 20 + 2, nl.TCA_STATS2)  # the kind attribute's type
    assert layout.read(bytes(swapped), 0, len(swapped)) is None


def test_no_layout_is_learned_without_flat_stats_or_from_a_non_htb_class() -> None:
    nested_only = htb_payload(5, 0x10011, 1, 2, 3, 4, 5, 6, 7, 8)
    assert nl.ClassLayout.learn(nested_only, 0, len(nested_only)) is None
    tbf = struct.pack("=BBHiIII", 0, 0, 0, 1, 0x10001, 0, 0) + attr(nl.TCA_KIND, b"tbf\0") + _flat(1, 1, 0, 0, 0, 0)
    assert nl.ClassLayout.learn(tbf, 0, len(tbf)) is None
