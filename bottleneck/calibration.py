"""The confidence calibration table (``bottleneck/confidence.py``). Written by ``inferslice bench corpus
calibrate`` (bench/calibrate.py); edit the corpus or the fit, not this file.

Provenance:
isotonic fit (PAV, >= 30 windows a step) of compute_limited only (the rest as fitted before:
isotonic fit (PAV, >= 30 windows a step) on the tune seeds 1000-9025 of
bench/results/diagnosis/corpus17/tune, bench/results/diagnosis/corpus17/test,
bench/results/diagnosis/corpus17/blind, bench/results/diagnosis/corpus17/blind-v4: 3848 uncapped
verdicts of 8640 windows x sources (healthy 3492, network_limited 102, queue_limited 254);
classifier sha256 6fd0e05f914d2fca; 2026-12-04) on the tune seeds 1000-9083 of
bench/results/diagnosis/corpus17/tune, bench/results/diagnosis/corpus17/test,
bench/results/diagnosis/corpus17/blind, bench/results/diagnosis/corpus17/blind-v4,
bench/results/diagnosis/corpus17/blind-v5, bench/results/diagnosis/corpus17/blind-v6,
bench/results/diagnosis/corpus17/blind-v6b, bench/results/diagnosis/corpus17/blind-v7,
bench/results/diagnosis/corpus17/blind-v8, bench/results/diagnosis/corpus17/blind-v8b,
bench/results/diagnosis/corpus17/blind-v9: 472 uncapped verdicts of 19680 windows x sources
(compute_limited 472); classifier sha256 3d58a3eec6162c36; 2026-12-06
"""

from __future__ import annotations

PROVENANCE = (
    "isotonic fit (PAV, >= 30 windows a step) of compute_limited only (the rest as fitted before: "
    "isotonic fit (PAV, >= 30 windows a step) on the tune seeds 1000-9025 of "
    "bench/results/diagnosis/corpus17/tune, bench/results/diagnosis/corpus17/test, "
    "bench/results/diagnosis/corpus17/blind, bench/results/diagnosis/corpus17/blind-v4: 3848 uncapped "
    "verdicts of 8640 windows x sources (healthy 3492, network_limited 102, queue_limited 254); "
    "classifier sha256 6fd0e05f914d2fca; 2026-12-04) on the tune seeds 1000-9083 of "
    "bench/results/diagnosis/corpus17/tune, bench/results/diagnosis/corpus17/test, "
    "bench/results/diagnosis/corpus17/blind, bench/results/diagnosis/corpus17/blind-v4, "
    "bench/results/diagnosis/corpus17/blind-v5, bench/results/diagnosis/corpus17/blind-v6, "
    "bench/results/diagnosis/corpus17/blind-v6b, bench/results/diagnosis/corpus17/blind-v7, "
    "bench/results/diagnosis/corpus17/blind-v8, bench/results/diagnosis/corpus17/blind-v8b, "
    "bench/results/diagnosis/corpus17/blind-v9: 472 uncapped verdicts of 19680 windows x sources "
    "(compute_limited 472); classifier sha256 3d58a3eec6162c36; 2026-12-06"
)
UNCALIBRATED = 0.5  # a regime the tune seeds never produced: no evidence it is right
# regime -> ((margin upper bound, probability right), ...), ascending; the last bound is +inf.
# Each step's window count is in the comment beside it.
TABLE: dict[str, tuple[tuple[float, float], ...]] = {
    "compute_limited": (
        (1.8793, 0.7305),  # 165 windows
        (2.0459, 0.7451),  # 49 windows
        (float("inf"), 0.8154),  # 258 windows
    ),
    "healthy": (
        (2.0758, 0.9291),  # 252 windows
        (2.5302, 0.9503),  # 179 windows
        (2.9067, 0.9681),  # 186 windows
        (float("inf"), 0.9844),  # 2875 windows
    ),
    "network_limited": (
        (2.7740, 0.8400),  # 48 windows
        (float("inf"), 0.9107),  # 54 windows
    ),
    "queue_limited": (
        (float("inf"), 0.8906),  # 254 windows
    ),
}
