"""``Thresholds``: every number the classifier compares against, with the reason for its default.

Figures come from the paper's measurements as the project brief quotes them: the queue-limited signature (TTFT up an
order of magnitude, TPOT at ~24-27 ms) and the network-limited one (a 0.5 Mbps cap pinning receive at
~0.46 Mbps, P99 TPOT from ~26-38 ms to 150-280 ms, throughput from ~370 to ~220 tok/s).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    # -- SLO ------------------------------------------------------------------------------------
    default_slo_ttft_p99_s: float = 0.5  # the brief's interactive SLO (P99 TTFT <= 500 ms) when the input names none
    slo_at_risk_ratio: float = 0.8  # a P99 within 20 % of its SLO has no headroom left for the next load step

    # -- latency inflation against the slice's reference ---------------------------------------
    ttft_inflation_ratio: float = 3.0  # same statistic (p50/mean): queueing multiplies TTFT ~10x, load noise < 2x
    ttft_tail_inflation_ratio: float = 5.0  # P99 against a median/mean reference: unloaded tails sit ~2-3x above the median
    tpot_inflation_ratio: float = 1.5  # same statistic: while a tier queues TPOT stays ~24-27 ms on a ~25 ms reference
    tpot_tail_inflation_ratio: float = 2.0  # P99 against a median reference: unconstrained P99 26-38 ms vs median 24-27 ms
    fallback_tpot_s: float = 0.1  # no reference and no TPOT SLO: unconstrained P99 TPOT 26-38 ms, throttled 150-280 ms

    # -- network ----------------------------------------------------------------------------------
    link_binding_ratio: float = 0.9  # a 0.5 Mbps cap pinned the receive rate at 0.46 Mbps (0.92 x cap)
    tokens_drop_ratio: float = 0.8  # under the cap throughput fell 370 -> 220 tok/s (0.59x); 20 % dips are load noise

    # -- queue confirmations ----------------------------------------------------------------------
    requests_waiting_min: float = 0.0  # any request held back by the router/engine is a queue (strictly above this)
    queue_time_confirm_ratio: float = 0.25  # queue time over a quarter of the TTFT SLO is queueing that spends the budget
    # A queue at the replica ceiling is the queue-limited regime before any TTFT shows it: a queued
    # request's TTFT is observed only when it is served, a request length (~5 s) later.
    queue_leading_ratio: float = 0.25  # waiting >= 1/4 of running at the ceiling: new arrivals already wait ~1/4 of a service time

    # -- compute confirmations --------------------------------------------------------------------
    gpu_utilization_high: float = 0.9  # a busy GPU confirms compute only next to inflated TPOT, never alone
    kv_cache_high: float = 0.9  # vLLM starts preempting sequences as the paged KV cache fills
    preemptions_min_per_s: float = 0.0  # any preemption means recomputation and slower decode (strictly above this)
    gpu_share_reduced: float = 0.9  # effective/allocated GPU share below 0.9: a neighbour takes >10 % of the GPU

    # -- confidence -------------------------------------------------------------------------------
    no_reference_confidence_factor: float = 0.75  # absolute fallbacks separate regimes less sharply than a reference


DEFAULT = Thresholds()
