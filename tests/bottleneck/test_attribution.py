"""Latency attribution on operating points written from issue 9's failure classes and the brief's figures
(BRIEF.md, "What the measurements showed"): references P99 TTFT 0.1 s / median 0.06 s, TPOT median
25 ms / P99 34 ms, 370 tok/s; the 0.5 Mbit/s cap measured at 0.46 Mbit/s."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from inferslice.bottleneck import classify
from inferslice.diagnosis import Regime, SloState
from inferslice.snapshot import Reference, SliceSnapshot, snapshot_from_dict

MBPS = 1e6
REF = dict(
    ref_ttft_p50_s=0.06, ref_ttft_p99_s=0.1, ref_tpot_p50_s=0.025, ref_tpot_p99_s=0.034, ref_output_tokens_per_s=370.0
)  # the brief's unconstrained tier


def point(**fields: Any) -> SliceSnapshot:
    return snapshot_from_dict({"slice": "standard", "slo_ttft_p99_s": 0.5, **REF, **fields})


def capped(**kw: Any) -> SliceSnapshot:
    base: dict[str, Any] = dict(
        ttft_p50_s=1.0, ttft_p99_s=2.5, tpot_p50_s=0.1, tpot_p99_s=0.2, output_tokens_per_s=220,
        link_rx_bps=0.46 * MBPS, link_cap_bps=0.5 * MBPS,
    )  # fmt: skip
    return point(**{**base, **kw})


def test_the_brief_network_point_is_network_alone_and_the_excess_is_the_networks() -> None:
    d = classify(capped())
    assert (d.regime, d.secondary) == (Regime.NETWORK_LIMITED, ())
    a = d.attribution
    assert a is not None
    tpot = a.share("tpot_p99")
    assert tpot is not None and tpot.network_s == pytest.approx(0.2 - 0.034)  # all the P99 TPOT excess
    assert a.fraction("network") == 1.0 and a.fraction("queue") == 0.0


def test_class1_a_cap_on_a_tier_past_its_replica_ceiling_reports_both_without_queue_gauges() -> None:
    # TTFT tens of times its reference, TPOT several times, no queue gauge: the shaper explains ~20
    # token times of first-chunk wait, the rest of TTFT is a queue.
    d = classify(capped(ttft_p50_s=3.0, ttft_p99_s=6.0, tpot_p50_s=0.09, tpot_p99_s=0.17))
    assert d.regime is Regime.NETWORK_LIMITED
    assert Regime.QUEUE_LIMITED in d.secondary
    assert d.attribution is not None and d.attribution.fraction("queue") >= 0.25


def test_class2_more_load_with_more_throughput_is_not_contention() -> None:
    # TPOT 1.5x its reference with throughput 1.3x above it, P99 TTFT within the SLO, no link data.
    d = classify(point(ttft_p50_s=0.07, ttft_p99_s=0.3, tpot_p50_s=0.0375, tpot_p99_s=0.05, output_tokens_per_s=1.3 * 370))
    assert d.regime is Regime.HEALTHY
    same_rate = classify(point(ttft_p50_s=0.07, ttft_p99_s=0.3, tpot_p50_s=0.0375, tpot_p99_s=0.05, output_tokens_per_s=370))
    assert same_rate.regime is Regime.UNKNOWN  # the same TPOT at equal throughput is contention the link data cannot place


@pytest.mark.parametrize("delivered", [0.85, 0.89, 0.95])
def test_class3_shaper_delivery_between_85_and_95_percent_of_the_cap_is_the_cap(delivered: float) -> None:
    d = classify(capped(link_rx_bps=delivered * 0.5 * MBPS, ttft_p50_s=2.0, ttft_p99_s=5.0, tpot_p50_s=0.08, tpot_p99_s=0.17))
    assert d.regime is Regime.NETWORK_LIMITED


def test_class4_p99_ttft_near_the_slo_with_tpot_at_reference_is_healthy_at_risk() -> None:
    d = classify(point(ttft_p50_s=0.07, ttft_p99_s=0.42, tpot_p50_s=0.025, tpot_p99_s=0.034, output_tokens_per_s=370))
    assert d.regime is Regime.HEALTHY
    assert d.slo is SloState.AT_RISK and d.slo_signal == "ttft_p99_s"


def test_class5_an_uncapped_link_is_judged_against_the_interface_not_unknown() -> None:
    s = point(ttft_p50_s=0.065, ttft_p99_s=0.09, tpot_p50_s=0.028, tpot_p99_s=0.09, output_tokens_per_s=130, link_rx_bps=0.3 * MBPS)
    assert classify(s).regime is Regime.HEALTHY
    with_nic = classify(dataclasses.replace(s, link_capacity_bps=10e9))
    assert with_nic.regime is Regime.HEALTHY
    assert not any(e.signal == "link_utilization" and e.crossed for e in with_nic.evidence)
    assert "link_cap_bps" not in with_nic.missing


def test_class6_a_tail_alone_never_overrules_median_throughput_and_queue() -> None:
    # Free queue-limited: TTFT x80, 12 waiting at its ceiling, median TPOT on its reference, the P99
    # TPOT alone over 2x (a busy machine).
    s = point(
        ttft_p50_s=4.8, ttft_p99_s=8.0, tpot_p50_s=0.025, tpot_p99_s=0.09, output_tokens_per_s=370, requests_waiting=12,
        requests_running=14, replicas=1, replicas_max=1, link_rx_bps=1.1 * MBPS, link_capacity_bps=10e9,
    )  # fmt: skip
    d = classify(s)
    assert d.regime is Regime.QUEUE_LIMITED and d.secondary == ()


def test_class7_a_capped_tier_given_more_load_is_network_and_queue_with_gauges() -> None:
    d = classify(capped(ttft_p50_s=4.0, ttft_p99_s=7.0, requests_waiting=9, requests_running=14, replicas=3, replicas_max=3))
    assert d.regime is Regime.NETWORK_LIMITED and Regime.QUEUE_LIMITED in d.secondary


def test_nothing_waiting_at_a_full_link_gives_the_rest_of_ttft_to_the_link() -> None:
    # The shaper's token-time bound leaves TTFT over; a gauge showing no queue says it is the link's queue.
    d = classify(capped(ttft_p50_s=3.0, ttft_p99_s=6.0, requests_waiting=0))
    assert d.regime is Regime.NETWORK_LIMITED and d.secondary == ()
    p99 = d.attribution.share("ttft_p99") if d.attribution else None
    assert p99 is not None and p99.queue_s == 0.0 and p99.network_s == pytest.approx(6.0 - 0.1)


def test_gpu_share_drop_on_a_queueing_tier_is_compute_then_queue() -> None:
    s = point(
        ttft_p50_s=3.0, ttft_p99_s=6.0, tpot_p50_s=0.075, tpot_p99_s=0.1, output_tokens_per_s=150, gpu_share=0.35,
        requests_waiting=10, requests_running=14, replicas=1, replicas_max=1, link_rx_bps=0.4 * MBPS, link_cap_bps=10 * MBPS,
    )  # fmt: skip
    d = classify(s)
    assert (d.regime, d.secondary) == (Regime.COMPUTE_LIMITED, (Regime.QUEUE_LIMITED,))
    assert d.attribution is not None
    ttft = d.attribution.share("ttft_p50")
    assert ttft is not None and ttft.compute_s > 0 and ttft.queue_s > ttft.compute_s  # prefill slows, the queue dominates


def test_coalesced_delivery_the_collapsed_median_gives_way_to_the_tail() -> None:
    # Under the testbed's cap the client's median TPOT falls to ~6 ms (tokens arrive in bursts) while the P99 rises x5.
    d = classify(capped(ttft_p50_s=0.4, ttft_p99_s=0.74, tpot_p50_s=0.006, tpot_p99_s=0.35, requests_waiting=0))
    assert d.regime is Regime.NETWORK_LIMITED


def test_learned_saturation_moves_the_load_relation() -> None:
    s = point(ttft_p50_s=0.07, ttft_p99_s=0.3, tpot_p50_s=0.04, tpot_p99_s=0.05, output_tokens_per_s=1.3 * 370,
              link_rx_bps=1e5, link_cap_bps=1e7)  # fmt: skip
    assert classify(s).regime is Regime.HEALTHY  # prior: the reference at half the saturation rate
    far = Reference(tokens_per_s_saturation=20 * 370, source="learned", samples=50)
    assert classify(s, far).regime is Regime.COMPUTE_LIMITED  # a flat load curve: 1.6x TPOT is contention
