"""Every request fits the model's context (read from /v1/models), the random dataset, token-exact
prompts from /tokenize, and errors grouped by status and normalised message."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from inferslice.common.ports import free_port
from inferslice.errors import ConfigError
from inferslice.records import RequestRecord
from inferslice.testbed.engine.host import EngineHost
from inferslice.testbed.engine.model import EngineConfig
from inferslice.testbed.loadgen import LoadConfig, Workload, WorkloadSpec, run_load
from inferslice.testbed.loadgen.server_info import FALLBACK_TEMPLATE_TOKENS, TokenCosts, fetch_token_costs, parse_models
from inferslice.testbed.loadgen.summary import error_group, summarize
from inferslice.testbed.loadgen.workload import WORDS, synthetic_prompt
from inferslice.topology import load_topology

API = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32.0-api"


def test_max_model_len_read_from_the_captured_models_listing() -> None:
    info = parse_models(json.loads((API / "models.json").read_text()), "tiny")
    assert (info.id, info.max_model_len) == ("tiny", 256)
    assert parse_models(json.loads((API / "models.json").read_text()), None).id == "tiny"
    with pytest.raises(ValueError, match="not served"):
        parse_models(json.loads((API / "models.json").read_text()), "llama")


def test_sharegpt_like_pairs_over_the_context_are_dropped_not_truncated() -> None:
    spec = WorkloadSpec(context_tokens=256 - 14)
    wl = Workload(spec, seed=3)
    pairs = [wl.lengths(i) for i in range(3000)]
    assert all(p + o <= 242 for p, o in pairs)
    assert all(p >= 4 and o >= 4 for p, o in pairs)
    # Dropping keeps the shape below the limit: no spike of pairs sitting exactly at it (truncation would pile them there).
    at_limit = sum(p + o == 242 for p, o in pairs)
    assert at_limit < 0.01 * len(pairs)
    # Requests that fitted anyway are the same as without the limit (the filter only removes).
    unbounded = [Workload(WorkloadSpec(), seed=3).lengths(i) for i in range(3000)]
    fitting = [pq for pq in unbounded if sum(pq) <= 242]
    assert pairs[:100] == fitting[:100]


def test_default_workload_is_unchanged_by_the_context_filter() -> None:
    # The ShareGPT filter's 2048-token total never binds with 1024-token caps per side.
    a = [Workload(WorkloadSpec(), seed=1).lengths(i) for i in range(500)]
    b = [Workload(WorkloadSpec(context_tokens=8192), seed=1).lengths(i) for i in range(500)]
    assert a == b


def test_random_dataset_lengths_as_vllm_random_dataset() -> None:
    fixed = Workload(WorkloadSpec(dataset="random", random_input_len=32, random_output_len=16), seed=0)
    assert {fixed.lengths(i) for i in range(50)} == {(32, 16)}
    spread = Workload(WorkloadSpec(dataset="random", random_input_len=100, random_output_len=20, random_range_ratio=0.5), seed=0)
    pairs = [spread.lengths(i) for i in range(2000)]
    assert min(p for p, _ in pairs) == 50 and max(p for p, _ in pairs) == 150
    assert min(o for _, o in pairs) == 10 and max(o for _, o in pairs) == 30
    capped = Workload(WorkloadSpec(dataset="random", random_input_len=100, random_output_len=20, random_range_ratio=0.5,
                                   context_tokens=120), seed=0)
    assert all(p + o <= 120 for p, o in (capped.lengths(i) for i in range(500)))


def test_nothing_fits_is_a_config_error_naming_the_flag() -> None:
    with pytest.raises(ConfigError) as err:
        WorkloadSpec(dataset="random", context_tokens=242)  # vLLM's defaults: 1024 in + 128 out
    assert err.value.field == "random-input-len"
    with pytest.raises(ConfigError):
        WorkloadSpec(dataset="random", random_range_ratio=1.0)
    with pytest.raises(ConfigError):
        WorkloadSpec(dataset="sharegpt")


def test_prompt_built_to_the_measured_token_count() -> None:
    import numpy as np

    first = {w: 1 + (i % 3) for i, w in enumerate(WORDS)}
    rest = {w: 1 + (i % 4) for i, w in enumerate(WORDS)}
    costs = TokenCosts(first, rest, 14, "tokenize")
    for n in (1, 5, 37, 200):
        text = synthetic_prompt(np.random.default_rng(n), n, costs)
        assert costs.cost(text.split(" ")) == n
    # Under the one-token-per-word rule the text is what it always was.
    rule = synthetic_prompt(np.random.default_rng(9), 20, TokenCosts())
    assert rule == synthetic_prompt(np.random.default_rng(9), 20)
    assert len(rule.split(" ")) == 20


def _tokenizer_app(costs: dict[str, int], template: int) -> web.Application:
    """A /tokenize that counts like a word-splitting BPE: each word's cost, plus a template around chat messages."""

    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        text = body["messages"][0]["content"] if "messages" in body else body["prompt"]
        n = sum(costs.get(w, 1) for w in text.split(" ") if w)
        return web.json_response({"count": n + (template if "messages" in body else 0), "max_model_len": 256, "tokens": []})

    app = web.Application()
    app.router.add_post("/tokenize", tokenize)
    return app



@pytest.fixture
async def tokenizer_server() -> AsyncIterator[tuple[str, dict[str, int]]]:
    costs = {w: 1 + (i % 3) for i, w in enumerate(WORDS)}
    runner = web.AppRunner(_tokenizer_app(costs, template=14))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}", costs
    finally:
        await runner.cleanup()


async def test_word_costs_measured_with_tokenize(tokenizer_server: tuple[str, dict[str, int]]) -> None:
    url, truth = tokenizer_server
    async with aiohttp.ClientSession() as s:
        costs = await fetch_token_costs(s, url, "tiny", "chat", WORDS)
        assert costs.source == "tokenize" and costs.template_tokens == 14
        assert dict(costs.first) == truth and dict(costs.rest) == truth
        plain = await fetch_token_costs(s, url, "tiny", "completions", WORDS)
        assert plain.template_tokens == 0
        none = await fetch_token_costs(s, url.replace(str(url.rsplit(":", 1)[1]), str(free_port())), "tiny", "chat", WORDS)
    assert none.source == "rule" and none.template_tokens == FALLBACK_TEMPLATE_TOKENS


@pytest.fixture
async def small_context_replica() -> AsyncIterator[str]:
    top = load_topology().model_copy(update={"model": "tiny"})
    host = EngineHost(top, "bristol", seed=2, engine_defaults=EngineConfig(max_model_len=300))
    await host.start("127.0.0.1", free_port())
    port = free_port()
    await host.add_replica("free-0", "free", 0, 0.5, "127.0.0.1", port, cold_start_s=0.0)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await host.stop()


async def test_load_against_a_short_context_emulator_never_overflows(small_context_replica: str) -> None:
    fast = WorkloadSpec(output_mu=2.5, output_sigma=0.5)
    result = await run_load(LoadConfig(url=small_context_replica, model="tiny", concurrency=8, num_prompts=60, workload=fast,
                                       prompt_tokens_hint=True))
    assert result.summary["max_model_len"] == 300
    assert result.summary["failed"] == 0, result.summary["errors_by_type"]
    assert all(r.prompt_tokens + r.output_tokens <= 300 - FALLBACK_TEMPLATE_TOKENS for r in result.records)
    # Without the probe the same workload overflows the 300-token context (the failure this guards against).
    blind = await run_load(LoadConfig(url=small_context_replica, model="tiny", concurrency=8, num_prompts=60, workload=fast,
                                      prompt_tokens_hint=True, probe_server=False))
    assert blind.summary["failed"] > 0
    assert set(blind.summary["errors_by_status"]) == {"400"}
    assert len(blind.summary["errors_by_type"]) == 1  # one normalised message, whatever the numbers


def _failed(error: str) -> RequestRecord:
    return RequestRecord(slice="s", start_s=0.0, success=False, ttft_s=None, e2e_s=0.1, prompt_tokens=0, output_tokens=0,
                         error=error)


def test_errors_grouped_by_status_and_normalised_message() -> None:
    ctx = ("400: This model's maximum context length is 256 tokens. However, your request has {} input tokens and requests "
           "{} output tokens. Please reduce the length of the input or output.")
    records = [_failed(ctx.format(300 + i, 16 * i)) for i in range(5)]
    records += [_failed("400: max_tokens=300 cannot be greater than max_model_len=256. Please request fewer output tokens."),
                _failed("400: max_tokens=999 cannot be greater than max_model_len=256. Please request fewer output tokens."),
                _failed("timeout: no complete response within the request timeout"),
                _failed("ClientConnectorError: Cannot connect to host 10.0.0.1:8000 ssl:default [Connect call failed]")]
    s = summarize(records, 1.0)
    assert s["errors_by_status"] == {"400": 7, "ClientConnectorError": 1, "timeout": 1}
    assert s["errors_by_type"] == {
        "400: This model's maximum context length is N tokens. However, your request has N input tokens and requests N output "
        "tokens. Please reduce the length of the input or output.": 5,
        "400: max_tokens=N cannot be greater than max_model_len=N. Please request fewer output tokens.": 2,
        "ClientConnectorError: Cannot connect to host N.N.N.N:N ssl:default [Connect call failed]": 1,
        "timeout: no complete response within the request timeout": 1,
    }
    validation = "400: 1 validation error:\n  {'type': 'list_type', 'loc': 'body.messages', 'msg': 'x', 'input': 'bad'}"
    assert error_group(validation) == ("400", "400: N validation error: {'type': 'list_type', 'loc': 'body.messages', 'msg': 'x', "
                                              "'input': ...}")
    assert error_group(None) == ("unknown", "unknown")


def test_records_keep_the_full_error_text() -> None:
    r = _failed("400: max_tokens=300 cannot be greater than max_model_len=256.")
    assert r.error is not None and "300" in r.error  # only the summary groups; the record is untouched


