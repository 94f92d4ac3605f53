"""Processes of the testbed: spawned inside a namespace, logged to a file, tracked by PID file.

A PID file holds ``PID STARTTIME`` (the kernel's start time in clock ticks, /proc/PID/stat field
22) so that a crash cleanup never kills an unrelated process that reused the PID. Each process
leads its own session, so stopping it signals its whole process group (children included).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from inferslice.common.processes import Arg, absolute, resolve_argv

NETNS_DIR = Path("/run/netns")
STOP_GRACE_S = 3.0  # TERM, then KILL: long enough for an HTTP server to close its sockets


@dataclass(frozen=True)
class PidFile:
    name: str
    pid: int
    starttime: int | None


def logs_dir(state_dir: Path) -> Path:
    return state_dir / "logs"


def pids_dir(state_dir: Path) -> Path:
    return state_dir / "pids"


def log_path(state_dir: Path, name: str) -> Path:
    return logs_dir(state_dir) / f"{name}.log"


def parse_starttime(stat_text: str) -> int:
    """Field 22 of /proc/PID/stat; the command name (field 2) may contain spaces and parentheses."""
    rest = stat_text[stat_text.rindex(")") + 2 :].split()
    return int(rest[19])


def _proc_starttime(pid: int) -> int | None:
    try:
        return parse_starttime(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """True unless gone or a zombie (reaping it if it is our child)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def spawn(
    name: str,
    argv: Sequence[Arg],
    state_dir: Path,
    netns: str | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Start ``argv`` (inside ``netns`` if given) in its own session; return its PID.

    Path arguments are made absolute first (``common.processes.resolve_argv``), like every child's.
    """
    state_dir = absolute(state_dir)
    logs_dir(state_dir).mkdir(parents=True, exist_ok=True)
    pids_dir(state_dir).mkdir(parents=True, exist_ok=True)
    # `ip netns exec` execs the command after setns, so the PID we get is the service's own.
    full = ["ip", "netns", "exec", netns, *resolve_argv(argv)] if netns else resolve_argv(argv)
    with open(log_path(state_dir, name), "ab") as log:
        proc = subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env) if env is not None else None,
            close_fds=True,
        )
    start = _proc_starttime(proc.pid)
    (pids_dir(state_dir) / f"{name}.pid").write_text(f"{proc.pid} {start if start is not None else ''}\n")
    return proc.pid


def read_pidfiles(state_dir: Path) -> list[PidFile]:
    out: list[PidFile] = []
    d = pids_dir(state_dir)
    if not d.is_dir():
        return out
    for f in sorted(d.glob("*.pid")):
        try:
            parts = f.read_text().split()
            out.append(PidFile(f.stem, int(parts[0]), int(parts[1]) if len(parts) > 1 else None))
        except (OSError, ValueError, IndexError):
            continue  # a torn PID file names nothing we could safely kill
    return out


def is_running(pf: PidFile) -> bool:
    if not _alive(pf.pid):
        return False
    return pf.starttime is None or _proc_starttime(pf.pid) == pf.starttime


def _signal(pid: int, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        pass


def terminate(pids: Iterable[int], grace_s: float = STOP_GRACE_S, group: bool = True) -> None:
    """TERM every PID (its process group when it leads one), wait up to ``grace_s``, then KILL."""
    targets = [p for p in pids if p > 1 and p != os.getpid()]
    for pid in targets:
        _signal(pid, signal.SIGTERM, group and _is_group_leader(pid))
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in targets):
        time.sleep(0.02)
    for pid in targets:
        if _alive(pid):
            _signal(pid, signal.SIGKILL, group and _is_group_leader(pid))
            _signal(pid, signal.SIGKILL, False)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and any(_alive(p) for p in targets):
        time.sleep(0.02)


def _is_group_leader(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def stop(state_dir: Path, name: str, grace_s: float = STOP_GRACE_S) -> bool:
    """Stop one named process; True if it was running."""
    for pf in read_pidfiles(state_dir):
        if pf.name == name:
            running = is_running(pf)
            if running:
                terminate([pf.pid], grace_s)
            (pids_dir(state_dir) / f"{name}.pid").unlink(missing_ok=True)
            return running
    return False


def stop_all(state_dir: Path, grace_s: float = STOP_GRACE_S) -> list[str]:
    """Stop every process with a PID file (crash cleanup included); return the names stopped."""
    pfs = read_pidfiles(state_dir)
    running = [pf for pf in pfs if is_running(pf)]
    terminate([pf.pid for pf in running], grace_s)
    for pf in pfs:
        (pids_dir(state_dir) / f"{pf.name}.pid").unlink(missing_ok=True)
    return [f"process {pf.name} ({pf.pid})" for pf in running]


def netns_pids(names: Iterable[str]) -> dict[str, list[int]]:
    """PIDs of processes whose network namespace is one of the named ones (like `ip netns pids`)."""
    wanted: dict[tuple[int, int], str] = {}
    for name in names:
        try:
            st = os.stat(NETNS_DIR / name)
        except OSError:
            continue
        wanted[(st.st_dev, st.st_ino)] = name
    out: dict[str, list[int]] = {n: [] for n in wanted.values()}
    if not wanted:
        return out
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in wanted:
            out[wanted[key]].append(int(entry.name))
    return out
