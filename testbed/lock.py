"""One testbed per machine: its addresses and root-namespace routes are fixed.

Whoever builds a testbed for a while (tests, benchmarks, ``flock /tmp/inferslice-testbed.lock ...``)
holds an exclusive ``flock`` on one file. A process whose ancestor already holds it (``flock LOCK
pytest ...``) must not take it again on a new descriptor: it would wait for itself forever.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

TESTBED_LOCK = Path("/tmp/inferslice-testbed.lock")


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])  # field 4; the command name may hold spaces


def lock_held_by_ancestor(path: Path = TESTBED_LOCK) -> bool:
    """Whether an ancestor of this process holds the flock on ``path``."""
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


@contextlib.contextmanager
def testbed_lock(path: Path = TESTBED_LOCK) -> Iterator[None]:
    """Hold the machine's testbed lock (a no-op where an ancestor holds it already)."""
    with path.open("a") as fh:
        if not lock_held_by_ancestor(path):
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
