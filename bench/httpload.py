"""An open-loop HTTP/1.1 load generator that costs little enough not to be the thing measured.

httpx spent ~2.7 ms of CPU per request here (54 % of a core at 200 req/s): on a loaded two-core
machine the client's event loop fell behind its own schedule and the "latency" it reported (up to
1.5 s, while the server's own histogram had every request under 100 ms) was the client's lag.
This one writes pre-encoded requests on keep-alive connections and reads the answer by its
``Content-Length``: tens of microseconds per request.

Open loop: request ``i`` is due at ``start + i / rate`` whether or not earlier ones returned, and
its latency counts from that instant, so time spent waiting for a free connection or behind a slow
answer is counted (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Request = tuple[str, bytes]  # (route label, the full request bytes)


def encode(method: str, path: str, host: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"host: {host}", *(f"{k}: {v}" for k, v in headers.items())]
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@dataclass
class Outcome:
    latencies: dict[str, list[float]] = field(default_factory=dict)  # seconds from the scheduled send
    statuses: dict[str, dict[str, int]] = field(default_factory=dict)  # "201", "500", or an error's name
    achieved_per_s: float = 0.0
    # Seconds from the scheduled send to the request's bytes being written: the client's own lag
    # (its event loop behind schedule, every connection busy, or a connection still opening). A stall
    # here is not the server's.
    send_lags: list[float] = field(default_factory=list)

    def add(self, route: str, latency_s: float, status: str) -> None:
        self.latencies.setdefault(route, []).append(latency_s)
        counts = self.statuses.setdefault(route, {})
        counts[status] = counts.get(status, 0) + 1


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def exchange(self, request: bytes) -> tuple[str, bool]:
        """Send one request, read one response: its status code, and whether the connection stays open."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, _, rest = head.partition(b"\r\n")
        length = 0
        close = False
        for line in rest.split(b"\r\n"):
            name, _, value = line.partition(b":")
            key = name.strip().lower()
            if key == b"content-length":
                length = int(value)
            elif key == b"connection" and value.strip().lower() == b"close":
                close = True
        if length:
            await self.reader.readexactly(length)
        return status_line.split(b" ", 2)[1].decode(), not close

    def close(self) -> None:
        self.writer.close()


async def run(host: str, port: int, rate: float, duration_s: float, next_request: Callable[[int], Request], connections: int = 16,
              timeout_s: float = 10.0) -> Outcome:  # fmt: skip
    """``rate * duration_s`` requests, request ``i`` being ``next_request(i)``, over at most ``connections``."""
    out = Outcome()
    idle: asyncio.Queue[_Conn | None] = asyncio.Queue()
    for _ in range(connections):
        idle.put_nowait(None)  # a slot; a connection is opened on first use and kept

    async def one(i: int, scheduled: float) -> None:
        route, request = next_request(i)
        conn = await idle.get()
        status = "?"
        try:
            if conn is None:
                conn = _Conn(*await asyncio.open_connection(host, port))
            out.send_lags.append(time.perf_counter() - scheduled)
            status, keep = await asyncio.wait_for(conn.exchange(request), timeout_s)
            if not keep:
                conn.close()
                conn = None
        except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as err:
            status = type(err).__name__
            if conn is not None:
                conn.close()
            conn = None
        finally:
            idle.put_nowait(conn)
        out.add(route, time.perf_counter() - scheduled, status)

    tasks = []
    start = time.perf_counter()
    total = int(rate * duration_s)
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, scheduled)))
    await asyncio.gather(*tasks)
    out.achieved_per_s = total / (time.perf_counter() - start)
    while not idle.empty():
        conn = idle.get_nowait()
        if conn is not None:
            conn.close()
    return out
