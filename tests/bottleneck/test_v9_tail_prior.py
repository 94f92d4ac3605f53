"""v9 (docs/diagnosis.md, "v9: a binding tail's prior reference"): a verdict that binds through the P99
TPOT alone beside a judged median rests on the tail's reference; when the window lacks it and the
prior's range (1-3x the median) could flip the tail's materiality, the verdict is held below the bar.
The fixture is the blind window that broke the missing-field rule for v7 and v8 alike."""

from __future__ import annotations

import dataclasses

from inferslice.bottleneck import classify
from inferslice.diagnosis import CONFIDENT, Regime
from inferslice.snapshot import SliceSnapshot

# s9063--c1-premium-w03 (blind-v8, embedded; truth healthy): the path's WAN link at 87 % of its rate,
# the P99 TPOT 1.76x its measured reference P99 (under the 2x bar), the median at its reference.
WINDOW = SliceSnapshot(
    slice="premium",
    window_s=6.0,
    slo_ttft_p99_s=0.5,
    ttft_p50_s=0.15357,
    ttft_p99_s=0.24807,
    tpot_p50_s=0.019264,
    tpot_p99_s=0.086375,
    request_count=13.5,
    link_rx_bps=391_128.0,
    link_capacity_bps=1e10,
    wan_rx_bps=893_683.0,
    wan_capacity_bps=1_022_586.0,
    gpu_share=1.0,
    ref_ttft_p50_s=0.10125,
    ref_ttft_p99_s=0.24573,
    ref_tpot_p50_s=0.019850,
    ref_tpot_p99_s=0.049146,
)


def test_with_its_measured_tail_reference_the_window_is_healthy() -> None:
    d = classify(WINDOW)
    assert d.regime is Regime.HEALTHY


def test_without_it_the_tail_binds_but_the_prior_holds_it_below_the_bar() -> None:
    d = classify(dataclasses.replace(WINDOW, ref_tpot_p99_s=None))
    assert d.regime is Regime.NETWORK_LIMITED  # the prior's 1.4x puts the tail at 3.1x its reference
    assert d.confidence < CONFIDENT
    caps = next(e.note for e in d.evidence if e.signal == "confidence_cap")
    assert "derived by a prior" in caps


def test_a_tail_past_the_bar_at_every_prior_ratio_stays_confident() -> None:
    # v10: the prior's range beside a median at its reference is 1-20x the median (the widest measured
    # reference, the CPU engine's): 0.9 s is past 2x the reference P99 anywhere in it, so no cap.
    snap = dataclasses.replace(WINDOW, ref_tpot_p99_s=None, tpot_p99_s=0.9, request_count=40.0)
    d = classify(snap)
    assert d.regime is Regime.NETWORK_LIMITED
    caps = " ".join(e.note for e in d.evidence if e.signal == "confidence_cap")
    assert "derived by a prior" not in caps


def test_a_tail_inside_a_heavy_tailed_engines_range_is_held() -> None:
    # 0.25 s is 12.6x the median: past the bar for v9's 1-3x range, inside v10's 1-20x (an engine whose
    # reference P99 sits 12x its median, as the CPU engine's do, would read it unloaded).
    snap = dataclasses.replace(WINDOW, ref_tpot_p99_s=None, tpot_p99_s=0.25, request_count=40.0)
    d = classify(snap)
    assert d.regime is Regime.NETWORK_LIMITED and d.confidence < CONFIDENT
    caps = " ".join(e.note for e in d.evidence if e.signal == "confidence_cap")
    assert "derived by a prior" in caps
