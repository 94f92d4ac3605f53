"""The confidence calibration table (``bottleneck/confidence.py``). Written by ``inferslice bench corpus
calibrate`` (bench/calibrate.py); edit the corpus or the fit, not this file.

Provenance:
INTERIM until the issue-17 corpus's tune seeds are fitted: isotonic fit (PAV, >= 30 windows a
step) on the tune half of issue 9's corpus (bench/results/diagnosis/corpus.jsonl, split == tune:
478 windows), capped verdicts included (most of that corpus's queue and compute windows lack the
link and are capped); classifier sha256 ee7ce90857e75eaa (the table file excluded); 2026-12-02
"""

from __future__ import annotations

PROVENANCE = (
    "INTERIM until the issue-17 corpus's tune seeds are fitted: isotonic fit (PAV, >= 30 windows a "
    "step) on the tune half of issue 9's corpus (bench/results/diagnosis/corpus.jsonl, split == tune: "
    "478 windows), capped verdicts included (most of that corpus's queue and compute windows lack the "
    "link and are capped); classifier sha256 ee7ce90857e75eaa (the table file excluded); 2026-12-02"
)
UNCALIBRATED = 0.5  # a regime the tune seeds never produced: no evidence it is right
# regime -> ((margin upper bound, probability right), ...), ascending; the last bound is +inf.
# Each step's window count is in the comment beside it.
TABLE: dict[str, tuple[tuple[float, float], ...]] = {
    "compute_limited": (
        (float("inf"), 0.9839),  # 60 windows
    ),
    "healthy": (
        (float("inf"), 0.9880),  # 247 windows
    ),
    "network_limited": (
        (float("inf"), 0.9898),  # 96 windows
    ),
    "queue_limited": (
        (4.9975, 0.9375),  # 30 windows
        (float("inf"), 0.9778),  # 43 windows
    ),
}
