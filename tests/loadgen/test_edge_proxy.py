"""The edge proxy forwards streams unchanged and records what the load generator would."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from inferslice.exporters.edge_proxy import EdgeProxy, start_edge_proxy
from inferslice.records import RequestRecord
from inferslice.testbed.loadgen import LoadConfig, WorkloadSpec, run_load

from .conftest import ServerBehaviour

SHORT = WorkloadSpec(output_mu=2.5, output_sigma=0.2, max_output_tokens=20)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_proxy_records_match_the_clients_records(sse_server: tuple[str, ServerBehaviour]) -> None:
    url, b = sse_server
    b.ttft_s, b.itl_s = 0.05, 0.005
    seen: list[RequestRecord] = []
    port = _free_port()
    runner = await start_edge_proxy(EdgeProxy(url, "premium", [seen.append]), "127.0.0.1", port)
    try:
        result = await run_load(LoadConfig(url=f"http://127.0.0.1:{port}", model="tiny", concurrency=2, num_prompts=4,
                                           workload=SHORT))
    finally:
        await runner.cleanup()
    assert all(r.success for r in result.records) and len(seen) == 4
    assert all(p.success and p.slice == "premium" and p.model == "tiny" for p in seen)
    assert sorted(p.output_tokens for p in seen) == sorted(r.output_tokens for r in result.records)
    assert sorted(p.prompt_tokens for p in seen) == sorted(r.prompt_tokens for r in result.records)
    for p in seen:
        assert p.ttft_s is not None and p.ttft_s >= 0.05 and len(p.itl_s) == p.output_tokens - 1


async def test_proxy_with_upstream_down_answers_502_and_records_a_failure() -> None:
    seen: list[RequestRecord] = []
    port = _free_port()
    runner = await start_edge_proxy(EdgeProxy(f"http://127.0.0.1:{_free_port()}", "free", [seen.append]), "127.0.0.1", port)
    try:
        async with aiohttp.ClientSession() as s, s.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                                                        json={"model": "m", "messages": [], "stream": True}) as resp:
            assert resp.status == 502
    finally:
        await runner.cleanup()
    (rec,) = seen
    assert not rec.success and rec.error_type == "ClientConnectorError"


@pytest.mark.parametrize("mode", ["http500", "garbage"])
async def test_proxy_passes_errors_through_and_records_them(sse_server: tuple[str, ServerBehaviour], mode: str) -> None:
    url, b = sse_server
    b.mode = mode
    seen: list[RequestRecord] = []
    port = _free_port()
    runner = await start_edge_proxy(EdgeProxy(url, "free", [seen.append]), "127.0.0.1", port)
    try:
        result = await run_load(LoadConfig(url=f"http://127.0.0.1:{port}", model="tiny", concurrency=1, num_prompts=1,
                                           workload=SHORT))
    finally:
        await runner.cleanup()
    assert not result.records[0].success and not seen[0].success
    assert seen[0].error_type == result.records[0].error_type == {"http500": "500", "garbage": "malformed_stream"}[mode]
