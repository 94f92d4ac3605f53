"""Free loopback ports for children and test servers."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterable
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the kernel's pick); the caller binds it soon after.

    There is a window in which another process may take it; callers that can bind port 0
    themselves should, and use this only for children that need the number up front.
    """
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux; its default elsewhere)."""
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_base_port(offsets: Iterable[int], host: str = "127.0.0.1", rng: random.Random | None = None, step: int = 10) -> int:
    """A base port B with every ``B + offset`` free now, for a plan that derives its ports from one base.

    Bases are drawn below the kernel's ephemeral range: a port inside it can be handed to any
    outgoing connection (a scrape, an HTTP client) between this check and the bind, which made
    parallel tests fail with "address already in use".
    """
    offs = sorted(set(offsets))
    low, _ = ephemeral_range()
    top = min(low, 65536) - (offs[-1] if offs else 0) - 1
    floor = 10000 if top > 10000 + 10 * step else 1024
    if top <= floor:
        raise RuntimeError(f"no room for ports at offsets up to {offs[-1]} below the ephemeral range (from {low})")
    pick = rng or random.Random()
    for _ in range(100):
        base = pick.randrange(floor, top, step)
        if all(_bindable(host, base + o) for o in offs):
            return base
    raise RuntimeError("no free block of ports below the ephemeral range")


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
