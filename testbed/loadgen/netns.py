"""Move the calling process's network stack into a named network namespace (``ip netns`` style).

``setns`` changes the namespace of the calling *thread*; threads created afterwards inherit it and
threads created before keep theirs. So call ``enter_netns`` in the main thread before the event
loop starts: every socket the load generator opens (and asyncio's resolver threads, created
lazily) then lives in the client namespace, and its traffic crosses the tier's capped edge link.
Sockets opened earlier (e.g. a metrics server started first) stay reachable from the old namespace.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

from inferslice.errors import ConfigError, NotPrivilegedError

NETNS_RUN_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000


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
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            code = ctypes.get_errno()
            if code == errno.EPERM:
                raise NotPrivilegedError(f"setns({name}) was refused: joining a network namespace needs root (CAP_SYS_ADMIN)")
            raise ConfigError(f"setns({path}) failed: {os.strerror(code)}", field="netns")
    finally:
        os.close(fd)
