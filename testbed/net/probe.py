"""Measurements inside the testbed's namespaces (no `ping` binary here): ICMP echo RTTs and a TCP
bulk transfer between two namespaces, counted by the receiver.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyroute2 import netns as pr_netns

ICMP_ECHO_REQUEST = 8
ICMP_ECHO_REPLY = 0


def ns_socket(netns: str | None, family: int, kind: int, proto: int = 0) -> socket.socket:
    if netns is None:
        return socket.socket(family, kind, proto)
    sock: socket.socket = pr_netns.create_socket(netns, family, kind, proto, flags=0)
    return sock


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = int(sum(struct.unpack(f"!{len(data) // 2}H", data)))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def icmp_rtts(netns: str | None, dst: str, count: int = 10, interval_s: float = 0.05, timeout_s: float = 1.0) -> list[float]:
    """RTTs (s) of ICMP echoes from ``netns`` to ``dst``; the kernel at ``dst`` answers, as for ping."""
    sock = ns_socket(netns, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    rtts: list[float] = []
    try:
        for seq in range(count):
            payload = struct.pack("!d", time.monotonic()) + bytes(48)
            header = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, 0, ident, seq)
            packet = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, _checksum(header + payload), ident, seq) + payload
            sent = time.monotonic()
            sock.sendto(packet, (dst, 0))
            deadline = sent + timeout_s
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                ready, _, _ = select.select([sock], [], [], left)
                if not ready:
                    break
                data = sock.recv(2048)
                ihl = (data[0] & 0x0F) * 4
                typ, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl : ihl + 8])
                if typ == ICMP_ECHO_REPLY and rid == ident and rseq == seq:
                    rtts.append(time.monotonic() - sent)
                    break
            time.sleep(interval_s)
    finally:
        sock.close()
    return rtts


_ACTION_JOIN_S = 10.0  # an action still running this long after the transfer is stuck: return without it


@dataclass(frozen=True)
class Transfer:
    """Bytes the receiver counted, sampled over time: ``samples`` holds (t_s, total_bytes)."""

    samples: list[tuple[float, int]]

    def rate_bps(self, start_s: float, end_s: float) -> float:
        """Mean goodput between two instants of the transfer (seconds from its start)."""

        def at(t: float) -> tuple[float, int]:
            best = self.samples[0]
            for s in self.samples:
                if s[0] <= t:
                    best = s
            return best

        (t0, b0), (t1, b1) = at(start_s), at(end_s)
        return (b1 - b0) * 8.0 / (t1 - t0) if t1 > t0 else 0.0

    def peak_rate_bps(self, window_s: float, start_s: float = 0.0) -> float:
        """The best mean goodput over any ``window_s`` of the transfer from ``start_s`` on (the
        samples' own instants as window starts). A link's capacity is a maximum: a stall of the
        machine (a neighbour's burst, the hypervisor's steal) lowers some windows, never raises
        one above what the wire carries, so the best window reads the wire where the mean over the
        whole transfer reads the machine. Zero when no window of that length fits."""
        best = 0.0
        j = 0
        for i, (t0, b0) in enumerate(self.samples):
            if t0 < start_s:
                continue
            j = max(j, i)
            while j < len(self.samples) and self.samples[j][0] < t0 + window_s:
                j += 1
            if j == len(self.samples):
                break
            t1, b1 = self.samples[j]
            best = max(best, (b1 - b0) * 8.0 / (t1 - t0))
        return best


def tcp_transfer(
    sender_netns: str,
    sender_ip: str,
    receiver_netns: str,
    duration_s: float,
    port: int = 5201,
    at: tuple[tuple[float, Callable[[], None]], ...] = (),
    sample_s: float = 0.05,
    receiver_ip: str | None = None,
) -> Transfer:
    """Bulk TCP from ``sender_ip`` (bound in ``sender_netns``) to a client in ``receiver_netns``.

    The client connects and the server sends, so the data flows the way a response stream does.
    ``at`` holds (seconds, action) pairs run during the transfer, e.g. a live cap change: each on
    its own thread from its time on, so a slow one (``tc`` under load) never stalls the receiver
    (and through its window the sender); the transfer waits for them before it returns.
    ``receiver_ip`` binds the client's end (e.g. to a tier address, so the stream is classified).
    """
    srv = ns_socket(sender_netns, socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((sender_ip, port))
    srv.listen(1)
    cli = ns_socket(receiver_netns, socket.AF_INET, socket.SOCK_STREAM)
    if receiver_ip is not None:
        cli.bind((receiver_ip, 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = srv.accept()
        conn.settimeout(0.5)
        chunk = bytes(16384)
        try:
            while not stop.is_set():
                try:
                    conn.send(chunk)
                except TimeoutError:
                    continue
        except OSError:
            pass
        finally:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    cli.connect((sender_ip, port))
    cli.setblocking(False)
    samples: list[tuple[float, int]] = []
    total = 0
    start = time.monotonic()
    next_sample = 0.0
    actions = sorted(at, key=lambda a: a[0])
    running: list[threading.Thread] = []
    try:
        while True:
            now = time.monotonic() - start
            if now >= duration_s:
                break
            while actions and actions[0][0] <= now:
                running.append(threading.Thread(target=actions.pop(0)[1], daemon=True))
                running[-1].start()
            ready, _, _ = select.select([cli], [], [], sample_s / 2)
            if ready:
                try:
                    total += len(cli.recv(262144))
                except BlockingIOError:
                    pass
            if now >= next_sample:
                samples.append((now, total))
                next_sample = now + sample_s
        samples.append((time.monotonic() - start, total))
    finally:
        for t in running:
            t.join(timeout=_ACTION_JOIN_S)
        stop.set()
        cli.close()
        thread.join(timeout=2)
        srv.close()
    return Transfer(samples)
