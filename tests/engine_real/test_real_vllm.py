"""One short real-engine run (CI's real-vLLM test): a real vLLM (CPU build, tiny random-weight Llama)
as the free tier's replica behind the same tier front, on loopback.

Needs the vLLM venv (``testbed/vllm/install_cpu.sh``; ``INFERSLICE_VLLM_VENV`` overrides its place);
skipped with the reason when it is missing. About 2 minutes on 2 cores (vLLM ready in ~60 s).

Checks, each against the engine's own /metrics read with prometheus_client's parser (not ours):
- every engine family the exporter re-exports equals the engine's after merging, exactly;
- client TTFT and TPOT, one request at a time (each paired with the engine's own value from its
  histogram's _sum), agree with vLLM's histograms: TPOT within one bucket at P50 and P90; TTFT never
  faster than the engine's, request by request, and its median within one bucket at the SLO's
  resolution (the P90's upper offset, set by the front, HTTP and the API server on 2 shared cores,
  is reported);
- concurrency past --max-num-seqs queues in the engine (requests waiting, queue time recorded).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from inferslice import metric_names as mn
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.engine import EngineSettings, EngineSource, StaticDiscovery, Target
from inferslice.testbed.addressing import AddressPlan
from inferslice.testbed.engine.host import EngineHost
from inferslice.testbed.loadgen import LoadConfig, WorkloadSpec, run_load
from inferslice.testbed.serving.front import TierFront
from inferslice.testbed.vllm.process import VllmSettings
from inferslice.topology import load_topology, topology_from_dict

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("INFERSLICE_VLLM_VENV", ROOT / ".venv-vllm"))
MAX_NUM_SEQS = 2
CONCURRENCY = 6  # past --max-num-seqs: the engine queues
# vLLM's TTFT bucket edges from 0.1 s up (CONTRACTS.md), the scale the 0.5 s SLO is judged at.
SLO_SCALE_EDGES_S = (0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, math.inf)
CALM_PROMPTS = 12  # the sequential phase: enough for a P90, a few seconds of the tiny model
WARMUP = 2  # sequential requests discarded after the queueing phase

pytestmark = pytest.mark.slow
if not (VENV / "bin" / "python").exists() or not (VENV / "tiny-llama" / "config.json").exists():
    pytestmark = [pytest.mark.slow, pytest.mark.skip(reason=f"no vLLM venv at {VENV}: run testbed/vllm/install_cpu.sh")]


def _topology() -> Any:
    data = load_topology().model_dump(mode="json")
    data["model"] = "tiny"
    for t in data["tiers"]:
        if t["name"] == "free":
            t["max_ongoing_requests"] = 16  # the front admits everything: the queue forms in vLLM
    return topology_from_dict(data)


def _base_port() -> int:
    for base in range(31000, 60000, 370):
        ports = [base + i for i in range(3)] + [base + 100 + i for i in range(60)] + [base + 200 + i for i in range(3)]
        ok = True
        for p in ports:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port range")


@dataclass
class Bed:
    top: Any
    plan: AddressPlan
    front: TierFront
    replica_url: str


@pytest.fixture
async def bed(tmp_path: Path) -> AsyncIterator[Bed]:
    top = _topology()
    plan = AddressPlan(top, "loopback", base_port=_base_port())
    settings = VllmSettings(python=str(VENV / "bin" / "python"), model=str(VENV / "tiny-llama"), served_model_name="tiny",
                            max_model_len=256, max_num_seqs=MAX_NUM_SEQS)
    pop, _ = plan.slot_of("free", 0)
    host = EngineHost(top, pop, engines={"free": "vllm"}, vllm=settings, log_dir=str(tmp_path))
    await host.start(plan.host_admin(pop).host, plan.host_admin(pop).port)
    front = TierFront(top, "free", plan=plan, state_dir=str(tmp_path), fixed_replicas=1, tick_s=0.5)
    ep = plan.front("free")
    await front.start(ep.host, ep.port)
    try:
        for _ in range(480):  # vLLM's real cold start
            reps = front.state()["replicas"]
            if reps and reps[0]["state"] == "ready":
                break
            await asyncio.sleep(0.5)
        else:
            raise AssertionError(f"vLLM not ready: {(tmp_path / 'vllm-free-0.log').read_text()[-3000:]}")
        yield Bed(top, plan, front, plan.replica("free", 0).url)
    finally:
        await front.stop(release_replicas=True)
        await host.stop()


def _own(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The engine's samples by name, parsed by prometheus_client (independent of the exporter's parser)."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("engine", "model_name")))
            out.setdefault(s.name, {})[labels] = s.value
    return out


def _cum(own: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str) -> dict[float, float]:
    return {float(dict(k)["le"]): v for k, v in own[name + "_bucket"].items()}


async def test_real_vllm_behind_the_front(bed: Bed) -> None:
    url = bed.plan.front("free").url
    waiting_seen = 0.0
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal waiting_seen
        async with aiohttp.ClientSession() as s:
            while not done.is_set():
                async with s.get(bed.replica_url + "/metrics") as r:
                    own = _own(await r.text())
                waiting_seen = max(waiting_seen, sum(own["vllm:num_requests_waiting"].values()))
                await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    spec = WorkloadSpec(dataset="random", random_input_len=32, random_output_len=64, random_range_ratio=0.5)
    result = await run_load(LoadConfig(url=url, model="tiny", concurrency=CONCURRENCY, num_prompts=30, workload=spec, seed=4))
    done.set()
    await watcher
    s = result.summary
    assert s["failed"] == 0, s["errors_by_type"]
    assert s["max_model_len"] == 256 and s["prompt_token_costs"] == "tokenize"
    # Queue-limited at the engine: more requests than --max-num-seqs wait inside vLLM. The waiting gauge
    # sampled every 20 ms can miss a queue that the tiny model drains in tens of ms (seen in CI: 0), so
    # the proof is the queue time vLLM recorded, below; the gauge's peak is reported.

    async with aiohttp.ClientSession() as sess, sess.get(bed.replica_url + "/metrics") as r:
        text = await r.text()
    own = _own(text)
    source = EngineSource([StaticDiscovery((Target(url=bed.replica_url + "/metrics", slice="free", pop="bristol", replica="free-0"),))],
                          bed.top, EngineSettings(timeout_s=5.0))
    reg = CollectorRegistry()
    reg.register(GuardedCollector([source]))
    v = reg.get_sample_value
    assert v(mn.TARGET_UP, {"slice": "free", "pop": "bristol", "replica": "free-0", "target": bed.replica_url + "/metrics"}) == 1.0
    # Every re-exported engine family equals the engine's own series, exactly (one replica: merged = its own).
    hist = {mn.ENGINE_TTFT: "vllm:time_to_first_token_seconds", mn.ENGINE_ITL: "vllm:inter_token_latency_seconds",
            mn.ENGINE_TPOT: "vllm:request_time_per_output_token_seconds", mn.ENGINE_E2E: "vllm:e2e_request_latency_seconds",
            mn.ENGINE_QUEUE_TIME: "vllm:request_queue_time_seconds"}
    compared = 0
    for ours, theirs in hist.items():
        for edge, count in _cum(own, theirs).items():
            le = "+Inf" if edge == math.inf else repr(edge)
            assert v(ours + "_bucket", {"slice": "free", "le": le}) == count, (ours, le)
            compared += 1
        assert v(ours + "_count", {"slice": "free"}) == own[theirs + "_count"][()]
        assert v(ours + "_sum", {"slice": "free"}) == own[theirs + "_sum"][()]
    counters = {mn.ENGINE_PROMPT_TOKENS: "vllm:prompt_tokens_total", mn.ENGINE_GENERATION_TOKENS: "vllm:generation_tokens_total",
                mn.ENGINE_PREEMPTIONS: "vllm:num_preemptions_total"}
    for ours, theirs in counters.items():
        assert v(ours, {"slice": "free"}) == own[theirs][()], ours
    for labels, count in own["vllm:request_success_total"].items():
        assert v(mn.ENGINE_REQUEST_SUCCESS, {"slice": "free", "finished_reason": dict(labels)["finished_reason"]}) == count
    assert v(mn.ENGINE_RUNNING, {"slice": "free"}) == own["vllm:num_requests_running"][()]
    assert v(mn.ENGINE_WAITING, {"slice": "free"}) == own["vllm:num_requests_waiting"][()]
    assert v(mn.ENGINE_KV_CACHE_USAGE, {"slice": "free", "stat": "max"}) == own["vllm:kv_cache_usage_perc"][()]
    assert compared > 50
    # With 6 clients and 2 sequences at a time, requests spend a good part of their life queued inside
    # vLLM (without a queue the share would be the scheduler's ~ms, near 0).
    queued_share = own["vllm:request_queue_time_seconds_sum"][()] / own["vllm:e2e_request_latency_seconds_sum"][()]
    print(f"real-vLLM queue: waiting peak {waiting_seen:.0f}, queued share of e2e {queued_share:.2f}")
    assert queued_share >= 0.2, queued_share

    assert own["vllm:time_to_first_token_seconds_count"][()] == len(result.records)

    # Client TTFT/TPOT against vLLM's histograms, within bucket resolution, in a second, sequential
    # phase: under the queueing phase above the client also waits for vLLM's API server (chat
    # template, tokenising, streaming: not in vLLM's TTFT, which starts at the engine's arrival time)
    # on 2 shared cores, and that wait, not the engine, set the client's percentiles (seen: client P50
    # 382 ms, engine <= 20 ms). One request at a time, the engine's histogram _sum grows by exactly that
    # request's TTFT/TPOT, so each client value is paired with the engine's own; the first WARMUP
    # requests after the queueing phase are discarded (their path still drains the burst).
    pairs: dict[str, list[tuple[float, float]]] = {"ttft": [], "tpot": []}
    before = _own(text)
    calm_cum: dict[str, list[tuple[float, float]]] = {}
    calm_start = before
    for i in range(WARMUP + CALM_PROMPTS):
        one = await run_load(LoadConfig(url=url, model="tiny", concurrency=1, num_prompts=1, workload=spec, seed=100 + i))
        assert one.summary["failed"] == 0, one.summary["errors_by_type"]
        for _ in range(20):  # the engine records a request's histograms as it finishes it: at most a moment late
            async with aiohttp.ClientSession() as sess, sess.get(bed.replica_url + "/metrics") as r:
                after = _own(await r.text())
            if after["vllm:e2e_request_latency_seconds_count"][()] > before["vllm:e2e_request_latency_seconds_count"][()]:
                break
            await asyncio.sleep(0.05)
        if i == WARMUP - 1:
            calm_start = after
        if i >= WARMUP:
            [rec] = one.records
            for key, name, client in (("ttft", "vllm:time_to_first_token_seconds", rec.ttft_s),
                                      ("tpot", "vllm:request_time_per_output_token_seconds", rec.tpot_s)):
                assert after[name + "_count"][()] - before[name + "_count"][()] == 1, name
                assert client is not None
                pairs[key].append((client, after[name + "_sum"][()] - before[name + "_sum"][()]))
        before = after
    for key, name in (("ttft", "vllm:time_to_first_token_seconds"), ("tpot", "vllm:request_time_per_output_token_seconds")):
        start_cum = _cum(calm_start, name)
        calm_cum[key] = sorted((edge, count - start_cum[edge]) for edge, count in _cum(before, name).items())
    figures: dict[str, Any] = {}
    for key, cum in calm_cum.items():
        xs = sorted(c for c, _ in pairs[key])
        total = cum[-1][1]
        assert total == len(xs) == CALM_PROMPTS
        edges = [e for e, _ in cum]
        for q in (0.5, 0.9, 0.99):
            engine_idx = next(i for i, (_, c) in enumerate(cum) if c >= q * total)
            client = xs[min(len(xs) - 1, math.ceil(q * len(xs)) - 1)]
            client_idx = next(i for i, e in enumerate(edges) if client <= e)
            figures[f"{key}_p{int(q * 100)}"] = {"client_s": client, "engine_bucket_le": edges[engine_idx],
                                                 "bucket_offset": client_idx - engine_idx}
        figures[f"{key}_mean_client_s"] = sum(xs) / len(xs)
        figures[f"{key}_mean_engine_s"] = sum(e for _, e in pairs[key]) / len(xs)
    # The path vLLM's TTFT leaves out, request by request: client TTFT minus the engine's own TTFT.
    path = sorted(c - e for c, e in pairs["ttft"])
    figures["ttft_path_s"] = {"min": path[0], "p50": path[len(path) // 2], "p90": path[math.ceil(0.9 * len(path)) - 1], "max": path[-1]}
    print("real-vLLM figures:", json.dumps({**figures, "families_compared": compared, "waiting_peak": waiting_seen}))
    # Lower bound, per request and exact: the client never sees the first token before the engine made it.
    assert path[0] >= 0.0, pairs["ttft"]
    for key in ("tpot_p50", "tpot_p90"):
        assert abs(figures[key]["bucket_offset"]) <= 1, (key, figures[key])
    # TTFT upper bound at the resolution the SLO is judged at (vLLM's buckets from 0.1 s up, everything
    # faster one bucket): the median agrees within one bucket. The tiny model's ~5 ms TTFT sits far
    # below the path (seen one request at a time: 25-60 ms mean), which spans several of vLLM's fine
    # buckets under 100 ms, so the fine scale cannot bound it. The P90 is reported, not asserted: on
    # 2 shared cores the path's P90 has reached 273 ms (CI), two SLO-scale buckets.
    coarse = SLO_SCALE_EDGES_S
    for key in ("ttft_p50", "ttft_p90"):
        fig = figures[key]
        assert fig["bucket_offset"] >= -1, (key, fig)
        client_coarse = next(i for i, e in enumerate(coarse) if fig["client_s"] <= e)
        engine_coarse = next(i for i, e in enumerate(coarse) if fig["engine_bucket_le"] <= e)
        print(f"real-vLLM {key}: SLO-scale bucket offset {client_coarse - engine_coarse}")
        if key == "ttft_p50":
            assert 0 <= client_coarse - engine_coarse <= 1, (key, fig)
