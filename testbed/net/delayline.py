"""A userspace WAN delay line: this kernel has no netem, so each WAN link is a pair of TUN devices
(one in each PoP's namespace) joined by this process, which forwards every packet after a fixed
one-way delay.

One process serves every link (fewer processes on 2 cores). Each direction is a FIFO; a packet is
released at its arrival time plus the link's one-way delay minus a small compensation for the
fixed cost of the two TUN crossings and the wake-up (measured, see docs/testbed-network.md). The
loop sleeps in ``select`` until the next release or the next arrival, with the timer slack cut to
1 us, so it is precise to tens of microseconds without spinning.

Usage: python -m inferslice.testbed.net.delayline --link NS_A,NS_B,IFNAME,RTT_S [--link ...]
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import fcntl
import os
import select
import signal
import struct
import sys
import time
from dataclasses import dataclass, field
from types import FrameType

from inferslice.common import netns as netns_

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
PR_SET_TIMERSLACK = 29
# Measured fixed cost per direction (read wake-up, write, the kernel's TUN crossings): subtracting
# it brings the measured ICMP RTT within ~0.1 ms of the configured one on this 2-core machine.
DEFAULT_COMPENSATION_S = 150e-6
MAX_QUEUE_BYTES = 8 * 1024 * 1024  # per direction; far above rate x delay at the ~470 Mbit/s this process can move
READ_BATCH = 64  # packets read from one TUN per wake-up before serving the others
MAX_PACKET = 65535


@dataclass
class Direction:
    """Packets read from ``src_fd`` wait here until released into ``dst_fd``."""

    src_fd: int
    dst_fd: int
    delay_s: float
    queue: collections.deque[tuple[float, bytes]] = field(default_factory=collections.deque)
    queued_bytes: int = 0
    forwarded: int = 0
    dropped: int = 0


@dataclass(frozen=True)
class LinkSpec:
    ns_a: str
    ns_b: str
    ifname: str
    rtt_s: float


def parse_link(text: str) -> LinkSpec:
    parts = text.split(",")
    if len(parts) != 4:
        raise argparse.ArgumentTypeError(f"--link wants NS_A,NS_B,IFNAME,RTT_S, got {text!r}")
    rtt = float(parts[3])
    if rtt < 0:
        raise argparse.ArgumentTypeError("RTT must be >= 0")
    return LinkSpec(parts[0], parts[1], parts[2], rtt)


def open_tun(netns: str, ifname: str, home_fd: int) -> int:
    """Create TUN device ``ifname`` inside ``netns`` and return its (non-blocking) queue fd."""
    netns_.join(netns)
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", ifname.encode(), IFF_TUN | IFF_NO_PI))
        except OSError:
            os.close(fd)
            raise
        return fd
    finally:
        netns_.join_fd(home_fd)


def _set_timer_slack(ns: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0)


def run(directions: list[Direction], stop_after_s: float | None = None) -> None:
    by_src = {d.src_fd: d for d in directions}
    fds = list(by_src)
    clock = time.monotonic
    deadline = None if stop_after_s is None else clock() + stop_after_s
    while deadline is None or clock() < deadline:
        now = clock()
        timeout: float | None = None
        for d in directions:
            if d.queue:
                wait = d.queue[0][0] - now
                timeout = wait if timeout is None or wait < timeout else timeout
        if timeout is not None and timeout < 0:
            timeout = 0.0
        if deadline is not None:
            timeout = min(timeout if timeout is not None else 1.0, max(0.0, deadline - now))
        readable, _, _ = select.select(fds, [], [], timeout)
        now = clock()
        for fd in readable:
            d = by_src[fd]
            for _ in range(READ_BATCH):
                try:
                    pkt = os.read(fd, MAX_PACKET)
                except BlockingIOError:
                    break
                except OSError:  # device went away (namespace deleted): nothing left to serve
                    return
                if d.queued_bytes + len(pkt) > MAX_QUEUE_BYTES:
                    d.dropped += 1
                    continue
                d.queue.append((now + d.delay_s, pkt))
                d.queued_bytes += len(pkt)
        now = clock()
        for d in directions:
            q = d.queue
            while q and q[0][0] <= now:
                _, pkt = q.popleft()
                d.queued_bytes -= len(pkt)
                try:
                    os.write(d.dst_fd, pkt)
                    d.forwarded += 1
                except OSError:  # peer down or its queue full: a real wire would lose it too
                    d.dropped += 1


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="inferslice.testbed.net.delayline", description=__doc__.splitlines()[0])
    parser.add_argument("--link", action="append", type=parse_link, required=True, help="NS_A,NS_B,IFNAME,RTT_S")
    parser.add_argument("--compensation-s", type=float, default=DEFAULT_COMPENSATION_S, help="subtracted per direction")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    _set_timer_slack(1000)
    home_fd = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    directions: list[Direction] = []
    for spec in args.link:
        delay = max(0.0, spec.rtt_s / 2.0 - args.compensation_s)
        fd_a = open_tun(spec.ns_a, spec.ifname, home_fd)
        fd_b = open_tun(spec.ns_b, spec.ifname, home_fd)
        directions.append(Direction(fd_a, fd_b, delay))
        directions.append(Direction(fd_b, fd_a, delay))
    print(f"delayline ready: {len(args.link)} links", flush=True)
    try:
        run(directions)
    finally:
        lost = sum(d.dropped for d in directions)
        print(f"delayline exiting: forwarded {sum(d.forwarded for d in directions)}, dropped {lost}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
