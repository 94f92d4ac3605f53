"""Active RTT probing between PoPs, like Kube-OVN's pinger, exported as a seconds histogram.

A background thread sends one small UDP datagram per target every ``interval_s`` and waits for its
echo up to ``timeout_s``; each answered probe is one observation of ``inferslice_pop_rtt_seconds
{pop,peer_pop}``. It sends only to the addresses of its targets (sockets are ``connect``ed, so only
their answers are read). A target may name a network namespace: its socket is opened there, which
is how the testbed probes from inside a PoP. The clock and the wait are injected so tests control
time. A responder (``UdpEchoResponder``) answers at each PoP; any UDP echo service does too.
"""

from __future__ import annotations

import logging
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import HistogramMetricFamily, Metric

from inferslice import metric_names as mn
from inferslice.common.netns import in_netns

log = logging.getLogger(__name__)

# Edges at the brief's latency-tier boundaries (5, 10, 15 ms) with resolution around them.
DEFAULT_BUCKETS_S = (0.0005, 0.001, 0.002, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.035, 0.05, 0.1, 0.25, 0.5, 1.0)
_PROBE = struct.Struct("!4sIQ")  # magic, target index, sequence
_MAGIC = b"ISXP"


@dataclass(frozen=True)
class ProbeTarget:
    pop: str
    peer_pop: str
    address: str
    port: int
    netns: str | None = None  # the namespace to send from (None: the exporter's own)


class _Histogram:
    def __init__(self, buckets: Sequence[float]) -> None:
        self.edges = tuple(buckets)
        self.counts = [0] * (len(self.edges) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        for i, edge in enumerate(self.edges):
            if value <= edge:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        out, acc = [], 0
        for edge, count in zip(self.edges, self.counts, strict=False):
            acc += count
            out.append((repr(float(edge)), float(acc)))
        out.append(("+Inf", float(acc + self.counts[-1])))
        return out


class RttProber:
    """A Source (``network_probe``) whose collect() starts the probe thread on first use."""

    def __init__(
        self,
        targets: Sequence[ProbeTarget],
        interval_s: float = 1.0,  # Kube-OVN's pinger uses 5 s; 1 s gives a 20-30 s load step ~25 samples
        timeout_s: float = 0.5,  # well above the 18 ms worst WAN RTT, below the interval
        buckets_s: Sequence[float] = DEFAULT_BUCKETS_S,
        clock: Callable[[], float] = time.monotonic,
        name: str = "network_probe",
    ) -> None:
        self.name = name
        self.targets = tuple(targets)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._clock = clock
        self._buckets = tuple(buckets_s)
        self._hist = {(t.pop, t.peer_pop): _Histogram(self._buckets) for t in self.targets}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._socks: list[socket.socket | None] = [None] * len(self.targets)
        self._seq = 0
        self.sent = 0
        self.answered = 0

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            if self._thread is not None or not self.targets:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="inferslice-rtt-prober", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=self.timeout_s + 2.0)
        self._thread = None
        for i, s in enumerate(self._socks):
            if s is not None:
                s.close()
                self._socks[i] = None

    def _run(self) -> None:
        next_at = self._clock()
        while not self._stop.is_set():
            self.probe_round()
            next_at += self.interval_s
            delay = next_at - self._clock()
            if delay < 0:  # a round overran: skip ahead rather than burst
                next_at = self._clock()
                delay = 0.0
            if self._stop.wait(delay):
                return

    # -- one round -------------------------------------------------------------------------------
    def _socket(self, i: int) -> socket.socket:
        s = self._socks[i]
        if s is None:
            t = self.targets[i]

            def make() -> socket.socket:
                family = socket.AF_INET6 if ":" in t.address else socket.AF_INET
                sock = socket.socket(family, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                sock.setblocking(False)
                sock.connect((t.address, t.port))
                return sock

            s = self._socks[i] = in_netns(t.netns, make)
        return s

    def probe_round(self) -> int:
        """Probe every target once, concurrently; return how many answered within the timeout."""
        self._seq = (self._seq + 1) & 0xFFFFFFFFFFFFFFFF
        seq = self._seq
        sel = selectors.DefaultSelector()
        sent_at: dict[int, float] = {}
        try:
            for i, t in enumerate(self.targets):
                try:
                    sock = self._socket(i)
                    while True:  # drain answers that arrived after an earlier round's timeout
                        try:
                            sock.recv(64)
                        except BlockingIOError:
                            break
                    sent_at[i] = self._clock()
                    sock.send(_PROBE.pack(_MAGIC, i, seq))
                    sel.register(sock, selectors.EVENT_READ, i)
                    self.sent += 1
                except OSError as err:
                    log.debug("probe to %s (%s) failed: %s", t.address, t.peer_pop, err)
                    self._drop_socket(i)
                    sent_at.pop(i, None)
            deadline = self._clock() + self.timeout_s
            answered = 0
            while sent_at:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    break
                for key, _ in sel.select(remaining):
                    i = int(key.data)
                    try:
                        data = key.fileobj.recv(64)  # type: ignore[union-attr]
                    except OSError:  # ICMP port unreachable surfaces here as ECONNREFUSED
                        sel.unregister(key.fileobj)
                        sent_at.pop(i, None)
                        continue
                    if len(data) < _PROBE.size:
                        continue
                    magic, idx, rseq = _PROBE.unpack_from(data)
                    if magic != _MAGIC or idx != i or rseq != seq or i not in sent_at:
                        continue
                    rtt = self._clock() - sent_at.pop(i)
                    sel.unregister(key.fileobj)
                    t = self.targets[i]
                    with self._lock:
                        self._hist[(t.pop, t.peer_pop)].observe(rtt)
                    answered += 1
            self.answered += answered
            return answered
        finally:
            sel.close()

    def _drop_socket(self, i: int) -> None:
        s = self._socks[i]
        if s is not None:
            s.close()
            self._socks[i] = None

    # -- Source ----------------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        self.start()
        return iter([self.family()])

    def family(self) -> HistogramMetricFamily:
        """The RTT histograms as they stand, without starting the probe thread (``collect`` does)."""
        fam = HistogramMetricFamily(mn.POP_RTT, "Round-trip time of active probes between PoPs", labels=["pop", "peer_pop"])
        with self._lock:
            for (pop, peer), h in self._hist.items():
                fam.add_metric([pop, peer], h.cumulative(), h.total)
        return fam


class UdpEchoResponder:
    """Answers every datagram with itself, on a background thread; bind in a namespace if given."""

    def __init__(self, address: str = "127.0.0.1", port: int = 0, netns: str | None = None) -> None:
        def make() -> socket.socket:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            s = socket.socket(family, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            s.bind((address, port))
            s.settimeout(0.2)  # how quickly close() is noticed
            return s

        self._sock = in_netns(netns, make)
        self.port: int = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="inferslice-udp-echo", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self._sock.recvfrom(2048)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                self._sock.sendto(data, peer)
            except OSError:
                continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
        self._sock.close()
