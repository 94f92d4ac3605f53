"""Drive a load against one OpenAI-compatible endpoint: a closed loop of N workers (fixed
concurrency) or open-loop arrivals (Poisson, or gamma with vllm bench's burstiness), bounded by a
duration and/or a number of prompts. Every finished request becomes a ``RequestRecord`` handed
to each observer as it completes; ``run_load`` returns them with the vllm-bench-style summary.

Before the run the server is asked for the model's ``max_model_len`` (GET /v1/models) and, where it
has vLLM's /tokenize, its tokenizer's word costs (server_info): every request then fits the context
(pairs that would not are dropped and redrawn, as vLLM filters ShareGPT) and prompts have exactly
their drawn token count.

When the bound is reached no new request starts; requests in flight finish (each is bounded by
``request_timeout_s``) and the run's duration runs until the last one ends, as in vllm bench.
Observer exceptions propagate: an observer is our own code, and a bug there must not be hidden.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from inferslice.errors import ConfigError
from inferslice.records import RecordObserver, RequestRecord, StreamObserver

from .client import ENDPOINT_PATHS, RequestSettings, make_session, send_request
from .server_info import ModelInfo, TokenCosts, fetch_model_info, fetch_token_costs
from .summary import Goodput, summarize
from .workload import WORDS, Workload, WorkloadSpec


@dataclass(frozen=True)
class LoadConfig:
    url: str  # base URL of the serving front, http://host:port
    model: str
    slice: str = "default"  # RequestRecord.slice: the tier the load belongs to
    endpoint: str = "chat"  # chat | completions
    concurrency: int | None = None  # closed loop: N workers, each sends its next request when the last ends
    request_rate_rps: float | None = None  # open loop: mean arrival rate; math.inf sends everything at once
    burstiness: float = 1.0  # gamma shape of inter-arrival gaps (vllm bench): 1 = Poisson, < 1 burstier
    max_concurrency: int | None = None  # open loop only: cap on requests in flight (excess waits)
    # Open loop only: the rate over time, ((t_s, rate_rps), ...) linear between points and held after
    # the last; arrivals of the request_rate_rps process are kept with probability rate(t) / that rate
    # (thinning), so request_rate_rps must be the schedule's peak or above. Empty: a constant rate.
    rate_schedule: tuple[tuple[float, float], ...] = ()
    duration_s: float | None = None  # stop starting requests after this long
    num_prompts: int | None = None  # stop after this many requests
    num_warmups: int = 0  # requests sent (and discarded) before the measured run, like vllm bench
    seed: int = 0  # one seed for lengths, prompt text and arrivals
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    request_timeout_s: float = 300.0  # a queued request on a saturated tier can wait tens of seconds
    connect_timeout_s: float = 10.0  # an unreachable front must fail fast, not hold a worker
    goodput: Goodput | None = None
    percentiles: tuple[float, ...] = (99.0,)  # vllm bench --metric-percentiles default
    ignore_eos: bool = True
    # After duration_s, wait at most this long for requests in flight, then cancel them (they are
    # not recorded). None waits for every one, as vllm bench does; long answers can then stretch a
    # duration-bound step far past its nominal length.
    drain_timeout_s: float | None = None
    prompt_tokens_hint: bool = False  # send X-Prompt-Tokens (the engine emulator's exact-count extension)
    probe_server: bool = True  # read max_model_len and the tokenizer's word costs before the run (server_info)

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.request_rate_rps is None):
            raise ConfigError("give exactly one of concurrency or request_rate_rps", field="load")
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError("concurrency must be >= 1", field="concurrency")
        if self.request_rate_rps is not None and not self.request_rate_rps > 0:
            raise ConfigError("request rate must be > 0 (inf sends everything at once)", field="request_rate_rps")
        if self.rate_schedule:
            check_schedule(self.rate_schedule, self.request_rate_rps)
        if not self.burstiness > 0:
            raise ConfigError("burstiness must be > 0", field="burstiness")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError("max_concurrency must be >= 1", field="max_concurrency")
        if self.duration_s is None and self.num_prompts is None:
            raise ConfigError("give duration_s and/or num_prompts: the run must end by itself", field="load")
        if self.request_rate_rps == math.inf and self.num_prompts is None:
            raise ConfigError("an infinite request rate needs num_prompts", field="num_prompts")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ConfigError("duration_s must be > 0", field="duration_s")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise ConfigError("num_prompts must be >= 1", field="num_prompts")
        if self.drain_timeout_s is not None and self.drain_timeout_s < 0:
            raise ConfigError("drain_timeout_s must be >= 0", field="drain_timeout_s")
        if self.endpoint not in ENDPOINT_PATHS:
            raise ConfigError(f"endpoint must be one of {sorted(ENDPOINT_PATHS)}", field="endpoint")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"expected http://HOST:PORT, got {self.url!r}", field="url")

    @property
    def server_address(self) -> str:
        return urlsplit(self.url).hostname or ""

    def run_meta(self) -> dict[str, Any]:
        """The run-description keys of the vllm bench result."""
        rate: float | str = "inf" if self.request_rate_rps in (None, math.inf) else float(self.request_rate_rps or 0)
        return {
            "backend": "openai-chat" if self.endpoint == "chat" else "openai",
            "model_id": self.model,
            "request_rate": rate,
            "burstiness": self.burstiness,
            "max_concurrency": self.concurrency if self.concurrency is not None else self.max_concurrency,
            "slice": self.slice,
            "endpoint": ENDPOINT_PATHS[self.endpoint],
            "seed": self.seed,
        }


@dataclass
class LoadResult:
    records: list[RequestRecord]  # measured requests in completion order (warm-ups excluded)
    duration_s: float
    summary: dict[str, Any]
    queue_times_s: list[float] = field(default_factory=list)
    warmup_records: list[RequestRecord] = field(default_factory=list)
    cancelled: int = 0  # requests in flight when the drain timeout expired (not in records)

    @property
    def succeeded(self) -> int:
        return sum(r.success for r in self.records)


def arrival_offsets(rng: np.random.Generator, rate_rps: float, burstiness: float, n: int) -> np.ndarray:
    """Send times (s from start) of ``n`` requests: gamma gaps with mean 1/rate, shape ``burstiness``
    (vllm bench's model; shape 1 is a Poisson process). The first request waits one gap too."""
    if rate_rps == math.inf:
        return np.zeros(n)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate_rps * burstiness), size=n)
    return np.cumsum(gaps)


def check_schedule(schedule: Sequence[tuple[float, float]], peak_rps: float | None) -> None:
    if peak_rps is None or peak_rps == math.inf:
        raise ConfigError("a rate schedule needs a finite request_rate_rps (its peak)", field="rate_schedule")
    times = [t for t, _ in schedule]
    if times != sorted(times) or times[0] < 0:
        raise ConfigError("a rate schedule's times must be >= 0 and ascending", field="rate_schedule")
    if not any(r > 0 for _, r in schedule):
        raise ConfigError("a rate schedule needs a rate > 0 somewhere", field="rate_schedule")
    if any(not 0 <= r <= peak_rps for _, r in schedule):
        raise ConfigError(f"a rate schedule's rates must be within [0, {peak_rps:g}] (request_rate_rps)", field="rate_schedule")


def rate_at(schedule: Sequence[tuple[float, float]], t_s: float) -> float:
    """The schedule's rate at ``t_s``: linear between points, the first/last value outside them."""
    if t_s <= schedule[0][0]:
        return schedule[0][1]
    for (t0, r0), (t1, r1) in itertools.pairwise(schedule):
        if t_s <= t1:
            return r0 if t1 == t0 else r0 + (r1 - r0) * (t_s - t0) / (t1 - t0)
    return schedule[-1][1]


def thin(rng: np.random.Generator, offsets: np.ndarray, schedule: Sequence[tuple[float, float]], peak_rps: float) -> np.ndarray:
    """Keep each arrival of the peak-rate process with probability rate(t) / peak (Lewis-Shedler
    thinning: the kept ones are a Poisson process of the schedule's rate when burstiness is 1)."""
    keep = rng.random(len(offsets)) * peak_rps < np.array([rate_at(schedule, float(t)) for t in offsets])
    return offsets[keep]


class _Run:
    def __init__(
        self, config: LoadConfig, observers: Sequence[RecordObserver], stop: asyncio.Event | None, costs: TokenCosts | None = None
    ) -> None:
        self.config = config
        self.observers = list(observers)
        self.stop = stop or asyncio.Event()
        self.workload = Workload(config.workload, config.seed, costs)
        streams: tuple[StreamObserver, ...] = tuple(o for o in self.observers if isinstance(o, StreamObserver))  # type: ignore[misc]
        self.settings = _settings(config, streams)
        self.records: list[RequestRecord] = []
        self.queue_times: list[float] = []
        self.next_index = 0
        self.in_flight = 0
        self.cancelled = 0

    def _deadline_passed(self, t0: float) -> bool:
        d = self.config.duration_s
        return self.stop.is_set() or (d is not None and time.perf_counter() - t0 >= d)

    def _take_index(self) -> int | None:
        n = self.config.num_prompts
        if n is not None and self.next_index >= n:
            return None
        i = self.next_index
        self.next_index += 1
        return i

    async def _send(self, session: Any, index: int, queue_time_s: float | None) -> None:
        self.in_flight += 1
        try:
            record = await send_request(session, self.settings, self.workload.request(index))
        finally:
            self.in_flight -= 1
        self._finish(record, queue_time_s)

    async def wait(self, tasks: Sequence[asyncio.Future[Any]], t0: float) -> None:
        """Wait for ``tasks``; with a drain timeout, cancel what is still running that long after the deadline."""
        cfg = self.config
        if cfg.drain_timeout_s is None or cfg.duration_s is None or not tasks:
            await asyncio.gather(*tasks)
            return
        timeout = max(t0 + cfg.duration_s - time.perf_counter(), 0.0) + cfg.drain_timeout_s
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        if pending:
            self.cancelled = self.in_flight
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    def _finish(self, record: RequestRecord, queue_time_s: float | None) -> None:
        self.records.append(record)
        if queue_time_s is not None:
            self.queue_times.append(queue_time_s)
        for observer in self.observers:
            observer(record)

    async def closed_loop(self, session: Any, t0: float) -> None:
        async def worker() -> None:
            while not self._deadline_passed(t0):
                i = self._take_index()
                if i is None:
                    return
                await self._send(session, i, None)

        await self.wait([asyncio.ensure_future(worker()) for _ in range(self.config.concurrency or 1)], t0)

    async def open_loop(self, session: Any, t0: float) -> None:
        cfg = self.config
        limit = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None
        rng = self.workload.arrival_rng
        block = 1024  # arrivals are drawn in blocks so an open-ended run needs no upfront count
        rate = cfg.request_rate_rps or math.inf

        def draw(n: int, base: float) -> np.ndarray:
            while True:  # a block may be thinned to nothing where the schedule's rate is ~0
                raw = arrival_offsets(rng, rate, cfg.burstiness, n) + base
                kept = thin(rng, raw, cfg.rate_schedule, rate) if cfg.rate_schedule else raw
                if len(kept):
                    return kept
                if cfg.duration_s is not None and float(raw[-1]) > cfg.duration_s:
                    return np.array([cfg.duration_s])  # wakes the loop at the deadline, which then ends it
                base = float(raw[-1])

        offsets = draw(cfg.num_prompts or block, 0.0)
        base = 0.0
        tasks: set[asyncio.Task[None]] = set()

        async def one(i: int, due: float) -> None:
            if limit is not None:
                async with limit:
                    await self._send(session, i, max(time.perf_counter() - due, 0.0))
            else:
                await self._send(session, i, 0.0)

        k = 0
        while True:
            if k == len(offsets):
                base = float(offsets[-1])
                offsets = draw(block, base)
                k = 0
            due = t0 + float(offsets[k])
            delay = due - time.perf_counter()
            if delay > 0:
                try:
                    await asyncio.wait_for(self.stop.wait(), timeout=delay)
                except TimeoutError:
                    pass
            if self._deadline_passed(t0):
                break
            i = self._take_index()
            if i is None:
                break
            task = asyncio.create_task(one(i, due))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            k += 1
        await self.wait(list(tasks), t0)


def _settings(config: LoadConfig, stream_observers: tuple[StreamObserver, ...] = ()) -> RequestSettings:
    return RequestSettings(config.url, config.model, config.slice, config.endpoint, config.ignore_eos, config.server_address,
                           config.prompt_tokens_hint, stream_observers)


async def fit_to_server(config: LoadConfig, session: Any) -> tuple[LoadConfig, ModelInfo | None, TokenCosts | None]:
    """The config with its workload bounded by the server's context, the model card, the word costs."""
    if not config.probe_server:
        return config, None, None
    info = await fetch_model_info(session, config.url, config.model)
    costs = await fetch_token_costs(session, config.url, config.model, config.endpoint, WORDS)
    if info is None or info.max_model_len is None:
        return config, info, costs
    room = info.max_model_len - costs.template_tokens
    ctx = room if config.workload.context_tokens is None else min(room, config.workload.context_tokens)
    return dataclasses.replace(config, workload=dataclasses.replace(config.workload, context_tokens=ctx)), info, costs


async def _warm_up(config: LoadConfig, session: Any, costs: TokenCosts | None = None) -> list[RequestRecord]:
    if config.num_warmups <= 0:
        return []
    # Warm-ups use their own seed stream so the measured requests stay identical with or without them.
    wl = Workload(config.workload, config.seed + 1_000_003, costs)
    settings = _settings(config)
    width = config.concurrency or config.max_concurrency or config.num_warmups
    sem = asyncio.Semaphore(width)

    async def one(i: int) -> RequestRecord:
        async with sem:
            return await send_request(session, settings, wl.request(i))

    return list(await asyncio.gather(*(one(i) for i in range(config.num_warmups))))


async def run_load(config: LoadConfig, observers: Sequence[RecordObserver] = (), stop: asyncio.Event | None = None) -> LoadResult:
    """Run one load to its bound (or until ``stop`` is set) and summarise it. Never raises for
    server or network failures: those are failed records."""
    async with make_session(config.connect_timeout_s, config.request_timeout_s) as session:
        config, info, costs = await fit_to_server(config, session)
        run = _Run(config, observers, stop, costs)
        warmups = await _warm_up(config, session, costs)
        t0 = time.perf_counter()
        if config.concurrency is not None:
            await run.closed_loop(session, t0)
        else:
            await run.open_loop(session, t0)
        duration = time.perf_counter() - t0
    meta = config.run_meta()
    meta["num_prompts"] = len(run.records)
    meta["dataset_name"] = config.workload.dataset
    meta["max_model_len"] = info.max_model_len if info is not None else None
    meta["context_filter"] = "drop"  # over-long pairs are dropped and redrawn, never truncated
    meta["prompt_token_costs"] = costs.source if costs is not None else "rule"
    if config.drain_timeout_s is not None:
        meta["cancelled"] = run.cancelled
    summary = summarize(run.records, duration, goodput=config.goodput, percentiles=config.percentiles, meta=meta,
                        queue_times_s=run.queue_times)
    return LoadResult(run.records, duration, summary, run.queue_times, warmups, run.cancelled)
