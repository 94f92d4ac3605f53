"""v11 (docs/diagnosis.md, "v11"): three rules over v10.

- At a full link (edge or WAN) the network binds through a TTFT statistic from 1.5x its reference
  and 50 ms over it (``ttft_link_inflation_ratio``, the corpus truth's "visibly worse" bar); the
  queue and compute keep their 3x bars, and a free link keeps the network's.
- A measured zero throughput is a known load (none), not an unknown one.
- A verdict that binds through several medians rests on those its request counts bound.

The windows are hand-built: a client edge capped at 0.5 Mbit/s carrying 0.46 (the brief's
network-limited signature), a TTFT median 2.9x its reference (under the 3x bar v10 needed).
"""

from __future__ import annotations

import dataclasses

from inferslice.bottleneck import classify
from inferslice.diagnosis import CONFIDENT, Regime
from inferslice.snapshot import SliceSnapshot

FULL_LINK = SliceSnapshot(
    slice="standard",
    window_s=6.0,
    slo_ttft_p99_s=0.5,
    ttft_p50_s=0.29,
    ttft_p99_s=0.45,
    tpot_p50_s=0.025,
    tpot_p99_s=0.040,
    request_count=40.0,
    tpot_request_count=40.0,
    link_rx_bps=460_000.0,
    link_cap_bps=500_000.0,
    link_capacity_bps=1e10,
    requests_waiting=0.0,
    requests_running=4.0,
    replicas=2,
    replicas_max=3,
    gpu_share=1.0,
    output_tokens_per_s=150.0,
    ref_ttft_p50_s=0.10,
    ref_ttft_p99_s=0.16,
    ref_tpot_p50_s=0.025,
    ref_tpot_p99_s=0.038,
    ref_output_tokens_per_s=160.0,
)
FREE_LINK = dataclasses.replace(FULL_LINK, link_rx_bps=150_000.0)  # 30 % of the cap


def _caps(snap: SliceSnapshot) -> str:
    return " ".join(e.note or "" for e in classify(snap).evidence if e.signal == "confidence_cap")


def test_at_a_full_edge_a_ttft_under_3x_binds_the_network() -> None:
    d = classify(FULL_LINK)
    assert d.regime is Regime.NETWORK_LIMITED
    assert d.confidence >= CONFIDENT  # 0.19 s over a 0.05 s bar: no margin cap


def test_at_a_full_wan_link_likewise() -> None:
    snap = dataclasses.replace(FREE_LINK, wan_rx_bps=900_000.0, wan_capacity_bps=1_000_000.0)
    assert classify(snap).regime is Regime.NETWORK_LIMITED


def test_with_the_link_free_the_same_ttft_is_healthy() -> None:
    assert classify(FREE_LINK).regime is Regime.HEALTHY


def test_the_queue_keeps_its_3x_bar() -> None:
    # Requests waiting beside the same TTFT on a free link: 2.9x is under the queue's bar.
    snap = dataclasses.replace(FREE_LINK, requests_waiting=2.0)
    assert classify(snap).regime is Regime.HEALTHY


def test_under_1_5x_or_within_50_ms_the_full_link_does_not_bind() -> None:
    under = dataclasses.replace(FULL_LINK, ttft_p50_s=0.14, ttft_p99_s=0.20)  # 1.4x, 1.25x
    assert classify(under).regime is Regime.HEALTHY
    # 1.67x a 60 ms reference is 40 ms over it: under the floor.
    small = dataclasses.replace(FULL_LINK, ref_ttft_p50_s=0.06, ttft_p50_s=0.10, ref_ttft_p99_s=0.09, ttft_p99_s=0.13)
    assert classify(small).regime is Regime.HEALTHY


def test_a_measured_zero_throughput_is_a_known_load() -> None:
    zero = dataclasses.replace(FULL_LINK, output_tokens_per_s=0.0)
    d = classify(zero)
    assert d.regime is Regime.NETWORK_LIMITED
    assert "throughput or its reference unknown" not in _caps(zero)
    assert d.confidence >= CONFIDENT
    unknown = dataclasses.replace(FULL_LINK, output_tokens_per_s=None)
    assert "throughput or its reference unknown" in _caps(unknown)
    assert classify(unknown).confidence < CONFIDENT


def test_a_verdict_rests_on_the_median_its_requests_bound() -> None:
    # The TTFT median from 3 first tokens, the TPOT median from 20 finished streams: the network
    # binds through both (TPOT 1.8x its reference at the full link), so it stands on the TPOT median.
    snap = dataclasses.replace(FULL_LINK, tpot_p50_s=0.045, tpot_p99_s=0.09, request_count=3.0, tpot_request_count=20.0)
    assert classify(snap).regime is Regime.NETWORK_LIMITED
    assert "median TTFT from 3 requests" not in _caps(snap)
    # With only 4 streams finished neither median is bounded: both caps.
    few = dataclasses.replace(snap, tpot_request_count=4.0)
    caps = _caps(few)
    assert "median TTFT from 3 requests" in caps
    assert "median TPOT from 4 requests" in caps
    assert classify(few).confidence < CONFIDENT
    # A TTFT median alone from 3 requests stays held (nothing else binds).
    alone = dataclasses.replace(FULL_LINK, request_count=3.0)
    assert "median TTFT from 3 requests" in _caps(alone)
