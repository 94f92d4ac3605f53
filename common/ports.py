"""Free loopback ports for children and test servers."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the kernel's pick); the caller binds it soon after.

    There is a window in which another process may take it; callers that can bind port 0
    themselves should, and use this only for children that need the number up front.
    """
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
