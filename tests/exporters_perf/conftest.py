"""Namespaces for the fast-path tests: prefix ``isb``, deleted by name after each test."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

IS_ROOT = os.geteuid() == 0
HAVE_IP = shutil.which("ip") is not None and shutil.which("tc") is not None
needs_root = pytest.mark.skipif(not (IS_ROOT and HAVE_IP), reason="needs root and iproute2 to create network namespaces")


def sh(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, input=stdin, capture_output=True, text=True, timeout=60)


_counter = [0]


@pytest.fixture
def perf_netns() -> Iterator[tuple[str, str]]:
    """A namespace and a peer namespace for veth ends."""
    _counter[0] += 1
    base = f"isb{os.getpid() % 10000}q{_counter[0]}"
    made: list[str] = []
    try:
        for name in (base + "n", base + "p"):
            sh("ip", "netns", "add", name)
            made.append(name)
        yield base + "n", base + "p"
    finally:
        for name in reversed(made):
            sh("ip", "netns", "del", name, check=False)
