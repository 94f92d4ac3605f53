"""Classifier verdicts on snapshots built from the brief's figures (BRIEF.md, "What the measurements showed")."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from inferslice.bottleneck import DEFAULT, Thresholds, classify
from inferslice.diagnosis import CONFIDENT, Diagnosis, Evidence, NetworkCause, Regime, SloState
from inferslice.snapshot import Reference, SliceSnapshot, snapshot_from_dict

MBPS = 1e6


def snap(**fields: Any) -> SliceSnapshot:
    return snapshot_from_dict({"slice": "free", "slo_ttft_p99_s": 0.5, **fields})


@pytest.fixture
def queue_limited() -> SliceSnapshot:
    # Free at concurrency 16: P99 TTFT ~5 s, TPOT ~26 ms on a 25 ms reference, link far from any cap.
    return snap(ttft_p99_s=5.0, tpot_p50_s=0.026, ref_tpot_p50_s=0.025, link_rx_bps=0.9 * MBPS, link_cap_bps=10 * MBPS, requests_waiting=4)


@pytest.fixture
def network_limited() -> SliceSnapshot:
    # Concurrency 10 under a 0.5 Mbps client-edge cap: rx pinned at 0.46 Mbps, P99 TPOT 200 ms vs 30 ms,
    # 220 tok/s vs 370 tok/s unconstrained, P99 TTFT 2-3 s.
    return snap(
        ttft_p99_s=2.5,
        tpot_p99_s=0.2,
        ref_tpot_p50_s=0.03,
        link_rx_bps=0.46 * MBPS,
        link_cap_bps=0.5 * MBPS,
        output_tokens_per_s=220,
        ref_output_tokens_per_s=370,
    )


def evidence(diag: Diagnosis, signal: str) -> Evidence:
    return next(e for e in diag.evidence if e.signal == signal)


def caps(diag: Diagnosis) -> list[str]:
    """Why the verdict's confidence is capped below the bar (empty: it is not)."""
    return [c for e in diag.evidence if e.signal == "confidence_cap" for c in e.note.split("; ")]


def test_queue_limited_from_the_brief(queue_limited: SliceSnapshot) -> None:
    d = classify(queue_limited)
    assert d.regime is Regime.QUEUE_LIMITED
    assert d.secondary == ()
    assert d.slo is SloState.BREACHED
    assert d.confidence >= 0.7
    assert evidence(d, "tpot_p50_s").crossed is False
    assert evidence(d, "link_utilization").crossed is False
    assert evidence(d, "requests_waiting").crossed is True


def test_queue_limited_without_confirmations_is_less_confident(queue_limited: SliceSnapshot) -> None:
    bare = dataclasses.replace(queue_limited, requests_waiting=None)
    confirmed = classify(queue_limited)
    d = classify(bare)
    assert d.regime is Regime.QUEUE_LIMITED
    assert d.confidence < confirmed.confidence
    assert "requests_waiting" in d.missing


@pytest.mark.parametrize("rx_mbps", [0.46, 0.48, 0.5])
def test_network_limited_from_the_brief(network_limited: SliceSnapshot, rx_mbps: float) -> None:
    d = classify(dataclasses.replace(network_limited, link_rx_bps=rx_mbps * MBPS))
    assert d.regime is Regime.NETWORK_LIMITED
    assert Regime.QUEUE_LIMITED not in d.secondary  # nothing says requests queue
    assert evidence(d, "link_utilization").crossed is True
    assert evidence(d, "output_tokens_per_s").crossed is True
    assert evidence(d, "tpot_p99_s_vs_ref").crossed is True
    assert d.confidence >= CONFIDENT and not caps(d)
    assert d.network_cause is NetworkCause.EDGE_CAP  # the slice's own cap: raise it


def test_network_limited_on_throughput_alone(network_limited: SliceSnapshot) -> None:
    d = classify(dataclasses.replace(network_limited, tpot_p99_s=None, ref_tpot_p50_s=None))
    assert d.regime is Regime.NETWORK_LIMITED


def test_link_at_its_cap_with_tpot_unchanged_is_healthy() -> None:
    # "A link can run at or even slightly above its nominal cap with TPOT unchanged; utilisation alone
    # does not make a bottleneck." 1.02 x cap, TPOT on its reference, throughput held, SLO met.
    s = snap(
        ttft_p99_s=0.12,
        tpot_p50_s=0.026,
        tpot_p99_s=0.034,
        ref_tpot_p50_s=0.025,
        link_rx_bps=1.02 * MBPS,
        link_cap_bps=1.0 * MBPS,
        output_tokens_per_s=365,
        ref_output_tokens_per_s=370,
        gpu_utilization=0.97,  # a busy GPU is not a bottleneck either
    )
    d = classify(s)
    assert d.regime is Regime.HEALTHY
    assert d.secondary == ()
    assert d.slo is SloState.MET
    assert evidence(d, "link_utilization").crossed is True  # reported, but it does not decide
    assert any("utilisation alone" in e.note for e in d.evidence if e.signal == "verdict")


def test_queue_limited_while_the_link_runs_at_its_cap(queue_limited: SliceSnapshot) -> None:
    d = classify(dataclasses.replace(queue_limited, link_rx_bps=0.99 * MBPS, link_cap_bps=1.0 * MBPS))
    assert d.regime is Regime.QUEUE_LIMITED


def test_compute_limited() -> None:
    s = snap(ttft_p99_s=0.3, tpot_p50_s=0.05, ref_tpot_p50_s=0.025, link_rx_bps=0.3 * MBPS, link_cap_bps=10 * MBPS, gpu_share=0.4)
    d = classify(s)
    assert d.regime is Regime.COMPUTE_LIMITED
    assert evidence(d, "gpu_share").crossed is True
    assert d.slo is SloState.MET


def test_compute_limited_needs_the_link_or_a_strong_confirmation() -> None:
    base = {"ttft_p99_s": 0.3, "tpot_p50_s": 0.05, "ref_tpot_p50_s": 0.025}
    unknown = classify(snap(**base, gpu_utilization=0.99))  # utilisation alone cannot tell network from compute
    assert unknown.regime is Regime.UNKNOWN
    assert "link_rx_bps" in unknown.missing and "link_cap_bps" in unknown.missing
    weak = classify(snap(**base, preemptions_per_s=2.0))
    assert weak.regime is Regime.COMPUTE_LIMITED and weak.confidence < CONFIDENT
    assert any("link unknown" in c for c in caps(weak))
    sure = classify(snap(**base, preemptions_per_s=2.0, link_rx_bps=1e5, link_cap_bps=1e7))
    assert sure.confidence >= weak.confidence
    assert not any("link unknown" in c for c in caps(sure))


def test_queue_and_network_combine() -> None:
    # A tier already queueing (replicas at the ceiling, requests waiting) that also hits its cap.
    s = snap(
        ttft_p99_s=5.0,
        requests_waiting=8,
        replicas=1,
        replicas_max=1,
        link_rx_bps=0.49 * MBPS,
        link_cap_bps=0.5 * MBPS,
        tpot_p99_s=0.2,
        ref_tpot_p50_s=0.03,
    )
    d = classify(s)
    assert d.regime is Regime.NETWORK_LIMITED
    assert d.secondary == (Regime.QUEUE_LIMITED,)


def test_compute_and_queue_combine() -> None:
    s = snap(ttft_p99_s=3.0, tpot_p50_s=0.06, ref_tpot_p50_s=0.025, link_rx_bps=1e5, link_cap_bps=1e7, gpu_share=0.5, queue_time_p99_s=2.0)
    d = classify(s)
    assert (d.regime, d.secondary) == (Regime.COMPUTE_LIMITED, (Regime.QUEUE_LIMITED,))


def test_only_ttft_is_unknown_and_says_what_is_missing() -> None:
    d = classify(snap(ttft_p99_s=3.0))
    assert d.regime is Regime.UNKNOWN
    assert d.slo is SloState.BREACHED
    assert {"tpot_p50_s", "tpot_p99_s", "link_rx_bps", "link_cap_bps"} <= set(d.missing)
    assert d.confidence == 0.0


def test_nothing_known_is_unknown() -> None:
    d = classify(SliceSnapshot(slice="anything"))
    assert d.regime is Regime.UNKNOWN and d.slo is SloState.UNKNOWN
    assert {"ttft_p99_s", "tpot_p99_s"} <= set(d.missing)


def test_healthy_at_low_load() -> None:
    s = snap(ttft_p99_s=0.1, tpot_p50_s=0.025, ref_tpot_p50_s=0.025, link_rx_bps=2e5, link_cap_bps=1e7, requests_waiting=0)
    d = classify(s)
    assert d.regime is Regime.HEALTHY and d.slo is SloState.MET
    # Without a TTFT reference a healthy verdict stays below the confident bar (issue 9: a reference the
    # window lacks could show an inflation, so removing it must not leave a confident verdict behind).
    assert d.confidence < CONFIDENT
    sure = classify(dataclasses.replace(s, ref_ttft_p50_s=0.05, ttft_p50_s=0.05))
    assert sure.regime is Regime.HEALTHY and sure.confidence >= CONFIDENT


def test_at_risk_slo() -> None:
    d = classify(snap(ttft_p99_s=0.45, tpot_p50_s=0.025, ref_tpot_p50_s=0.025))
    assert d.slo is SloState.AT_RISK


def test_tpot_slo_breach_counts() -> None:
    d = classify(snap(ttft_p99_s=0.2, tpot_p99_s=0.3, slo_tpot_p99_s=0.1, link_rx_bps=1e5, link_cap_bps=1e7))
    assert d.slo is SloState.BREACHED
    assert d.regime is Regime.COMPUTE_LIMITED


def test_reference_argument_fills_missing_ref_fields(queue_limited: SliceSnapshot) -> None:
    no_inline = dataclasses.replace(queue_limited, ref_tpot_p50_s=None)
    with_ref = classify(no_inline, Reference(tpot_p50_s=0.025, source="learned", samples=40))
    assert with_ref.regime is Regime.QUEUE_LIMITED
    assert evidence(with_ref, "tpot_p50_s").reference == 0.025
    # An inline reference wins over the one passed in: 0.01 would make TPOT look inflated.
    inline = classify(queue_limited, Reference(tpot_p50_s=0.01))
    assert evidence(inline, "tpot_p50_s").reference == 0.025


def test_without_reference_absolute_fallback_and_lower_confidence(network_limited: SliceSnapshot) -> None:
    bare = dataclasses.replace(network_limited, ref_tpot_p50_s=None, ref_output_tokens_per_s=None)
    d = classify(bare)
    assert d.regime is Regime.NETWORK_LIMITED  # 200 ms P99 TPOT is above the 100 ms absolute ceiling
    assert d.confidence < classify(network_limited).confidence
    assert "ref_tpot_p50_s" in d.missing
    assert evidence(d, "tpot_p99_s").threshold == DEFAULT.fallback_tpot_s


def test_ttft_inflation_against_reference_before_the_slo_breaks() -> None:
    # The queue builds (p50 4x its reference) while P99 still meets the SLO: an early queue-limited verdict.
    s = snap(
        ttft_p50_s=0.2, ref_ttft_p50_s=0.05, ttft_p99_s=0.45, tpot_p50_s=0.025, ref_tpot_p50_s=0.025, link_rx_bps=1e5, link_cap_bps=1e7
    )
    d = classify(s)
    assert d.regime is Regime.QUEUE_LIMITED and d.slo is SloState.AT_RISK


def test_thresholds_are_configurable(network_limited: SliceSnapshot) -> None:
    strict = Thresholds(link_binding_ratio=0.95)  # 0.46/0.5 = 0.92 no longer counts as pinned
    d = classify(network_limited, thresholds=strict)
    assert d.regime is not Regime.NETWORK_LIMITED


def test_ids_and_window_are_carried(queue_limited: SliceSnapshot) -> None:
    d = classify(dataclasses.replace(queue_limited, id="w7", window_end_s=1234.5))
    assert d.id == "w7" and d.window_end_s == 1234.5 and d.slice == "free"
    out = d.to_dict()
    assert set(out) >= {"id", "slice", "regime", "secondary", "confidence", "evidence"}
    assert all(set(e) == {"signal", "value", "reference", "threshold", "crossed", "note"} for e in out["evidence"])


# -- the leading queue signature ---------------------------------------------------------------
def _leading(**kw: float) -> SliceSnapshot:
    base = dict(
        slice="free", slo_ttft_p99_s=0.5, ttft_p50_s=0.06, ttft_p99_s=0.08, tpot_p50_s=0.026, tpot_p99_s=0.027,
        ref_ttft_p50_s=0.06, ref_tpot_p50_s=0.025, link_rx_bps=1.1e6, requests_running=12.0, requests_waiting=12.0,
        replicas=1.0, replicas_max=1.0,
    )  # fmt: skip
    return SliceSnapshot(**{**base, **kw})  # type: ignore[arg-type]


def test_standing_queue_at_the_ceiling_is_queue_limited_before_ttft_rises() -> None:
    d = classify(_leading())
    assert d.regime is Regime.QUEUE_LIMITED
    assert any("queue leads" in e.note for e in d.evidence)


def test_small_or_scalable_queues_are_not_a_leading_signature() -> None:
    assert classify(_leading(requests_waiting=1.0)).regime is Regime.HEALTHY  # one of 12: a burst
    assert classify(_leading(replicas=2.0, replicas_max=3.0)).regime is Regime.HEALTHY  # the autoscaler can still add
    assert classify(_leading(replicas=None)).regime is Regime.HEALTHY  # cannot tell the ceiling
    assert classify(_leading(requests_waiting=0.0)).regime is Regime.HEALTHY
