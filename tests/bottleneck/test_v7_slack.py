"""v7's rule (docs/diagnosis.md, "Slack gauges"): a healthy verdict on a tier whose every resource
reads slack by its gauges rests on those gauges, not on quantiles from a handful of requests; any
gauge the window lacks, or any one that is not slack, leaves the verdict held below the bar."""

from __future__ import annotations

import dataclasses

import pytest

from inferslice.bottleneck import DEFAULT, classify
from inferslice.diagnosis import CONFIDENT, Regime
from inferslice.snapshot import SliceSnapshot

# After s9044-clean-premium-w04 (blind-v6b, embedded; truth healthy): 3 requests in 6 s, too few to
# bound a median (6 needed), every resource idle-ish: nothing waiting, GPU share whole, the edge at
# 0.16 Mbit/s of 10 Gbit/s, the path's WAN link at 4 % of its 13 Mbit/s and its RTT 3.4 ms over base.
FEW_SLACK = SliceSnapshot(
    slice="premium",
    window_s=6.0,
    slo_ttft_p99_s=0.5,
    ttft_p50_s=0.175,
    ttft_p99_s=0.2485,
    ttft_mean_s=0.112,
    tpot_p50_s=0.0183,
    tpot_p99_s=0.0473,
    tpot_mean_s=0.0239,
    output_tokens_per_s=61.7,
    request_rate=0.5,
    request_count=3.0,
    tpot_request_count=372.0,
    link_rx_bps=157_577.0,
    link_tx_bps=40_872.0,
    link_cap_bps=1e10,  # uncapped, as the collectors report it since v10 (the cap clamped at the physical rate)
    link_capacity_bps=1e10,
    wan_rx_bps=525_072.0,
    wan_capacity_bps=13e6,
    wan_rtt_s=0.0214,
    wan_base_rtt_s=0.018,
    requests_waiting=0.0,
    requests_running=0.0,
    queue_time_p99_s=0.297,
    replicas=2.0,
    replicas_max=6.0,
    gpu_share=1.0,
    kv_cache_usage=0.0,
    preemptions_per_s=0.0,
    ref_ttft_p50_s=0.0882,
    ref_ttft_mean_s=0.0849,
    ref_tpot_p50_s=0.0183,
    ref_tpot_mean_s=0.0240,
    ref_output_tokens_per_s=86.0,
    ref_ttft_p99_s=0.1848,
    ref_tpot_p99_s=0.0469,
)


def test_few_requests_on_a_slack_tier_is_a_confident_healthy_verdict() -> None:
    d = classify(FEW_SLACK)
    assert d.regime is Regime.HEALTHY
    assert d.confidence >= CONFIDENT
    assert any("slack" in (e.note or "") for e in d.evidence if e.signal == "verdict")


def test_without_the_rule_the_same_window_is_held_by_its_request_count() -> None:
    off = dataclasses.replace(DEFAULT, slack_utilization_max=-1.0)  # no link is ever slack: v6
    d = classify(FEW_SLACK, thresholds=off)
    assert d.regime is Regime.HEALTHY and d.confidence < CONFIDENT
    caps = next(e.note for e in d.evidence if e.signal == "confidence_cap")
    assert "from 3 requests" in caps


@pytest.mark.parametrize(
    "field",
    ["requests_waiting", "gpu_share", "preemptions_per_s", "link_rx_bps", "wan_rtt_s", "wan_base_rtt_s", "wan_rx_bps", "wan_capacity_bps"],
)
def test_a_gauge_the_window_lacks_is_no_evidence_of_slack(field: str) -> None:
    d = classify(dataclasses.replace(FEW_SLACK, **{field: None}))
    assert d.confidence < CONFIDENT, field


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"requests_waiting": 1.0}, "a request waits: a queue"),
        ({"gpu_share": 0.5}, "a co-tenant takes half the GPU"),
        ({"preemptions_per_s": 0.2}, "the engine preempts"),
        ({"kv_cache_usage": 0.95}, "the KV cache is full"),
        ({"gpu_utilization": 0.97}, "a busy GPU"),
        ({"link_cap_bps": 0.25e6}, "the edge runs at 63 % of its cap"),
        ({"wan_rx_bps": 8e6}, "the WAN link runs at 62 % of its rate"),
        ({"wan_rtt_s": 0.048}, "30 ms added on the path: over half the 50 ms that binds"),
        ({"tpot_p50_s": 0.04, "link_cap_bps": None}, "no cap reported, decode pace 2.2x its reference: a cap the window lacks could bind"),
    ],
)
def test_a_resource_that_is_not_slack_leaves_the_verdict_held(change: dict[str, float | None], why: str) -> None:
    d = classify(dataclasses.replace(FEW_SLACK, **change))
    assert not (d.regime is Regime.HEALTHY and d.confidence >= CONFIDENT), why


def test_a_tier_with_no_wan_link_on_its_path_needs_none_of_the_wan_gauges() -> None:
    gateway_only = dataclasses.replace(FEW_SLACK, wan_rx_bps=None, wan_capacity_bps=None, wan_rtt_s=None, wan_base_rtt_s=None)
    d = classify(gateway_only)
    assert d.regime is Regime.HEALTHY and d.confidence >= CONFIDENT


def test_slack_never_hides_a_breach() -> None:
    # Seconds of TTFT on a tier whose gauges read slack is not healthy: the rule only lifts the caps of
    # a healthy verdict, it never makes one.
    breach = dataclasses.replace(FEW_SLACK, ttft_p50_s=2.5, ttft_p99_s=4.0, ttft_mean_s=2.6, request_count=12.0)
    d = classify(breach)
    assert d.regime is not Regime.HEALTHY
