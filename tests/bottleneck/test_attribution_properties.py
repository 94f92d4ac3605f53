"""Properties of the latency attribution (issue 9): shares add up, a missing field never flips a
confident verdict into another confident one, and the verdict has no unit of time."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from inferslice.bottleneck import classify
from inferslice.bottleneck.classify import CONFIDENT
from inferslice.diagnosis import RESOURCES, Regime
from inferslice.snapshot import SNAPSHOT_FIELDS, SliceSnapshot, snapshot_from_dict

LATENCIES = (
    *("ttft_p50_s", "ttft_p99_s", "ttft_mean_s", "tpot_p50_s", "tpot_p99_s", "tpot_mean_s", "queue_time_p99_s"),
    *("wan_rtt_s", "wan_base_rtt_s"),  # the WAN path's RTT is a latency too: a measured delay scales with the rest
)
REFS = ("ref_ttft_p50_s", "ref_ttft_p99_s", "ref_ttft_mean_s", "ref_tpot_p50_s", "ref_tpot_p99_s", "ref_tpot_mean_s")
SLOS = ("slo_ttft_p99_s", "slo_tpot_p99_s")


def _pos(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)


def _opt(s: st.SearchStrategy[float]) -> st.SearchStrategy[float | None]:
    return st.one_of(st.none(), s)


# Physically plausible ranges (seconds, tokens/s, bit/s), every field optional.
FIELD_STRATEGIES: dict[str, st.SearchStrategy[float | None]] = {
    "slo_ttft_p99_s": _opt(_pos(0.1, 2.0)),
    "slo_tpot_p99_s": _opt(_pos(0.02, 0.5)),
    "ttft_p50_s": _opt(_pos(0.01, 20.0)),
    "ttft_p99_s": _opt(_pos(0.01, 40.0)),
    "ttft_mean_s": _opt(_pos(0.01, 20.0)),
    "tpot_p50_s": _opt(_pos(0.002, 0.5)),
    "tpot_p99_s": _opt(_pos(0.002, 1.0)),
    "tpot_mean_s": _opt(_pos(0.002, 0.5)),
    "output_tokens_per_s": _opt(_pos(1.0, 3000.0)),
    "request_rate": _opt(_pos(0.01, 20.0)),
    "link_rx_bps": _opt(_pos(1e3, 1e8)),
    "link_tx_bps": _opt(_pos(1e3, 1e8)),
    "link_cap_bps": _opt(_pos(1e5, 1e8)),
    "link_capacity_bps": _opt(_pos(1e8, 1e10)),
    "requests_waiting": _opt(st.integers(0, 40).map(float)),
    "requests_running": _opt(st.integers(0, 40).map(float)),
    "queue_time_p99_s": _opt(_pos(0.0, 20.0)),
    "replicas": _opt(st.integers(0, 6).map(float)),
    "replicas_max": _opt(st.integers(1, 6).map(float)),
    "gpu_utilization": _opt(_pos(0.0, 1.0)),
    "gpu_share": _opt(_pos(0.1, 1.0)),
    "prior_gpu_share": _opt(_pos(0.1, 1.0)),  # v14: the window before's share (a co-tenant's tail)
    "kv_cache_usage": _opt(_pos(0.0, 1.0)),
    "preemptions_per_s": _opt(_pos(0.0, 5.0)),
    "ref_ttft_p50_s": _opt(_pos(0.01, 0.5)),
    "ref_ttft_p99_s": _opt(_pos(0.01, 1.0)),
    "ref_ttft_mean_s": _opt(_pos(0.01, 0.5)),
    "ref_tpot_p50_s": _opt(_pos(0.005, 0.1)),
    "ref_tpot_p99_s": _opt(_pos(0.005, 0.2)),
    "ref_tpot_mean_s": _opt(_pos(0.005, 0.1)),
    "ref_output_tokens_per_s": _opt(_pos(10.0, 2000.0)),
    # The request counts the sampling bounds read, the idle rule's gauges and the WAN path (v2's rules).
    "request_count": _opt(st.integers(0, 600).map(float)),
    "tpot_request_count": _opt(st.integers(0, 5000).map(float)),
    "wan_rx_bps": _opt(_pos(1e4, 1e8)),
    "wan_capacity_bps": _opt(_pos(1e5, 1e8)),
    "wan_rtt_s": _opt(_pos(0.001, 0.5)),
    "wan_base_rtt_s": _opt(_pos(0.001, 0.1)),
}


def _physical(d: dict[str, float | None]) -> SliceSnapshot:
    """One distribution per statistic: a P99 is never below its median, and the mean lies between
    half the median (bucket interpolation skews it low) and the P99."""
    for lo, hi in (
        ("ttft_p50_s", "ttft_p99_s"),
        ("tpot_p50_s", "tpot_p99_s"),
        ("ref_ttft_p50_s", "ref_ttft_p99_s"),
        ("ref_tpot_p50_s", "ref_tpot_p99_s"),
    ):
        a, b = d.get(lo), d.get(hi)
        if a is not None and b is not None and b < a:
            d[lo], d[hi] = b, a
    for p50, mean, p99 in (
        ("ttft_p50_s", "ttft_mean_s", "ttft_p99_s"),
        ("tpot_p50_s", "tpot_mean_s", "tpot_p99_s"),
        ("ref_ttft_p50_s", "ref_ttft_mean_s", "ref_ttft_p99_s"),
        ("ref_tpot_p50_s", "ref_tpot_mean_s", "ref_tpot_p99_s"),
    ):
        m, lo, hi = d.get(mean), d.get(p50), d.get(p99)
        if m is not None:
            if lo is not None:
                m = max(m, 0.5 * lo)
            if hi is not None:
                m = min(m, hi)
            d[mean] = m
    return snapshot_from_dict({"slice": "t", **{k: v for k, v in d.items() if v is not None}})


snapshots = st.fixed_dictionaries(dict(FIELD_STRATEGIES)).map(_physical)
SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("DIAG_EXAMPLES", "600")), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(snapshots)
def test_shares_are_non_negative_and_add_up(snap: SliceSnapshot) -> None:
    d = classify(snap)
    if d.attribution is None:
        return
    for s in d.attribution.shares:
        parts = (s.queue_s, s.network_s, s.compute_s)
        assert all(p >= 0.0 for p in parts) and s.base_s >= -1e-12
        assert abs(sum(parts) + s.base_s - s.observed_s) <= 1e-9 * max(1.0, s.observed_s)
        assert sum(parts) <= s.excess_s + 1e-9 * max(1.0, s.observed_s)  # never more than the excess
        if s.reference_s is not None and s.observed_s > s.reference_s:
            assert s.base_s >= s.reference_s - 1e-9  # the reference level is never attributed
    for r in RESOURCES:
        assert 0.0 <= d.attribution.fraction(r) <= 1.0


def _confident(regime: Regime, confidence: float) -> bool:
    return regime is not Regime.UNKNOWN and confidence >= CONFIDENT


@SETTINGS
@given(snapshots, st.sampled_from([f for f in SNAPSHOT_FIELDS if f not in ("slice", "id", "window_end_s", "window_s")]))
def test_removing_a_field_never_turns_a_confident_verdict_into_another(snap: SliceSnapshot, field: str) -> None:
    assume(getattr(snap, field) is not None)
    full = classify(snap)
    less = classify(dataclasses.replace(snap, **{field: None}))
    if _confident(full.regime, full.confidence) and _confident(less.regime, less.confidence):
        assert less.regime is full.regime, (
            f"without {field}: {full.regime.value} {full.confidence} -> {less.regime.value} {less.confidence}; {snap.to_dict()}"
        )


@SETTINGS
@given(snapshots, st.sampled_from([0.1, 0.37, 3.0, 10.0]))
def test_scaling_every_latency_its_reference_and_the_slo_keeps_the_verdict(snap: SliceSnapshot, k: float) -> None:
    # Every latency, its reference and the SLO scale by k; a rate in requests/s scales by 1/k with them
    # (Little's law keeps the number waiting). Throughput in tokens/s is a rate of work: a slower
    # world at the same ratios. The absolute TPOT ceiling used without any reference has a unit, so
    # the property holds where a reference or an SLO is known.
    assume(snap.ref_tpot_p50_s is not None or snap.ref_tpot_p99_s is not None or snap.ref_tpot_mean_s is not None)
    assume(snap.slo_ttft_p99_s is not None)
    scaled: dict[str, Any] = {f: getattr(snap, f) * k for f in (*LATENCIES, *REFS, *SLOS) if getattr(snap, f) is not None}
    for f in ("output_tokens_per_s", "ref_output_tokens_per_s", "request_rate"):
        if getattr(snap, f) is not None:
            scaled[f] = getattr(snap, f) / k
    other = dataclasses.replace(snap, **scaled)
    a, b = classify(snap), classify(other)
    why = f"x{k}: {a.regime.value} {a.secondary} {a.confidence} -> {b.regime.value} {b.secondary} {b.confidence}; {snap.to_dict()}"
    assert (a.regime, a.secondary, a.slo) == (b.regime, b.secondary, b.slo), why
    assert abs(a.confidence - b.confidence) < 1e-6, why
