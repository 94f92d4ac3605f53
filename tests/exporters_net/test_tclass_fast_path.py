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
