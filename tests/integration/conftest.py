"""A session-scoped testbed for integration tests: brought up once, torn down at the end.

Only one testbed can run on a machine (its addresses are fixed), so the fixture holds an exclusive
``flock`` on ``/tmp/inferslice-testbed.lock`` for the whole session: the same lock that
``flock /tmp/inferslice-testbed.lock <command>`` takes, so concurrent pytest runs and manual
testbed commands serialize instead of colliding. State lives in ``/run/inferslice-test``, apart
from a developer's ``/run/inferslice``.

Use: ``def test_x(testbed: Testbed) -> None`` (``testbed.registry``, ``testbed.state_dir``,
``testbed.topology``, ``testbed.client_netns``, ``testbed.log_tails()``); ``platform`` adds the
monitoring stack of ``platform_stack.py`` around it for one test.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from inferslice.registry import Registry
from inferslice.topology import Topology, load_topology

if TYPE_CHECKING:
    from .platform_stack import Platform

TESTBED_LOCK = Path("/tmp/inferslice-testbed.lock")
STATE_DIR = Path("/run/inferslice-test")
ROOT_REASON = "needs root: the testbed builds network namespaces, TUN devices and qdiscs"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason=ROOT_REASON)
needs_monitoring = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("prometheus-alertmanager") is None,
    reason="needs the Debian prometheus and prometheus-alertmanager binaries",
)


@dataclass(frozen=True)
class Testbed:
    __test__ = False  # a fixture value, not a test class

    registry: Registry
    state_dir: Path

    @cached_property
    def topology(self) -> Topology:
        return load_topology(self.registry.topology_path)

    @property
    def client_netns(self) -> str:
        """The namespace load generators run in (their traffic crosses the tiers' client-edge caps)."""
        for link in self.registry.links:
            if link.kind == "access" and link.direction == "transmit":
                return link.netns
        raise AssertionError("the registry names no client edge")

    def log_tails(self, n: int = 800) -> str:
        """The testbed's process logs (engine hosts, fronts, delay line), for failure messages."""
        from inferslice.testbed.net import procs

        parts = []
        for pf in procs.read_pidfiles(self.state_dir):
            try:
                text = procs.log_path(self.state_dir, pf.name).read_text(errors="replace")[-n:]
            except OSError:
                text = "<no log>"
            parts.append(f"--- {pf.name} (pid {pf.pid}):\n{text}")
        return "\n".join(parts)


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])  # field 4; the command name may hold spaces


def lock_held_by_ancestor(path: Path = TESTBED_LOCK) -> bool:
    """Whether an ancestor of this process holds the flock (``flock LOCK pytest ...``): taking it
    again on a new descriptor would wait for ourselves forever."""
    try:
        inode = path.stat().st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return False
    holders = set()
    for line in lines:
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE <pid> <maj:min:inode> 0 EOF"; waiters carry a "->" after the index
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(inode):
            holders.add(int(parts[4]))
    pid = os.getppid()
    while pid > 1:
        if pid in holders:
            return True
        pid = _parent(pid)
    return False


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    if os.geteuid() != 0:
        pytest.skip(ROOT_REASON)
    from inferslice.testbed.net import lifecycle

    with TESTBED_LOCK.open("a") as lock:
        if not lock_held_by_ancestor():
            fcntl.flock(lock, fcntl.LOCK_EX)  # waits for whoever holds the testbed now
        try:
            registry = lifecycle.up(None, STATE_DIR, services=True)
            try:
                yield Testbed(registry, STATE_DIR)
            finally:
                lifecycle.down(STATE_DIR)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)  # a no-op where an ancestor holds it


@pytest.fixture
def platform(testbed: Testbed, tmp_path: Path) -> Iterator[Platform]:
    """Exporter, Prometheus (+ rules), Alertmanager and the API around the session's testbed, for one test."""
    from .platform_stack import Platform

    work = tmp_path / "platform"
    work.mkdir(parents=True, exist_ok=True)
    plat = Platform(testbed.registry, testbed.topology, testbed.state_dir, work)
    try:
        plat.start()
        yield plat
    finally:
        plat.stop()
