"""Network-namespace entry (``setns(2)``), written once for the load generator, the exporters and the testbed.

``setns`` changes the namespace of the calling *thread*; threads created afterwards inherit it and
threads created before keep theirs. So:

- ``enter_netns(name)``: move the calling thread for good (the load generator calls it in the main
  thread before its event loop starts, so every socket it opens, and asyncio's resolver threads,
  live in the client namespace and its traffic crosses the tier's capped edge link);
- ``in_netns(netns, make)``: run ``make`` (which opens a socket) on a helper thread inside
  ``netns``; a socket stays bound to the namespace it was created in, so the caller may use it
  from its own thread afterwards (the exporters' netlink readers);
- ``join(netns)`` / ``join_fd(fd)``: the raw switch, for a caller that switches back itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from inferslice.errors import ConfigError, NotPrivilegedError

NETNS_RUN_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
T = TypeVar("T")

_libc: ctypes.CDLL | None = None


def netns_path(netns: str, run_dir: Path = NETNS_RUN_DIR) -> str:
    """A namespace name (``ip netns`` style) or an absolute path (``/proc/PID/ns/net``) as a path."""
    return netns if netns.startswith("/") else str(run_dir / netns)


def join_fd(fd: int) -> None:
    """Move the calling thread into the network namespace open as ``fd``; ``OSError`` on failure."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def join(netns: str, run_dir: Path = NETNS_RUN_DIR) -> None:
    """Move the calling thread into ``netns`` (a name or a path); ``OSError`` on failure."""
    fd = os.open(netns_path(netns, run_dir), os.O_RDONLY | os.O_CLOEXEC)
    try:
        join_fd(fd)
    finally:
        os.close(fd)


def enter_netns(name: str, run_dir: Path = NETNS_RUN_DIR) -> None:
    """Join network namespace ``name``; ConfigError if it does not exist, NotPrivilegedError without root."""
    if not name or "/" in name or name in (".", ".."):
        raise ConfigError(f"invalid network namespace name {name!r}", field="netns")
    path = run_dir / name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError as err:
        raise ConfigError(f"no network namespace {name!r} ({path} does not exist; is the testbed up?)", field="netns") from err
    except PermissionError as err:
        raise NotPrivilegedError(f"cannot open {path}: joining a network namespace needs root") from err
    try:
        join_fd(fd)
    except OSError as err:
        if err.errno == errno.EPERM:
            raise NotPrivilegedError(f"setns({name}) was refused: joining a network namespace needs root (CAP_SYS_ADMIN)") from None
        raise ConfigError(f"setns({path}) failed: {os.strerror(err.errno or 0)}", field="netns") from None
    finally:
        os.close(fd)


def in_netns(netns: str | None, make: Callable[[], T], run_dir: Path = NETNS_RUN_DIR) -> T:
    """Run ``make`` (which opens a socket) inside ``netns`` on a helper thread; None = this namespace."""
    if netns is None:
        return make()
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            fd = os.open(netns_path(netns, run_dir), os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            error.append(err)
            return
        try:
            join_fd(fd)
            result.append(make())
        except BaseException as err:  # noqa: BLE001 - re-raised on the caller's thread below
            error.append(err)
        finally:
            os.close(fd)

    worker = threading.Thread(target=target, name=f"netns-{netns}", daemon=True)
    worker.start()
    worker.join()
    if error:
        raise error[0]
    return result[0]
