"""v6's rule (docs/diagnosis.md, "GPU share"): beside a reported GPU-share drop, a P99 TPOT past
1.3x its reference is the neighbour's symptom, though the median is still under its bar. Built by
hand after dev-corpus windows (s9027--c0-free-w05: GPU share 0.52, decode tail 1.4x, median 1.4x)."""

from __future__ import annotations

import dataclasses

from inferslice.bottleneck import classify
from inferslice.bottleneck.thresholds import Thresholds
from inferslice.diagnosis import Regime
from inferslice.snapshot import SliceSnapshot

# A free tier sharing its GPU with a neighbour: TTFT at its reference, decode median 1.2x (under the
# 1.5x bar), decode tail 1.6x (under the 2x bar a tail needs alone), a free link, nothing waiting.
SHARED_GPU = SliceSnapshot(
    slice="free",
    slo_ttft_p99_s=0.5,
    request_count=12.0,
    ttft_p50_s=0.056,
    ttft_p99_s=0.078,
    ref_ttft_p50_s=0.0545,
    ref_ttft_p99_s=0.0756,
    tpot_p50_s=1.2 * 0.0268,
    tpot_p99_s=1.6 * 0.0495,
    ref_tpot_p50_s=0.0268,
    ref_tpot_p99_s=0.0495,
    output_tokens_per_s=300.0,
    ref_output_tokens_per_s=317.0,
    gpu_share=0.52,
    kv_cache_usage=0.05,
    preemptions_per_s=0.0,
    requests_waiting=0.0,
    requests_running=8.0,
    replicas=1.0,
    replicas_max=1.0,
    link_rx_bps=4.0e5,
    link_capacity_bps=1e10,
)


def test_a_decode_tail_beside_a_gpu_share_drop_is_compute() -> None:
    d = classify(SHARED_GPU)
    assert d.regime is Regime.COMPUTE_LIMITED
    assert d.attribution is not None
    share = d.attribution.share("tpot_p99")
    assert share is not None and share.compute_s > 0.9 * share.excess_s


def test_the_same_tail_without_the_share_drop_is_not_compute() -> None:
    # No share reported, or the whole GPU: a 1.6x tail alone is the engine's own spread.
    assert classify(dataclasses.replace(SHARED_GPU, gpu_share=None)).regime is not Regime.COMPUTE_LIMITED
    assert classify(dataclasses.replace(SHARED_GPU, gpu_share=1.0)).regime is not Regime.COMPUTE_LIMITED


def test_the_tail_bar_is_the_rule_s_not_the_general_one() -> None:
    # At v5's bar (2x for a tail, drop or not) the same window is not compute; under 1.3x it is not either.
    assert classify(SHARED_GPU, thresholds=Thresholds(tpot_tail_confirmed_ratio=2.0)).regime is not Regime.COMPUTE_LIMITED
    under = dataclasses.replace(SHARED_GPU, tpot_p99_s=1.25 * 0.0495)
    assert classify(under).regime is not Regime.COMPUTE_LIMITED
