"""A userspace WAN link emulator: this kernel has no netem, so each WAN link is a pair of TUN
devices (one in each PoP's namespace) joined by this process, which forwards every packet after
the link's one-way delay and, where the link has a physical rate, at that rate through a bounded
drop-tail buffer.

One process serves every link (fewer processes on 2 cores). Each direction is a FIFO; a packet is
released at its arrival time plus the link's one-way delay minus a small compensation for the
fixed cost of the two TUN crossings and the wake-up (measured, see docs/testbed-network.md). The
loop sleeps in ``select`` until the next release or the next arrival, with the timer slack cut to
1 us, so it is precise to tens of microseconds without spinning.

The rate (``RATE_BPS``): a packet is serialised onto the wire after every packet before it, taking
``8 x len / rate``, then travels the delay. The bytes still waiting for the wire are the link's
buffer; one that would overflow ``BUFFER_S`` x rate is dropped (drop-tail, as a router port). The
queue lives here, hops away from every sender, not in a qdisc beside it: a local qdisc would push
back on the senders' sockets (TCP small queues, a UDP socket's send buffer) and never drop, which
is not how a congested WAN link treats TCP (the client edge learned the same, docs/testbed-network.md).

Rate and delay change live through the control socket (``--control PATH``, a UNIX stream socket:
one JSON request line, one JSON answer line): ``{"op": "set_rtt", "ifname": "isl-w0", "rtt_s": 0.03}``,
``{"op": "set_rate", "ifname": "isl-w0", "rate_bps": 1e7}`` (null: unlimited), ``{"op": "status"}``.
A packet already in flight keeps its release time; new packets are never released before earlier
ones (a wire does not reorder), so after a cut the queue drains in order.

Usage: python -m inferslice.testbed.net.delayline --link NS_A,NS_B,IFNAME,RTT_S[,RATE_BPS,BUFFER_S] [--link ...] [--control PATH]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import fcntl
import json
import math
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Mapping, Sequence
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
MIN_BUFFER_BYTES = 2 * 1500  # a buffer that cannot hold the packet on the wire and one more drops every burst
DEFAULT_BUFFER_S = 0.05
CONTROL_TIMEOUT_S = 0.5  # a control client that does not send its line within this is dropped
MAX_CONTROL_BYTES = 4096
MAX_RTT_S = 10.0


@dataclass
class Direction:
    """Packets read from ``src_fd`` wait here until released into ``dst_fd``."""

    src_fd: int
    dst_fd: int
    delay_s: float
    ifname: str = ""
    rate_bps: float | None = None  # the wire's rate; None: unlimited (delay only)
    buffer_s: float = DEFAULT_BUFFER_S
    queue: collections.deque[tuple[float, bytes]] = field(default_factory=collections.deque)
    last_release_s: float = 0.0  # releases never go backwards: a cut delay must not reorder the wire
    wire_free_s: float = 0.0  # when the last accepted packet has been serialised
    queued_bytes: int = 0
    forwarded: int = 0
    forwarded_bytes: int = 0
    dropped: int = 0  # for any reason
    dropped_full: int = 0  # the rate's buffer was full (congestion)

    def buffer_bytes(self) -> float:
        return math.inf if self.rate_bps is None else max(MIN_BUFFER_BYTES, self.rate_bps / 8.0 * self.buffer_s)

    def backlog_bytes(self, now: float) -> float:
        """Bytes accepted but not yet serialised onto the wire."""
        if self.rate_bps is None:
            return 0.0
        return max(0.0, self.wire_free_s - now) * self.rate_bps / 8.0

    def admit(self, now: float, size: int) -> float | None:
        """The release time of a packet of ``size`` bytes read at ``now``; None: dropped."""
        if self.queued_bytes + size > MAX_QUEUE_BYTES:
            self.dropped += 1
            return None
        if self.rate_bps is not None:
            if self.backlog_bytes(now) + size > self.buffer_bytes():
                self.dropped += 1
                self.dropped_full += 1
                return None
            self.wire_free_s = max(now, self.wire_free_s) + size * 8.0 / self.rate_bps
            release = self.wire_free_s + self.delay_s
        else:
            release = now + self.delay_s
        release = max(release, self.last_release_s)
        self.last_release_s = release
        return release

    def counters(self) -> dict[str, float]:
        return {"forwarded": self.forwarded, "forwarded_bytes": self.forwarded_bytes, "dropped": self.dropped,
                "dropped_full": self.dropped_full, "queued_bytes": self.queued_bytes}  # fmt: skip


@dataclass(frozen=True)
class LinkSpec:
    ns_a: str
    ns_b: str
    ifname: str
    rtt_s: float
    rate_bps: float | None = None
    buffer_s: float = DEFAULT_BUFFER_S


def parse_link(text: str) -> LinkSpec:
    parts = text.split(",")
    if len(parts) not in (4, 6):
        raise argparse.ArgumentTypeError(f"--link wants NS_A,NS_B,IFNAME,RTT_S[,RATE_BPS,BUFFER_S], got {text!r}")
    rtt = float(parts[3])
    if rtt < 0:
        raise argparse.ArgumentTypeError("RTT must be >= 0")
    rate: float | None = None
    buffer_s = DEFAULT_BUFFER_S
    if len(parts) == 6:
        rate = None if parts[4] in ("", "none") else float(parts[4])
        buffer_s = float(parts[5])
        if (rate is not None and not rate > 0) or not buffer_s > 0:
            raise argparse.ArgumentTypeError("RATE_BPS and BUFFER_S must be > 0 (RATE_BPS 'none': unlimited)")
    return LinkSpec(parts[0], parts[1], parts[2], rtt, rate, buffer_s)


def format_link(ns_a: str, ns_b: str, ifname: str, rtt_s: float, rate_bps: float | None = None, buffer_s: float = DEFAULT_BUFFER_S) -> str:
    """The ``--link`` argument ``parse_link`` reads."""
    return f"{ns_a},{ns_b},{ifname},{rtt_s!r},{'none' if rate_bps is None else repr(float(rate_bps))},{buffer_s!r}"


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


def one_way_delay_s(rtt_s: float, compensation_s: float = DEFAULT_COMPENSATION_S) -> float:
    return max(0.0, rtt_s / 2.0 - compensation_s)


class Control:
    """The control socket: set a link's RTT or rate live, report every link's."""

    def __init__(self, path: str, directions: Sequence[Direction], compensation_s: float = DEFAULT_COMPENSATION_S) -> None:
        self.path = path
        self.directions = list(directions)
        self.compensation_s = compensation_s
        self.rtts: dict[str, float] = {}
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, 0o600)  # a change of the wire is a mutation: root's only
        self.sock.listen(4)
        self.sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def _link(self, request: Mapping[str, object]) -> str | None:
        ifname = request.get("ifname")
        return ifname if isinstance(ifname, str) and ifname in self.rtts else None

    def answer(self, request: Mapping[str, object]) -> dict[str, object]:
        op = request.get("op")
        if op == "status":
            links: dict[str, object] = {}
            for name, rtt in self.rtts.items():
                dirs = [d for d in self.directions if d.ifname == name]
                links[name] = {"rtt_s": rtt, "rate_bps": dirs[0].rate_bps if dirs else None,
                               "buffer_s": dirs[0].buffer_s if dirs else None, "directions": [d.counters() for d in dirs]}  # fmt: skip
            return {"ok": True, "links": links}
        if op not in ("set_rtt", "set_rate"):
            return {"ok": False, "error": f"unknown op {op!r} (set_rtt | set_rate | status)"}
        ifname = self._link(request)
        if ifname is None:
            return {"ok": False, "error": f"unknown link {request.get('ifname')!r} (have {', '.join(sorted(self.rtts))})"}
        mine = [d for d in self.directions if d.ifname == ifname]
        if op == "set_rtt":
            new_rtt = request.get("rtt_s")
            if isinstance(new_rtt, bool) or not isinstance(new_rtt, (int, float)) or not 0 <= new_rtt <= MAX_RTT_S:
                return {"ok": False, "error": f"rtt_s must be a number in [0, {MAX_RTT_S:g}], got {new_rtt!r}"}
            for d in mine:
                d.delay_s = one_way_delay_s(float(new_rtt), self.compensation_s)
            self.rtts[ifname] = float(new_rtt)
            return {"ok": True, "ifname": ifname, "rtt_s": float(new_rtt)}
        rate = request.get("rate_bps")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (math.isfinite(rate) and rate > 0)):
            return {"ok": False, "error": f"rate_bps must be a positive number or null, got {rate!r}"}
        for d in mine:
            d.rate_bps = None if rate is None else float(rate)
        return {"ok": True, "ifname": ifname, "rate_bps": None if rate is None else float(rate)}

    def serve_one(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return
        with conn:
            conn.settimeout(CONTROL_TIMEOUT_S)
            try:
                data = b""
                while b"\n" not in data and len(data) < MAX_CONTROL_BYTES:
                    chunk = conn.recv(MAX_CONTROL_BYTES)
                    if not chunk:
                        break
                    data += chunk
                try:
                    request = json.loads(data.decode() or "null")
                    reply = self.answer(request) if isinstance(request, dict) else {"ok": False, "error": "expected a JSON object"}
                except (ValueError, UnicodeDecodeError) as err:
                    reply = {"ok": False, "error": f"not JSON: {err}"}
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                return  # the client went away or stalled: the forwarding must not wait for it

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def run(directions: list[Direction], stop_after_s: float | None = None, control: Control | None = None) -> None:
    by_src = {d.src_fd: d for d in directions}
    fds = list(by_src) + ([control.fileno()] if control is not None else [])
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
            if control is not None and fd == control.fileno():
                control.serve_one()
                continue
            d = by_src[fd]
            for _ in range(READ_BATCH):
                try:
                    pkt = os.read(fd, MAX_PACKET)
                except BlockingIOError:
                    break
                except OSError:  # device went away (namespace deleted): nothing left to serve
                    return
                release = d.admit(now, len(pkt))
                if release is None:
                    continue
                d.queue.append((release, pkt))
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
                    d.forwarded_bytes += len(pkt)
                except OSError:  # peer down or its queue full: a real wire would lose it too
                    d.dropped += 1


def request(path: str, message: Mapping[str, object], timeout_s: float = 2.0) -> dict[str, object]:
    """Send one control request to a running delay line and return its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(path)
        sock.sendall(json.dumps(dict(message)).encode() + b"\n")
        data = b""
        while b"\n" not in data:
            chunk = sock.recv(MAX_CONTROL_BYTES)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data.decode() or "null")
    if not isinstance(reply, dict):
        raise ValueError(f"delay line answered {data!r}")
    return reply


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="inferslice.testbed.net.delayline", description=__doc__.splitlines()[0])
    parser.add_argument("--link", action="append", type=parse_link, required=True, help="NS_A,NS_B,IFNAME,RTT_S[,RATE_BPS,BUFFER_S]")
    parser.add_argument("--compensation-s", type=float, default=DEFAULT_COMPENSATION_S, help="subtracted per direction")
    parser.add_argument("--control", default=None, help="UNIX socket for live changes (set_rtt, set_rate, status)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    _set_timer_slack(1000)
    home_fd = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    directions: list[Direction] = []
    for spec in args.link:
        delay = one_way_delay_s(spec.rtt_s, args.compensation_s)
        fd_a = open_tun(spec.ns_a, spec.ifname, home_fd)
        fd_b = open_tun(spec.ns_b, spec.ifname, home_fd)
        directions.append(Direction(fd_a, fd_b, delay, spec.ifname, spec.rate_bps, spec.buffer_s))
        directions.append(Direction(fd_b, fd_a, delay, spec.ifname, spec.rate_bps, spec.buffer_s))
    control = Control(args.control, directions, args.compensation_s) if args.control else None
    if control is not None:
        control.rtts = {spec.ifname: spec.rtt_s for spec in args.link}
    print(f"delayline ready: {len(args.link)} links", flush=True)
    try:
        run(directions, control=control)
    finally:
        if control is not None:
            control.close()
        lost = sum(d.dropped for d in directions)
        print(f"delayline exiting: forwarded {sum(d.forwarded for d in directions)}, dropped {lost}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
