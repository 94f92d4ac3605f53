from __future__ import annotations

from inferslice.bottleneck import classify, learn_reference
from inferslice.diagnosis import Diagnosis, Regime, SloState
from inferslice.snapshot import Reference, SliceSnapshot


def healthy(slice_name: str = "free") -> Diagnosis:
    return Diagnosis(slice=slice_name, regime=Regime.HEALTHY, confidence=0.9, slo=SloState.MET)


def test_learns_latency_centres_from_healthy_windows() -> None:
    s = SliceSnapshot(slice="free", ttft_p50_s=0.08, tpot_p50_s=0.025, output_tokens_per_s=100.0)
    ref = learn_reference(None, s, healthy())
    assert ref is not None and ref.source == "learned" and ref.samples == 1
    # Throughput is learned with the TPOT it was measured at (issue 9: the load relation needs both).
    assert ref.tpot_p50_s == 0.025 and ref.output_tokens_per_s == 100.0
    s2 = SliceSnapshot(slice="free", ttft_p50_s=0.08, tpot_p50_s=0.035)
    ref2 = learn_reference(ref, s2, healthy())
    assert ref2 is not None and 0.025 < (ref2.tpot_p50_s or 0) < 0.035 and ref2.samples == 2


def test_does_not_learn_from_bottlenecked_or_queueing_windows_or_over_configuration() -> None:
    s = SliceSnapshot(slice="free", tpot_p50_s=0.2)
    cur = Reference(tpot_p50_s=0.025, source="learned", samples=5)
    assert learn_reference(cur, s, Diagnosis(slice="free", regime=Regime.NETWORK_LIMITED, confidence=0.9)) is cur
    queued = SliceSnapshot(slice="free", tpot_p50_s=0.03, requests_waiting=3)
    assert learn_reference(cur, queued, healthy()) is cur
    configured = Reference(tpot_p50_s=0.02, source="configured")
    assert learn_reference(configured, SliceSnapshot(slice="free", tpot_p50_s=0.03), healthy()) is configured


def test_learned_reference_feeds_the_classifier() -> None:
    ref: Reference | None = None
    for _ in range(5):
        low = SliceSnapshot(slice="free", slo_ttft_p99_s=0.5, ttft_p99_s=0.1, tpot_p50_s=0.025, link_rx_bps=1e5, link_cap_bps=1e7)
        ref = learn_reference(ref, low, classify(low, ref))
    assert ref is not None and ref.samples == 5
    loaded = SliceSnapshot(slice="free", slo_ttft_p99_s=0.5, ttft_p99_s=0.3, tpot_p50_s=0.06, link_rx_bps=1e5, link_cap_bps=1e7)
    assert classify(loaded, ref).regime is Regime.COMPUTE_LIMITED  # 0.06 s is 2.4x the learned 0.025 s


def test_a_learned_reference_judges_only_after_min_samples_and_first_windows_weigh_equally() -> None:
    from inferslice.bottleneck import classify
    from inferslice.bottleneck.reference import LearningPolicy, learn_reference, usable_reference
    from inferslice.snapshot import Reference, SliceSnapshot

    policy = LearningPolicy(min_samples=3)
    ref: Reference | None = None
    for tpot in (0.020, 0.030, 0.040):
        snap = SliceSnapshot(
            slice="s",
            slo_ttft_p99_s=0.5,
            ttft_p50_s=0.05,
            ttft_p99_s=0.08,
            tpot_p50_s=tpot,
            tpot_p99_s=tpot,
            link_rx_bps=1e5,
            link_cap_bps=1e7,
        )
        d = classify(snap, usable_reference(ref, policy))
        assert usable_reference(ref, policy) is None  # not yet: fewer than 3 windows seen
        ref = learn_reference(ref, snap, d, policy)
    assert ref is not None and ref.samples == 3
    assert abs((ref.tpot_p50_s or 0) - 0.030) < 1e-9  # the mean of the three, not the first one's EWMA
    assert usable_reference(ref, policy) is ref
    assert usable_reference(Reference(tpot_p50_s=0.03, source="configured"), policy) is not None
