from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferslice.testbed.lock import testbed_lock

# Unique per test run and short: the root-namespace interface <prefix>mgmt must fit in 15 characters.
PREFIX = f"isl-t{os.getpid() % 10000:04d}-"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces, TUN devices and qdiscs")


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "state"
    with testbed_lock():
        yield d
        if os.geteuid() == 0:
            from inferslice.testbed.net import down

            down(d, prefix=PREFIX)  # even when the test failed halfway
