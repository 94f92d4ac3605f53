"""v15: two verdicts a missing TTFT statistic could overturn are held below the bar.

- A full WAN link binds the network unless both TTFT statistics sit at their references (v8's
  ``_wan_tail_quiet``). Found by v14's blind score: ``s9156-all-standard-w03`` (Prometheus) read
  compute 0.70 whole and network 0.80 without its P99 TTFT; the network verdict is now capped.
- A material WAN delay binds where a first token shows it. With no TTFT statistic at all, a verdict
  naming another resource is capped (found by a review of v14 on a hand-built window)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from inferslice.bench.corpus_score import load
from inferslice.bench.corpus_windows import inferslice_verdict
from inferslice.bottleneck import classify
from inferslice.diagnosis import CONFIDENT, Regime
from inferslice.snapshot import SliceSnapshot

ROOT = Path(__file__).resolve().parents[2]

# A 0.44 s round trip over a 0.06 s base: material beside the default 0.5 s SLO; TPOT 8x its
# reference with preemptions: compute contention too.
DELAYED = SliceSnapshot(
    "x", ttft_mean_s=1.0, tpot_p50_s=0.5, output_tokens_per_s=1.0, link_rx_bps=1e3, link_cap_bps=1e5,
    wan_rtt_s=0.5, wan_base_rtt_s=0.0625, preemptions_per_s=1.0, ref_tpot_mean_s=0.0625, ref_output_tokens_per_s=10.0,
)  # fmt: skip


def test_the_blind_window_keeps_the_rule() -> None:
    ws = {w.id: w for w in load([ROOT / "bench" / "results" / "diagnosis" / "corpus17" / "blind-v14"]) if w.seed == 9156}
    w = ws["s9156-all-standard-w03/prometheus"]
    full = inferslice_verdict(w)
    less = inferslice_verdict(dataclasses.replace(w, snapshot=dataclasses.replace(w.snapshot, ttft_p99_s=None)))
    assert full.primary == "compute"  # both TTFT statistics at their references: the full WAN link delays no first token
    assert less.primary == "network" and less.confidence < CONFIDENT
    assert any("without both TTFT statistics" in c for c in less.caps)


def test_a_delay_no_ttft_statistic_could_show_caps_another_resource() -> None:
    full = classify(DELAYED)
    assert full.regime is Regime.NETWORK_LIMITED  # the TTFT mean shows the delay
    # v18: judged without the P99 TTFT, which could show the delay under a quarter of the excess.
    assert full.confidence < CONFIDENT
    less = classify(dataclasses.replace(DELAYED, ttft_mean_s=None))
    assert less.regime is Regime.COMPUTE_LIMITED and less.confidence < CONFIDENT
    assert any(e.signal == "confidence_cap" and "no TTFT statistic could show it" in (e.note or "") for e in less.evidence)


def test_without_a_material_delay_the_compute_verdict_stands_confident() -> None:
    d = classify(dataclasses.replace(DELAYED, ttft_mean_s=None, wan_rtt_s=0.07))  # a few ms over its base
    assert d.regime is Regime.COMPUTE_LIMITED and d.confidence >= CONFIDENT
