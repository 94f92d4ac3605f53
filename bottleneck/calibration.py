"""The confidence calibration table (``bottleneck/confidence.py``). Written by ``inferslice bench corpus
calibrate`` (bench/calibrate.py); edit the corpus or the fit, not this file.

Provenance:
isotonic fit (PAV, >= 30 windows a step) on the tune seeds 1000-1005 of
bench/results/diagnosis/corpus17/tune: 475 uncapped verdicts of 1140 windows x sources (healthy
407, network_limited 13, queue_limited 55); classifier sha256 06d034c0dcfdde04; 2026-12-02
"""

from __future__ import annotations

PROVENANCE = (
    "isotonic fit (PAV, >= 30 windows a step) on the tune seeds 1000-1005 of "
    "bench/results/diagnosis/corpus17/tune: 475 uncapped verdicts of 1140 windows x sources (healthy "
    "407, network_limited 13, queue_limited 55); classifier sha256 06d034c0dcfdde04; 2026-12-02"
)
UNCALIBRATED = 0.5  # a regime the tune seeds never produced: no evidence it is right
# regime -> ((margin upper bound, probability right), ...), ascending; the last bound is +inf.
# Each step's window count is in the comment beside it.
TABLE: dict[str, tuple[tuple[float, float], ...]] = {
    "healthy": (
        (2.7405, 0.8837),  # 84 windows
        (3.5393, 0.9211),  # 36 windows
        (4.1922, 0.9333),  # 43 windows
        (float("inf"), 0.9675),  # 244 windows
    ),
    "network_limited": (
        (float("inf"), 0.9333),  # 13 windows
    ),
    "queue_limited": (
        (float("inf"), 0.8596),  # 55 windows
    ),
}
