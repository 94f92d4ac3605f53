"""Confidence (issue 17): too few requests, the missing-field cases the issue found, a misreported cap,
and the WAN causes that are not a slice cap."""

from __future__ import annotations

import dataclasses

import pytest

from inferslice.bottleneck import classify
from inferslice.bottleneck.attribution import attribute
from inferslice.bottleneck.sampling import MEDIAN_MIN_REQUESTS, TAIL_MIN_REQUESTS
from inferslice.bottleneck.thresholds import DEFAULT
from inferslice.diagnosis import CONFIDENT, Diagnosis, NetworkCause, Regime
from inferslice.snapshot import SliceSnapshot

# A Standard window of the issue-9 corpus (compound-prometheus-standard-1796120543.6): 1.2 Mbit/s cap
# at its rate, nothing waiting, TPOT at its reference, TTFT x4.5 (the first chunk waits in the
# shaper's buffer). Truth: network.
SHAPER_WAIT = SliceSnapshot(
    slice="standard",
    window_s=4.0,
    slo_ttft_p99_s=0.5,
    ttft_p50_s=0.375,
    ttft_p99_s=0.4975,
    ttft_mean_s=0.358,
    tpot_p50_s=0.03695,
    tpot_p99_s=0.0506,
    tpot_mean_s=0.03115,
    output_tokens_per_s=503.5,
    request_rate=2.0,
    link_rx_bps=1_200_076.0,
    link_tx_bps=231_792.0,
    link_cap_bps=1_200_000.0,
    requests_waiting=0.0,
    requests_running=15.0,
    queue_time_p99_s=0.297,
    replicas=3.0,
    replicas_max=3.0,
    gpu_share=1.0,
    kv_cache_usage=0.05,
    preemptions_per_s=0.0,
    ref_ttft_p50_s=0.0833,
    ref_ttft_mean_s=0.0813,
    ref_tpot_p50_s=0.03699,
    ref_tpot_mean_s=0.02918,
    ref_output_tokens_per_s=339.4,
    ref_ttft_p99_s=0.1256,
    ref_tpot_p99_s=0.05078,
)

# The brief's queue-limited Free tier: TTFT x10, TPOT flat, requests waiting at the ceiling.
QUEUE = SliceSnapshot(
    slice="free",
    slo_ttft_p99_s=0.5,
    ttft_p50_s=2.0,
    ttft_p99_s=5.0,
    tpot_p50_s=0.026,
    tpot_p99_s=0.034,
    output_tokens_per_s=460.0,
    request_rate=2.5,
    link_rx_bps=0.4e6,
    link_cap_bps=10e6,
    requests_waiting=6.0,
    requests_running=8.0,
    replicas=1.0,
    replicas_max=1.0,
    ref_ttft_p50_s=0.05,
    ref_ttft_p99_s=0.1,
    ref_tpot_p50_s=0.025,
    ref_tpot_p99_s=0.032,
    ref_output_tokens_per_s=420.0,
)


def confident(d: Diagnosis) -> bool:
    return d.regime is not Regime.UNKNOWN and d.confidence >= CONFIDENT


def caps(d: Diagnosis) -> list[str]:
    return [c for e in d.evidence if e.signal == "confidence_cap" for c in e.note.split("; ")]


def test_the_shaper_wait_window_is_network() -> None:
    d = classify(SHAPER_WAIT)
    assert d.regime is Regime.NETWORK_LIMITED and d.network_cause is NetworkCause.EDGE_CAP


def test_without_the_queue_gauge_it_never_becomes_a_confident_queue() -> None:
    # The issue: removing requests_waiting turned these windows (network 0.8) into queue 0.9.
    d = classify(dataclasses.replace(SHAPER_WAIT, requests_waiting=None))
    assert not (d.regime is Regime.QUEUE_LIMITED and confident(d)), (d.regime, d.confidence, caps(d))


@pytest.mark.parametrize("k", [2.0, 10.0])
def test_a_cap_reported_larger_than_it_is_never_makes_a_confident_queue(k: float) -> None:
    # The issue: a cap reported at 2x or 10x flipped network windows to confident queue. Nothing waits:
    # a queue verdict has no queue to rest on.
    d = classify(dataclasses.replace(SHAPER_WAIT, link_cap_bps=k * SHAPER_WAIT.link_cap_bps))  # type: ignore[operator]
    assert not confident(d) or d.regime is Regime.NETWORK_LIMITED, (d.regime, d.confidence)
    if d.regime is Regime.QUEUE_LIMITED:
        assert "the queue gauge shows nothing waiting" in caps(d)


def test_queue_verdict_on_its_medians_needs_only_a_handful_of_requests() -> None:
    assert confident(classify(QUEUE))  # no count reported: nothing to cap
    many = classify(dataclasses.replace(QUEUE, request_count=40.0, tpot_request_count=40.0))
    assert many.regime is Regime.QUEUE_LIMITED and confident(many)
    few = classify(dataclasses.replace(QUEUE, request_count=MEDIAN_MIN_REQUESTS - 1, tpot_request_count=MEDIAN_MIN_REQUESTS - 1))
    assert few.regime is Regime.QUEUE_LIMITED and not confident(few)
    assert any("median TTFT from 5 requests" in c for c in caps(few))
    assert few.request_count == MEDIAN_MIN_REQUESTS - 1


def test_a_verdict_resting_on_a_p99_alone_needs_hundreds_of_requests() -> None:
    # Median at its reference, the P99 TTFT breaching the SLO: the tail alone decides.
    tail_only = dataclasses.replace(QUEUE, ttft_p50_s=0.06)
    d = classify(dataclasses.replace(tail_only, request_count=40.0, tpot_request_count=40.0))
    assert d.regime is Regime.QUEUE_LIMITED and not confident(d)
    assert any(c.startswith("P99 TTFT from 40 requests") for c in caps(d))
    enough = classify(dataclasses.replace(tail_only, request_count=float(TAIL_MIN_REQUESTS), tpot_request_count=float(TAIL_MIN_REQUESTS)))
    assert enough.regime is Regime.QUEUE_LIMITED
    assert not any("requests" in c and "P99" in c for c in caps(enough))


def _cross_traffic(**over: float | None) -> SliceSnapshot:
    # Standard under a WAN link filled by cross-traffic: its own client-edge cap (5 Mbit/s) far from
    # binding, the path's busiest WAN link at 97 % of its physical rate, TPOT x3, TTFT x6, nothing waiting.
    base = dataclasses.replace(
        QUEUE,
        slice="standard",
        ttft_p50_s=0.3,
        ttft_p99_s=0.9,
        tpot_p50_s=0.075,
        tpot_p99_s=0.12,
        output_tokens_per_s=300.0,
        link_rx_bps=0.9e6,
        link_cap_bps=5e6,
        requests_waiting=0.0,
        replicas=3.0,
        replicas_max=3.0,
        gpu_share=1.0,
        wan_rx_bps=97e6,
        wan_capacity_bps=100e6,
    )
    return dataclasses.replace(base, **over)


def test_a_full_wan_link_is_network_limited_on_the_wan_not_the_edge() -> None:
    d = classify(_cross_traffic())
    assert d.regime is Regime.NETWORK_LIMITED
    assert d.network_cause is NetworkCause.WAN_LINK  # relocate: a cap raise is futile
    util = next(e for e in d.evidence if e.signal == "wan_utilization")
    assert util.crossed and util.value == pytest.approx(0.97)


def test_without_the_wan_path_a_wan_window_is_never_a_confident_other_cause() -> None:
    d = classify(_cross_traffic(wan_rx_bps=None))
    assert d.regime is not Regime.NETWORK_LIMITED
    assert not confident(d), (d.regime, d.confidence, caps(d))


def test_an_added_wan_delay_is_network_limited_by_delay() -> None:
    # RTT 20 ms -> 220 ms on the path: every first token pays the extra round trip (kept-alive
    # connections), TPOT flat; median TTFT 0.05 -> 0.35 s, nothing waiting.
    s = dataclasses.replace(
        QUEUE,
        ttft_p50_s=0.05 + 0.3,
        ttft_p99_s=0.1 + 0.4,
        requests_waiting=0.0,
        replicas=1.0,
        wan_rtt_s=0.22,
        wan_base_rtt_s=0.02,
    )
    d = classify(s)
    assert d.regime is Regime.NETWORK_LIMITED and d.network_cause is NetworkCause.WAN_DELAY
    assert d.attribution is not None
    share = d.attribution.share("ttft_p50")
    # The physics measures one added RTT of the 0.3 s excess and places the rest nowhere; the network
    # verdict reads the rest as its own (v16, ``attribution.settle``). Nothing waits: never a queue.
    raw = attribute(s, DEFAULT)[0].share("ttft_p50")
    assert raw is not None and raw.network_s == pytest.approx(0.2) and raw.queue_s == 0.0
    assert share is not None and share.network_s == pytest.approx(0.3)
    assert share.queue_s == 0.0
    jitter = classify(dataclasses.replace(s, wan_rtt_s=0.022))  # within noise of its reference: no delay
    assert jitter.network_cause is None
