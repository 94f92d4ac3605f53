"""v13: a healthy verdict that a reported GPU-share drop could overturn through the judged TPOT statistic
is not confident without the share (found on v12's blind set: s9150-all-free-w06, embedded)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from inferslice.bench.corpus_score import load
from inferslice.bench.corpus_windows import inferslice_verdict
from inferslice.diagnosis import CONFIDENT

ROOT = Path(__file__).resolve().parents[2]


def test_the_blind_window_itself_keeps_the_rule() -> None:
    """Median TPOT 2x its reference, its P99 at 1.13x (under the confirmed-tail bar), the GPU share at
    0.52: compute. Without the share the median reads as drift (v8), healthy: not a confident one."""
    ws = {w.id: w for w in load([ROOT / "bench" / "results" / "diagnosis" / "corpus17" / "blind-v12"])}
    w = ws["s9150-all-free-w06/embedded"]
    full = inferslice_verdict(w)
    less = inferslice_verdict(dataclasses.replace(w, snapshot=dataclasses.replace(w.snapshot, gpu_share=None)))
    assert full.primary == "compute"
    assert not (less.primary != full.primary and less.confidence >= CONFIDENT and full.confidence >= CONFIDENT)
