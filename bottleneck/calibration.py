"""The confidence calibration table (``bottleneck/confidence.py``). Written by ``inferslice bench corpus
calibrate`` (bench/calibrate.py); edit the corpus or the fit, not this file.

Provenance:
isotonic fit (PAV, >= 30 windows a step) of every regime on the tune seeds 1000-9103 of
bench/results/diagnosis/corpus17/tune, bench/results/diagnosis/corpus17/test,
bench/results/diagnosis/corpus17/blind, bench/results/diagnosis/corpus17/blind-v4,
bench/results/diagnosis/corpus17/blind-v5, bench/results/diagnosis/corpus17/blind-v6,
bench/results/diagnosis/corpus17/blind-v6b, bench/results/diagnosis/corpus17/blind-v7,
bench/results/diagnosis/corpus17/blind-v8, bench/results/diagnosis/corpus17/blind-v8b,
bench/results/diagnosis/corpus17/blind-v9, bench/results/diagnosis/corpus17/blind-v10,
bench/results/diagnosis/corpus17/blind-v10b, bench/results/diagnosis/corpus17/blind-v10c: 21032
uncapped verdicts of 23340 windows x sources (compute_limited 596, healthy 19421,
network_limited 392, queue_limited 623); classifier sha256 9baf2d7b5954100e; 2026-12-06
"""

from __future__ import annotations

PROVENANCE = (
    "isotonic fit (PAV, >= 30 windows a step) of every regime on the tune seeds 1000-9103 of "
    "bench/results/diagnosis/corpus17/tune, bench/results/diagnosis/corpus17/test, "
    "bench/results/diagnosis/corpus17/blind, bench/results/diagnosis/corpus17/blind-v4, "
    "bench/results/diagnosis/corpus17/blind-v5, bench/results/diagnosis/corpus17/blind-v6, "
    "bench/results/diagnosis/corpus17/blind-v6b, bench/results/diagnosis/corpus17/blind-v7, "
    "bench/results/diagnosis/corpus17/blind-v8, bench/results/diagnosis/corpus17/blind-v8b, "
    "bench/results/diagnosis/corpus17/blind-v9, bench/results/diagnosis/corpus17/blind-v10, "
    "bench/results/diagnosis/corpus17/blind-v10b, bench/results/diagnosis/corpus17/blind-v10c: 21032 "
    "uncapped verdicts of 23340 windows x sources (compute_limited 596, healthy 19421, "
    "network_limited 392, queue_limited 623); classifier sha256 9baf2d7b5954100e; 2026-12-06"
)
UNCALIBRATED = 0.5  # a regime the tune seeds never produced: no evidence it is right
# regime -> ((margin upper bound, probability right), ...), ascending; the last bound is +inf.
# Each step's window count is in the comment beside it.
TABLE: dict[str, tuple[tuple[float, float], ...]] = {
    "compute_limited": (
        (1.8600, 0.6983),  # 177 windows
        (2.1555, 0.7647),  # 100 windows
        (float("inf"), 0.8380),  # 319 windows
    ),
    "healthy": (
        (0.4434, 0.5625),  # 30 windows
        (0.7503, 0.7812),  # 30 windows
        (1.0727, 0.8860),  # 112 windows
        (1.7725, 0.9349),  # 259 windows
        (2.1771, 0.9484),  # 211 windows
        (2.5221, 0.9622),  # 236 windows
        (2.6799, 0.9630),  # 106 windows
        (3.5500, 0.9813),  # 1014 windows
        (float("inf"), 0.9870),  # 17423 windows
    ),
    "network_limited": (
        (2.9914, 0.6354),  # 190 windows
        (3.7061, 0.6842),  # 36 windows
        (5.0439, 0.7971),  # 67 windows
        (float("inf"), 0.8614),  # 99 windows
    ),
    "queue_limited": (
        (float("inf"), 0.8576),  # 623 windows
    ),
}
