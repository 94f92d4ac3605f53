"""Children of the one launcher die with their parent: ``kill -9`` of a parent (the Platform's role)
leaves no orphan. A real parent process is started, spawns a child through ``ManagedProcess``, and is
killed with SIGKILL; the child's PID must be gone (or a zombie awaiting its reaper). The control
case (``die_with_parent=False``) shows the same child survives without the request."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

PARENT = textwrap.dedent(
    """
    import sys, time
    from inferslice.common.processes import ManagedProcess
    child = ManagedProcess("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"], sys.argv[1],
                           die_with_parent=sys.argv[2] == "1")
    child.spawn()
    print(child.pid, flush=True)
    time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has exited; only its reaper's wait is missing


def _parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def _orphan_after_parent_killed(tmp_path: Path, die_with_parent: bool) -> tuple[int, bool]:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path), "1" if die_with_parent else "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10.0  # a bound on the wait, not a speed claim: the kernel signals at once
        while _alive(child) and time.monotonic() < deadline:
            if not die_with_parent and _parent_of(child) not in (parent.pid, None):
                # Reparented: the kernel has handled the parent's death, and sends the death signal
                # while it reparents; a child still running a moment later did not get one (the
                # control case used to wait out the whole 10 s bound here).
                time.sleep(0.5)
                break
            time.sleep(0.05)
        return child, _alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)


def test_child_dies_when_its_parent_is_killed_with_sigkill(tmp_path: Path) -> None:
    child, alive = _orphan_after_parent_killed(tmp_path, die_with_parent=True)
    assert not alive, f"child {child} outlived its SIGKILLed parent"


def test_without_the_request_the_child_is_orphaned(tmp_path: Path) -> None:
    child, alive = _orphan_after_parent_killed(tmp_path, die_with_parent=False)
    try:
        assert alive, "the control case should leave the child running (else the test above proves nothing)"
    finally:
        if alive:
            os.kill(child, signal.SIGKILL)
