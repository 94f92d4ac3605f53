"""Per-replica engine statistics with vLLM's bucket boundaries (pure data, no prometheus_client).

The performance model fills these; the /metrics collector renders them into vLLM's exact families.
Bucket edges are copied from vLLM 0.32 (CONTRACTS.md and the captured fixtures).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS_S: tuple[float, ...] = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ITERATION_TOKENS_BUCKETS: tuple[float, ...] = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PREEMPTION_BUCKETS: tuple[float, ...] = (1, 2, 3, 4, 5, 10, 20)
PARAMS_N_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 20)

FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")


def build_1_2_5_buckets(max_value: int) -> tuple[float, ...]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up to max_model_len."""
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(out)
            out.append(float(value))
        exponent += 1


@dataclass
class Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # per bucket, the last one is +Inf
    total: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        # Prometheus buckets are "le": a value on an edge belongs to that edge's bucket.
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            out.append((repr(float(bound)), float(running)))
        out.append(("+Inf", float(running + self.counts[-1])))
        return out


@dataclass
class ReplicaStats:
    """Counters and histograms of one replica, as vLLM's V1 logger keeps them."""

    max_model_len: int
    created_s: float = 0.0  # wall-clock creation time, rendered as the families' _created samples
    prompt_tokens: int = 0
    prompt_tokens_cached: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    success: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FINISHED_REASONS, 0))
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS_S))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS_S))
    tpot: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS_S))
    e2e: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS_S))
    queue: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS_S))
    prefill: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS_S))
    decode: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS_S))
    inference: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS_S))
    iteration_tokens: Histogram = field(default_factory=lambda: Histogram(ITERATION_TOKENS_BUCKETS))
    request_preemptions: Histogram = field(default_factory=lambda: Histogram(PREEMPTION_BUCKETS))
    params_n: Histogram = field(default_factory=lambda: Histogram(PARAMS_N_BUCKETS))
    # Token-count histograms depend on max_model_len, as in vLLM.
    request_prompt_tokens: Histogram = field(init=False)
    request_generation_tokens: Histogram = field(init=False)
    request_max_generation_tokens: Histogram = field(init=False)
    params_max_tokens: Histogram = field(init=False)
    prefill_kv_computed_tokens: Histogram = field(init=False)

    def __post_init__(self) -> None:
        b = build_1_2_5_buckets(self.max_model_len)
        self.request_prompt_tokens = Histogram(b)
        self.request_generation_tokens = Histogram(b)
        self.request_max_generation_tokens = Histogram(b)
        self.params_max_tokens = Histogram(b)
        self.prefill_kv_computed_tokens = Histogram(b)
