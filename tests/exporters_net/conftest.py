"""Helpers for the network/GPU exporter tests: private namespaces (prefix ``isx``) cleaned up by name."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from inferslice.exporters.base import GuardedCollector

IS_ROOT = os.geteuid() == 0
HAVE_IP = shutil.which("ip") is not None and shutil.which("tc") is not None
needs_root = pytest.mark.skipif(not (IS_ROOT and HAVE_IP), reason="needs root and iproute2 to create network namespaces")


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=30)


class Namespaces:
    """Creates namespaces with a per-test unique prefix; deletes every one it made."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.made: list[str] = []

    def add(self, suffix: str) -> str:
        name = f"{self.prefix}{suffix}"
        sh("ip", "netns", "add", name)
        self.made.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")
        return name

    def cleanup(self) -> None:
        for name in reversed(self.made):
            sh("ip", "netns", "del", name, check=False)
        self.made.clear()


_counter = [0]


@pytest.fixture
def netns() -> Iterator[Namespaces]:
    _counter[0] += 1
    ns = Namespaces(f"isx{os.getpid() % 10000}t{_counter[0]}")
    try:
        yield ns
    finally:
        ns.cleanup()


def registry_with(*sources: object) -> tuple[CollectorRegistry, GuardedCollector]:
    reg = CollectorRegistry()
    guarded = GuardedCollector(list(sources))  # type: ignore[arg-type]
    reg.register(guarded)
    return reg, guarded
