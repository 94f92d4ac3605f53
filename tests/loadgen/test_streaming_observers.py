"""Stream observers hear of a request's first chunk when it arrives, not when the request ends."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry

from inferslice.exporters.requests import ClientMetricsRecorder
from inferslice.records import RequestRecord
from inferslice.testbed.loadgen import LoadConfig, WorkloadSpec, run_load

from .conftest import ServerBehaviour


class Spy:
    def __init__(self) -> None:
        self.first: list[tuple[float, float]] = []  # (wall time told, ttft)
        self.gaps: list[float] = []
        self.ended: list[float] = []

    def first_chunk(self, slice: str, model: str, server_address: str, ttft_s: float) -> None:
        self.first.append((time.time(), ttft_s))

    def next_chunk(self, slice: str, model: str, server_address: str, gap_s: float) -> None:
        self.gaps.append(gap_s)

    def __call__(self, record: RequestRecord) -> None:
        self.ended.append(time.time())


async def test_first_chunk_is_reported_while_the_stream_runs(sse_server: tuple[str, ServerBehaviour]) -> None:
    url, b = sse_server
    b.ttft_s, b.itl_s = 0.05, 0.02
    spec = WorkloadSpec(output_mu=3.4, output_sigma=0.2, max_output_tokens=48)  # ~30 tokens: ~0.6 s of stream
    spy = Spy()
    cfg = LoadConfig(url=url, model="tiny", slice="free", concurrency=1, num_prompts=2, seed=5, workload=spec)
    result = await run_load(cfg, [spy])
    assert len(spy.first) == 2 and len(spy.ended) == 2
    for (told, ttft), ended, rec in zip(spy.first, spy.ended, result.records, strict=True):
        assert ttft == pytest.approx(rec.ttft_s)
        assert ended - told > 0.3  # told long before the request finished
    assert len(spy.gaps) == sum(len(r.itl_s) for r in result.records)
    assert sum(spy.gaps) == pytest.approx(sum(sum(r.itl_s) for r in result.records))


async def test_recorder_counts_each_request_once_when_streamed(sse_server: tuple[str, ServerBehaviour]) -> None:
    url, b = sse_server
    b.ttft_s, b.itl_s = 0.01, 0.005
    registry = CollectorRegistry()
    recorder = ClientMetricsRecorder(registry)
    try:
        spec = WorkloadSpec(output_mu=2.5, output_sigma=0.2, max_output_tokens=20)
        cfg = LoadConfig(url=url, model="tiny", slice="free", concurrency=2, num_prompts=4, seed=2, workload=spec)
        result = await run_load(cfg, [recorder])
        labels = {"slice": "free", "gen_ai_operation_name": "chat", "gen_ai_request_model": "tiny", "server_address": "127.0.0.1"}
        count = registry.get_sample_value("gen_ai_client_operation_time_to_first_chunk_seconds_count", labels)
        gaps = registry.get_sample_value("gen_ai_client_operation_time_per_output_chunk_seconds_count", labels)
    finally:
        recorder.close()
    assert count == 4
    assert gaps == sum(len(r.itl_s) for r in result.records)
