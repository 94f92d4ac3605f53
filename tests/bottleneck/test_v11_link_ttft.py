"""v11 (docs/diagnosis.md, "v11"): three rules over v10.

- At a full link (edge or WAN) the network binds through a TTFT statistic from 1.5x its reference
  and a tenth of the SLO (50 ms) over it (``ttft_link_inflation_ratio``, the corpus truth's bar); the
  queue and compute keep their 3x bars, and a free link keeps the network's.
- A measured zero throughput is a known load (none), not an unknown one.
- A verdict that binds through several statistics (medians first) rests on those its request
  counts bound.
- A healthy window whose TTFT passes the link's bar while its link state is incomplete is unsure
  (a full link it does not show could bind it).

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


def test_the_queue_keeps_its_3x_bar_at_a_full_link() -> None:
    # Requests waiting beside a TTFT 2.9x its reference at the full link: the queue does not bind
    # (3x) and is not named beside the network.
    d = classify(dataclasses.replace(FULL_LINK, requests_waiting=2.0, requests_running=4.0))
    assert d.regime is not Regime.QUEUE_LIMITED
    assert Regime.QUEUE_LIMITED not in d.secondary
    # Nor does it on a free link.
    assert classify(dataclasses.replace(FREE_LINK, requests_waiting=2.0)).regime is Regime.HEALTHY


def test_the_bar_is_1_5x_and_50_ms() -> None:
    # Against a 0.2 s reference (where 1.5x is 100 ms over, past the floor): 1.4x reads healthy, 1.6x network.
    ref = dict(ref_ttft_p50_s=0.20, ref_ttft_p99_s=0.30, ttft_p99_s=0.35)
    assert classify(dataclasses.replace(FULL_LINK, ttft_p50_s=0.28, **ref)).regime is Regime.HEALTHY  # type: ignore[arg-type]
    assert classify(dataclasses.replace(FULL_LINK, ttft_p50_s=0.32, **ref)).regime is Regime.NETWORK_LIMITED  # type: ignore[arg-type]
    # 1.67x a 60 ms reference is 40 ms over it: under the floor.
    small = dataclasses.replace(FULL_LINK, ref_ttft_p50_s=0.06, ttft_p50_s=0.10, ref_ttft_p99_s=0.09, ttft_p99_s=0.13)
    assert classify(small).regime is Regime.HEALTHY


def test_coalesced_tokens_on_a_free_link_keep_the_3x_bar() -> None:
    # A TPOT median under half its reference is a buffer on the path, not a link's gauge: the lower
    # bar needs a link that reads full.
    assert classify(dataclasses.replace(FREE_LINK, tpot_p50_s=0.010)).regime is not Regime.NETWORK_LIMITED


def test_a_network_verdict_through_the_p99_ttft_reports_the_networks_share() -> None:
    # The median at its reference, the P99 2.5x its own at the full link: the tail binds the network,
    # and the attribution gives the network that excess (v11's first cut reported 0).
    d = classify(dataclasses.replace(FULL_LINK, ttft_p50_s=0.10, ttft_p99_s=0.40, request_count=400.0))
    assert d.regime is Regime.NETWORK_LIMITED
    assert d.attribution is not None and d.attribution.fraction("network") > 0.5


def test_a_field_that_hides_the_full_link_leaves_healthy_unsure() -> None:
    # The missing-field rule: without the cap (judged against the 10 Gbit/s rate), or without the WAN
    # link's rate, the same windows must not read confidently healthy.
    tail = dataclasses.replace(FULL_LINK, ttft_p50_s=0.10, ttft_p99_s=0.40, request_count=400.0)
    median = dataclasses.replace(FULL_LINK, ttft_p50_s=0.20)
    wan = dataclasses.replace(tail, link_rx_bps=150_000.0, wan_rx_bps=900_000.0, wan_capacity_bps=1_000_000.0)
    for full, field in ((tail, "link_cap_bps"), (median, "link_cap_bps"), (wan, "wan_rx_bps"), (wan, "wan_capacity_bps")):
        assert classify(full).regime is Regime.NETWORK_LIMITED
        less = classify(dataclasses.replace(full, **{field: None}))
        assert less.regime is Regime.NETWORK_LIMITED or less.confidence < CONFIDENT, (field, less)


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
    # binds through both (TPOT 2.8x its reference at the full link), so it stands on the TPOT median
    # and is confident (its ratio there, 0.045 s over a 0.0125 s bar, is past 2x).
    snap = dataclasses.replace(FULL_LINK, tpot_p50_s=0.07, tpot_p99_s=0.12, request_count=3.0, tpot_request_count=20.0)
    d = classify(snap)
    assert d.regime is Regime.NETWORK_LIMITED
    assert "median TTFT from 3 requests" not in _caps(snap)
    assert d.confidence >= CONFIDENT
    # With only 4 streams finished neither median is bounded: both caps.
    few = dataclasses.replace(snap, tpot_request_count=4.0)
    caps = _caps(few)
    assert "median TTFT from 3 requests" in caps
    assert "median TPOT from 4 requests" in caps
    assert classify(few).confidence < CONFIDENT
    # A TTFT median alone from 3 requests stays held (nothing else binds).
    alone = dataclasses.replace(FULL_LINK, request_count=3.0)
    assert "median TTFT from 3 requests" in _caps(alone)
