"""v8's three rules (docs/diagnosis.md, "v8: the median's drift, a queue behind a cut share, a WAN
link's token-gap tail"). Each fixture is a corpus window (embedded source, its reference inline)
whose truth the rule got right and v7 did not; each test also shows the field whose absence, or the
reading whose change, leaves v7's verdict standing (the rule needs its evidence, not its absence)."""

from __future__ import annotations

import dataclasses

import pytest

from inferslice.bottleneck import DEFAULT, classify
from inferslice.diagnosis import CONFIDENT, Diagnosis, Regime
from inferslice.snapshot import SliceSnapshot

_REF = dict(slo_ttft_p99_s=0.5, window_s=6.0)

# s1001-all-premium-w08 (tune, embedded; truth healthy, v7 said compute): the median TPOT at 1.57x
# its reference (past the 1.5x bar), its P99 at 0.97x its own, the GPU share whole, the edge free.
DRIFT = SliceSnapshot(
    slice="premium",
    **_REF,
    ttft_p50_s=0.07,
    ttft_p99_s=0.0798,
    ttft_mean_s=0.0604,
    tpot_p50_s=0.03463,
    tpot_p99_s=0.05083,
    tpot_mean_s=0.02734,
    output_tokens_per_s=72.75,
    request_rate=0.25,
    request_count=1.5,
    tpot_request_count=435.0,
    link_rx_bps=177_788.0,
    link_tx_bps=32_878.0,
    link_capacity_bps=1e10,
    wan_rx_bps=1_026_713.0,
    wan_capacity_bps=13e6,
    wan_rtt_s=0.02009,
    wan_base_rtt_s=0.009,
    requests_waiting=0.0,
    requests_running=2.0,
    queue_time_p99_s=0.297,
    replicas=6.0,
    replicas_max=6.0,
    gpu_share=1.0,
    kv_cache_usage=0.0065,
    preemptions_per_s=0.0,
    ref_ttft_p50_s=0.09947,
    ref_ttft_mean_s=0.09122,
    ref_tpot_p50_s=0.02205,
    ref_tpot_mean_s=0.02393,
    ref_output_tokens_per_s=82.43,
    ref_ttft_p99_s=0.17019,
    ref_tpot_p99_s=0.05219,
)

# s9029-all-premium-w05 (blind-v5, embedded; truth compute + queue, v7 said queue alone): TTFT 25x
# its reference at the replica ceiling, and a GPU share of 0.41 reported on the tier's replicas.
SHARE_CUT = SliceSnapshot(
    slice="premium",
    **_REF,
    ttft_p50_s=1.8125,
    ttft_p99_s=4.9347,
    ttft_mean_s=1.7688,
    tpot_p50_s=0.03827,
    tpot_p99_s=0.08575,
    tpot_mean_s=0.03376,
    output_tokens_per_s=999.5,
    request_rate=11.75,
    request_count=70.5,
    tpot_request_count=5986.5,
    link_rx_bps=2_540_453.0,
    link_tx_bps=468_898.0,
    link_capacity_bps=1e10,
    wan_rx_bps=1_617_703.0,
    wan_capacity_bps=13e6,
    wan_rtt_s=0.01737,
    wan_base_rtt_s=0.009,
    requests_waiting=0.0,
    requests_running=27.0,
    queue_time_p99_s=0.297,
    replicas=6.0,
    replicas_max=6.0,
    gpu_share=0.4091,
    kv_cache_usage=0.0206,
    preemptions_per_s=0.0,
    ref_ttft_p50_s=0.07283,
    ref_ttft_mean_s=0.07284,
    ref_tpot_p50_s=0.01811,
    ref_tpot_mean_s=0.02384,
    ref_output_tokens_per_s=75.23,
    ref_ttft_p99_s=0.15147,
    ref_tpot_p99_s=0.04473,
)

# s2002--c1-premium-w05 (test, embedded; truth healthy, v7 said network): the path's WAN link at
# 98.6 % of its rate and the P99 TPOT 3.7x its reference, with both TTFT statistics under theirs.
WAN_TAIL = SliceSnapshot(
    slice="premium",
    **_REF,
    ttft_p50_s=0.07,
    ttft_p99_s=0.0798,
    ttft_mean_s=0.07357,
    tpot_p50_s=0.01783,
    tpot_p99_s=0.18117,
    tpot_mean_s=0.03053,
    output_tokens_per_s=82.5,
    request_rate=0.5,
    request_count=3.0,
    tpot_request_count=619.5,
    link_rx_bps=245_382.0,
    link_tx_bps=33_224.0,
    link_capacity_bps=1e10,
    wan_rx_bps=282_313.0,
    wan_capacity_bps=286_430.0,
    wan_rtt_s=0.07686,
    wan_base_rtt_s=0.018,
    requests_waiting=0.0,
    requests_running=2.0,
    queue_time_p99_s=0.297,
    replicas=1.0,
    replicas_max=6.0,
    gpu_share=1.0,
    kv_cache_usage=0.0076,
    preemptions_per_s=0.0,
    ref_ttft_p50_s=0.07347,
    ref_ttft_mean_s=0.07938,
    ref_tpot_p50_s=0.01907,
    ref_tpot_mean_s=0.02392,
    ref_output_tokens_per_s=165.68,
    ref_ttft_p99_s=0.14495,
    ref_tpot_p99_s=0.0487,
)


def _notes(d: Diagnosis) -> str:
    return " | ".join(e.note or "" for e in d.evidence if e.signal in ("verdict", "confidence_cap"))


# -- the median's drift ---------------------------------------------------------------------------


def test_a_median_tpot_past_its_bar_with_its_tail_at_the_reference_is_no_contention() -> None:
    d = classify(DRIFT)
    assert d.regime is Regime.HEALTHY
    assert "median's drift" in _notes(d)


def test_the_tail_rising_with_the_median_is_contention() -> None:
    d = classify(dataclasses.replace(DRIFT, tpot_p99_s=DRIFT.ref_tpot_p99_s * 1.6))  # type: ignore[operator]
    assert d.regime is Regime.COMPUTE_LIMITED
    assert "median's drift" not in _notes(d)


@pytest.mark.parametrize("field", ["tpot_p99_s", "ref_tpot_p99_s"])
def test_without_the_tail_or_its_measured_reference_the_drift_is_not_read(field: str) -> None:
    d = classify(dataclasses.replace(DRIFT, **{field: None}))
    assert d.regime is Regime.COMPUTE_LIMITED
    assert d.confidence < CONFIDENT


def test_a_reported_share_drop_confirms_the_median() -> None:
    d = classify(dataclasses.replace(DRIFT, gpu_share=0.5))
    assert d.regime is Regime.COMPUTE_LIMITED


def test_beside_a_material_ttft_the_median_still_counts_for_compute() -> None:
    # A queue binds through TTFT: the rule does not strip compute's share of TPOT from the verdict.
    snap = dataclasses.replace(DRIFT, ttft_p50_s=1.5, ttft_p99_s=3.0, ttft_mean_s=1.4, requests_waiting=6.0, request_count=40.0)
    base = dataclasses.replace(DEFAULT, tpot_tail_confirmed_ratio=0.0)  # a tail bar nothing passes under: the rule off
    on, off = classify(snap), classify(snap, thresholds=base)
    assert (on.regime, on.secondary) == (off.regime, off.secondary)
    assert Regime.COMPUTE_LIMITED in (on.regime, *on.secondary)


# -- a queue behind a cut share ---------------------------------------------------------------------


def test_a_queue_beside_a_reported_share_drop_names_compute_first() -> None:
    d = classify(SHARE_CUT)
    assert d.regime is Regime.COMPUTE_LIMITED
    assert Regime.QUEUE_LIMITED in d.secondary
    assert "slowed 2.4x by their GPU share" in _notes(d)
    assert d.confidence < CONFIDENT  # compute's own share is not material: held below the bar


@pytest.mark.parametrize("change", [{"gpu_share": None}, {"gpu_share": 0.95}])
def test_without_a_share_drop_the_queue_stands_alone(change: dict[str, object]) -> None:
    d = classify(dataclasses.replace(SHARE_CUT, **change))
    assert d.regime is Regime.QUEUE_LIMITED


# -- a WAN link's token-gap tail ----------------------------------------------------------------------


def test_a_full_wan_link_whose_tail_no_first_token_shows_binds_nothing() -> None:
    d = classify(WAN_TAIL)
    assert d.regime is Regime.HEALTHY
    assert d.confidence < CONFIDENT  # the tail past its bar still holds the healthy verdict below the bar


@pytest.mark.parametrize(
    "change",
    [
        {"ttft_p50_s": 0.25, "ttft_mean_s": 0.25},  # first tokens 3.4x their reference, +176 ms
        {"ttft_p99_s": 0.40},  # the tail of first tokens 2.8x its reference, +255 ms
        {"ttft_p99_s": None},  # one TTFT statistic missing: the link could show in it
    ],
)
def test_first_tokens_showing_the_link_or_missing_leave_the_tail_binding(change: dict[str, object]) -> None:
    d = classify(dataclasses.replace(WAN_TAIL, **change))
    assert d.regime is Regime.NETWORK_LIMITED


def test_the_edge_cap_keeps_its_tail() -> None:
    # The rule is the WAN link's: at a full edge cap the P99 TPOT counts beside a quiet TTFT as before.
    snap = dataclasses.replace(WAN_TAIL, wan_rx_bps=28_000.0, link_cap_bps=250_000.0)
    assert classify(snap).regime is Regime.NETWORK_LIMITED
