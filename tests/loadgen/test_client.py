"""Timing and failure handling against the in-test SSE server (127.0.0.1)."""

from __future__ import annotations

import itertools

import pytest

from inferslice.common.ports import free_port
from inferslice.records import RequestRecord
from inferslice.testbed.loadgen import LoadConfig, WorkloadSpec, run_load

from .conftest import ServerBehaviour


async def test_measured_ttft_itl_tpot_and_tokens_match_the_server_schedule(sse_server: tuple[str, ServerBehaviour]) -> None:
    url, b = sse_server
    b.ttft_s, b.itl_s = 0.100, 0.020
    spec = WorkloadSpec(output_mu=3.4, output_sigma=0.2, max_output_tokens=48)  # ~30 tokens: 0.7 s per request
    # Sequential requests: the server's i-th request is the client's i-th record.
    cfg = LoadConfig(url=url, model="tiny", slice="free", concurrency=1, num_prompts=3, seed=11, workload=spec)
    result = await run_load(cfg)
    assert [r.success for r in result.records] == [True] * 3
    for r, walls, body in zip(result.records, b.token_walls, b.bodies, strict=True):
        assert r.ttft_s is not None and r.e2e_s is not None and r.tpot_s is not None
        # Against what the server actually did (the machine is shared: its own sleeps may run late):
        assert r.ttft_s >= 0.100
        assert r.ttft_s == pytest.approx(walls[0] - r.start_s, abs=0.005)
        server_gaps = [b2 - a for a, b2 in itertools.pairwise(walls)]
        assert len(r.itl_s) == len(server_gaps) == r.output_tokens - 1 == body["max_tokens"] - 1
        assert sum(r.itl_s) == pytest.approx(sum(server_gaps), abs=0.005)
        assert r.tpot_s == pytest.approx(sum(server_gaps) / len(server_gaps), abs=0.001)
        # ... and against the schedule, loosely.
        assert r.ttft_s == pytest.approx(0.100, abs=0.05)
        assert r.tpot_s == pytest.approx(0.020, abs=0.003)
        assert r.slice == "free" and r.model == "tiny" and r.server_address == "127.0.0.1"
        assert r.prompt_tokens > 0
    body = b.bodies[0]
    assert body["stream"] is True and body["ignore_eos"] is True and body["stream_options"] == {"include_usage": True}
    s = result.summary
    assert s["completed"] == 3 and s["mean_itl_ms"] == pytest.approx(20.0, abs=3)


async def test_completions_endpoint_and_missing_usage_fall_back_to_counted_tokens(sse_server: tuple[str, ServerBehaviour]) -> None:
    url, b = sse_server
    b.mode = "no_usage"
    cfg = LoadConfig(url=url, model="tiny", endpoint="completions", concurrency=1, num_prompts=2, seed=2)
    result = await run_load(cfg)
    assert all(r.success for r in result.records)
    assert [r.output_tokens for r in result.records] == [body["max_tokens"] for body in b.bodies]
    assert [r.prompt_tokens for r in result.records] == [len(body["prompt"].split()) for body in b.bodies]
    assert "prompt" in b.bodies[0] and "messages" not in b.bodies[0]


async def test_crlf_streams_parse_like_lf(sse_server: tuple[str, ServerBehaviour]) -> None:
    url, b = sse_server
    b.crlf = True
    result = await run_load(LoadConfig(url=url, model="tiny", concurrency=1, num_prompts=2))
    assert all(r.success for r in result.records)
    assert [r.output_tokens for r in result.records] == [body["max_tokens"] for body in b.bodies]


async def test_unreachable_endpoint_gives_all_failed_records() -> None:
    seen: list[RequestRecord] = []
    cfg = LoadConfig(url=f"http://127.0.0.1:{free_port()}", model="m", concurrency=3, num_prompts=6, connect_timeout_s=2)
    result = await run_load(cfg, observers=[seen.append])
    assert len(result.records) == 6 and len(seen) == 6
    assert not any(r.success for r in result.records)
    assert all(r.error and r.error.startswith("ClientConnectorError") for r in result.records)
    assert result.summary["completed"] == 0 and result.summary["failed"] == 6


@pytest.mark.parametrize(("mode", "error_type"), [("http500", "500"), ("garbage", "malformed_stream"),
                                                  ("cut", "incomplete_stream"), ("error_event", "server_error")])
async def test_broken_servers_give_failed_records(sse_server: tuple[str, ServerBehaviour], mode: str, error_type: str) -> None:
    url, b = sse_server
    b.mode = mode
    result = await run_load(LoadConfig(url=url, model="tiny", concurrency=2, num_prompts=3))
    assert len(result.records) == 3
    for r in result.records:
        assert not r.success
        assert r.error_type == error_type, r.error
    if mode == "http500":
        assert result.records[0].error == "500: boom"


async def test_request_timeout_is_a_failed_record(sse_server: tuple[str, ServerBehaviour]) -> None:
    url, b = sse_server
    b.ttft_s = 1.0
    result = await run_load(LoadConfig(url=url, model="tiny", concurrency=1, num_prompts=1, request_timeout_s=0.3))
    (r,) = result.records
    assert not r.success and r.error_type == "timeout"
    assert r.e2e_s is not None and 0.25 < r.e2e_s < 2.0
