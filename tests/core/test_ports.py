"""Port blocks for test plans (common/ports.py): free now, and out of the kernel's ephemeral range."""

from __future__ import annotations

import random
import socket

import pytest

from inferslice.common.ports import ephemeral_range, free_base_port


def test_a_base_port_block_is_free_and_below_the_ephemeral_range() -> None:
    low, high = ephemeral_range()
    assert 1024 <= low <= high <= 65535
    offsets = [0, 1, 2, 100, 159, 200]
    base = free_base_port(offsets, rng=random.Random(7))
    assert base + max(offsets) < low
    for o in offsets:  # every port of the block binds now
        with socket.socket() as s:
            s.bind(("127.0.0.1", base + o))
    with socket.socket() as held:  # a taken port in the block moves the pick elsewhere
        held.bind(("127.0.0.1", base + 100))
        assert free_base_port(offsets, rng=random.Random(7)) != base
    with pytest.raises(RuntimeError, match="no room"):
        free_base_port([0, 70000])
