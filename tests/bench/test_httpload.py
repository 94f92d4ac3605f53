"""The API bench's open-loop client and its server-side GC accounting, against a real socket on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gc

from inferslice.bench import httpload
from inferslice.bench.classifier import GcPauses

BODY = b'{"ok": true}'


async def _serve(delay_s: float) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head:
                    return
                await asyncio.sleep(delay_s)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(BODY) + BODY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _run(delay_s: float, rate: float, duration_s: float) -> httpload.Outcome:
    async def main() -> httpload.Outcome:
        server, port = await _serve(delay_s)
        request = httpload.encode("GET", "/x", f"127.0.0.1:{port}", {})
        try:
            return await httpload.run("127.0.0.1", port, rate, duration_s, lambda i: ("GET /x", request), connections=4)
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(main())


def test_every_request_is_answered_and_its_send_lag_recorded() -> None:
    out = _run(0.0, rate=100.0, duration_s=0.2)
    assert out.statuses == {"GET /x": {"200": 20}}
    assert len(out.send_lags) == 20 and all(lag >= 0 for lag in out.send_lags)


def test_a_slow_server_shows_in_the_latency_and_a_busy_pool_in_the_send_lag() -> None:
    # 4 connections, each answer 50 ms, 200 req/s: the pool serves 80 req/s, so later requests wait
    # for a connection (send lag) and their latency counts from the scheduled send (open loop).
    out = _run(0.05, rate=200.0, duration_s=0.2)
    latencies = out.latencies["GET /x"]
    assert min(latencies) >= 0.05
    assert max(out.send_lags) >= 0.05  # 40 requests on 4 connections: the last waited >= 9 answers
    assert max(latencies) >= max(out.send_lags) + 0.05


def test_gc_pauses_count_a_full_collection_as_generation_2() -> None:
    pauses = GcPauses()
    gc.callbacks.append(pauses)
    try:
        gc.collect(2)
    finally:
        gc.callbacks.remove(pauses)
    stats = pauses.as_dict()
    assert stats["gen2"]["collections"] >= 1
    assert stats["gen2"]["max_ms"] >= 0 and stats["gen2"]["total_ms"] >= stats["gen2"]["max_ms"]
