"""The replica's OpenAI-compatible API and /metrics against the captured vLLM 0.32 fixtures."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from inferslice.testbed.engine.host import EngineHost
from inferslice.testbed.engine.model import EngineConfig

from .conftest import fast_topology

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
API = FIXTURES / "vllm-0.32.0-api"
# Families vLLM exposes that an emulator cannot mean anything by.
NOT_MODELLED = ("vllm:estimated_", "vllm:external_prefix_cache", "vllm:mm_cache", "vllm:prompt_tokens_cached_by_source")


def _ref_error() -> Any:
    # The capture ends with curl's status line after the JSON body.
    return json.JSONDecoder().raw_decode((API / "error-400.json").read_text())[0]


REF_ERROR = _ref_error()

@pytest.fixture
async def replica(base_port: int) -> AsyncIterator[tuple[EngineHost, str]]:
    top = fast_topology()
    top = top.model_copy(update={"model": "tiny"})  # the fixtures were captured with model id "tiny"
    host = EngineHost(top, "bristol", seed=7)
    await host.start("127.0.0.1", base_port + 200)
    await host.add_replica("free-0", "free", 0, 0.5, "127.0.0.1", base_port + 100, cold_start_s=0.0)
    try:
        yield host, f"http://127.0.0.1:{base_port + 100}"
    finally:
        await host.stop()


def sse_events(text: str) -> list[str]:
    assert text.endswith("\n\n")
    events = text[:-2].split("\n\n")
    assert all(e.startswith("data: ") for e in events)
    return [e[len("data: ") :] for e in events]


def shape(chunk: dict[str, Any]) -> tuple[Any, ...]:
    choices = chunk["choices"]
    inner = tuple(choices[0]) if choices else ()
    delta = tuple(choices[0].get("delta", {})) if choices else ()
    return tuple(chunk), inner, delta


def kind(chunk: dict[str, Any]) -> str:
    if not chunk["choices"]:
        return "usage"
    c = chunk["choices"][0]
    if "role" in c.get("delta", {}):
        return "role"
    return "finish" if c["finish_reason"] else "token"


async def post(url: str, body: Any, raw: bytes | None = None) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as s,
        s.post(url, data=raw if raw is not None else json.dumps(body).encode(), headers={"Content-Type": "application/json"}) as r,
    ):
        return r.status, await r.text()


@pytest.mark.parametrize(("path", "fixture"), [("/v1/chat/completions", "chat-stream.txt"), ("/v1/completions", "completions-stream.txt")])
async def test_sse_framing_matches_vllm(replica: tuple[EngineHost, str], path: str, fixture: str) -> None:
    _, url = replica
    ref_text = (API / fixture).read_text()
    ref = sse_events(ref_text)
    body: dict[str, Any] = {"model": "tiny", "max_tokens": 12, "stream": True, "ignore_eos": True}
    if "chat" in path:
        body |= {"messages": [{"role": "user", "content": "Hello there, how are you?"}], "stream_options": {"include_usage": True}}
    else:
        body |= {"prompt": "The quick brown fox"}
    status, text = await post(url + path, body)
    assert status == 200
    ours = sse_events(text)
    assert ours[-1] == "[DONE]" and ref[-1] == "[DONE]"
    ref_chunks = [json.loads(e) for e in ref[:-1]]
    our_chunks = [json.loads(e) for e in ours[:-1]]
    assert [kind(c) for c in our_chunks] == [kind(c) for c in ref_chunks]
    ref_shapes = {kind(c): shape(c) for c in ref_chunks}
    for c in our_chunks:
        assert shape(c) == ref_shapes[kind(c)], kind(c)
    # Same compact separators and field order: bytes per token event within 10% of vLLM's.
    ref_tok = [len(f"data: {e}\n\n".encode()) for e, c in zip(ref, ref_chunks, strict=False) if kind(c) == "token"]
    our_tok = [len(f"data: {e}\n\n".encode()) for e, c in zip(ours, our_chunks, strict=False) if kind(c) == "token"]
    ref_mean, our_mean = sum(ref_tok) / len(ref_tok), sum(our_tok) / len(our_tok)
    assert abs(our_mean - ref_mean) / ref_mean < 0.10, (our_mean, ref_mean)
    assert ", " not in ours[1] and '": ' not in ours[1]


async def test_nonstream_chat_has_vllm_fields(replica: tuple[EngineHost, str]) -> None:
    _, url = replica
    ref = json.loads((API / "chat-nonstream.json").read_text())
    status, text = await post(url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6})
    assert status == 200
    ours = json.loads(text)
    assert list(ours) == list(ref)
    assert list(ours["choices"][0]) == list(ref["choices"][0])
    assert list(ours["choices"][0]["message"]) == list(ref["choices"][0]["message"])
    assert ours["usage"]["completion_tokens"] == 6 and ours["choices"][0]["finish_reason"] == "length"


async def test_models_matches_vllm(replica: tuple[EngineHost, str]) -> None:
    _, url = replica
    ref = json.loads((API / "models.json").read_text())
    async with aiohttp.ClientSession() as s, s.get(url + "/v1/models") as r:
        ours = await r.json()
    assert list(ours) == list(ref) and list(ours["data"][0]) == list(ref["data"][0])
    assert ours["data"][0]["id"] == "tiny"


@pytest.mark.parametrize(
    ("body", "raw", "status"),
    [
        ({"messages": "bad"}, None, 400),
        (None, b"{not json", 400),
        ({"model": "tiny"}, None, 400),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, None, 400),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"}, None, 400),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, None, 400),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 100000}, None, 400),
        ({"messages": [{"role": "user", "content": "x"}], "model": "nope"}, None, 404),
        ([1, 2], None, 400),
    ],
)
async def test_malformed_requests_get_vllm_errors(replica: tuple[EngineHost, str], body: Any, raw: bytes | None, status: int) -> None:
    _, url = replica
    ref = REF_ERROR
    got_status, text = await post(url + "/v1/chat/completions", body, raw)
    assert got_status == status
    err = json.loads(text)
    assert list(err) == list(ref) and list(err["error"]) == list(ref["error"])
    assert err["error"]["code"] == status
    if status == 400:
        assert err["error"]["type"] == ref["error"]["type"]


async def test_validation_message_is_vllm_s(replica: tuple[EngineHost, str]) -> None:
    _, url = replica
    ref = REF_ERROR
    _, text = await post(url + "/v1/chat/completions", {"messages": "bad"})
    assert json.loads(text) == ref


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def bucket_edges(fam: Any) -> list[str]:
    return [s.labels["le"] for s in fam.samples if s.name.endswith("_bucket")][
        : len({s.labels["le"] for s in fam.samples if "le" in s.labels})
    ]


async def test_metric_surface_matches_vllm(base_port: int) -> None:
    top = fast_topology().model_copy(update={"model": "tiny"})
    # max_model_len decides the token-count buckets; the fixture's server had 256.
    host = EngineHost(top, "bristol", engine_defaults=EngineConfig(max_model_len=256))
    await host.start("127.0.0.1", base_port + 201)
    try:
        await host.add_replica("free-1", "free", 0, 0.5, "127.0.0.1", base_port + 101, cold_start_s=0.0)
        await _check_metric_surface(f"http://127.0.0.1:{base_port + 101}")
    finally:
        await host.stop()


async def _check_metric_surface(url: str) -> None:
    await post(url + "/v1/completions", {"prompt": "hello world", "max_tokens": 5})
    async with aiohttp.ClientSession() as s, s.get(url + "/metrics") as r:
        ours = families(await r.text())
    ref = families((FIXTURES / "vllm-0.32.0-cpu-metrics-after-bench.txt").read_text())
    wanted = [n for n in ref if n.startswith("vllm:") and not n.startswith(NOT_MODELLED) and not n.endswith("_created")]
    missing = [n for n in wanted if n not in ours]
    assert not missing
    for name in wanted:
        r, o = ref[name], ours[name]
        assert o.type == r.type, name
        assert o.documentation == r.documentation, name
        r_labels = {frozenset(k for k in s.labels if k != "le") for s in r.samples}
        o_labels = {frozenset(k for k in s.labels if k != "le") for s in o.samples}
        assert o_labels == r_labels, name
        if r.type == "histogram":
            assert bucket_edges(o) == bucket_edges(r), name
    assert ours["vllm:generation_tokens"].samples[0].value == 5
    assert ours["vllm:request_success"].samples[1].labels["finished_reason"] == "length"


async def test_health_is_503_while_cold_starting(replica: tuple[EngineHost, str], base_port: int) -> None:
    host, _ = replica
    await host.add_replica("free-9", "free", 0, 0.5, "127.0.0.1", base_port + 109, cold_start_s=0.4)
    url = f"http://127.0.0.1:{base_port + 109}"
    async with aiohttp.ClientSession() as s:
        async with s.get(url + "/health") as r:
            assert r.status == 503
        assert host.entry("free-9")["state"] == "starting"
        await asyncio.sleep(0.5)
        async with s.get(url + "/health") as r:
            assert r.status == 200
        assert host.entry("free-9")["state"] == "ready"
