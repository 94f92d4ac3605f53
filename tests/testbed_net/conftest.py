from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# One testbed at a time per machine: its addresses and root-namespace routes are fixed. The same
# lock as `flock /tmp/inferslice-testbed.lock ...` and the integration tests' session fixture.
TESTBED_LOCK = Path("/tmp/inferslice-testbed.lock")


@contextlib.contextmanager
def testbed_lock() -> Iterator[None]:
    with TESTBED_LOCK.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

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
