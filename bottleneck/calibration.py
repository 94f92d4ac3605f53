"""The confidence calibration table (``bottleneck/confidence.py``). Written by ``inferslice bench corpus
calibrate``; edit the corpus or the fit, not this file.

Provenance: placeholder until the issue-17 corpus's tune seeds are fitted: every regime's verdict
is reported at its margin-free prior below.
"""

from __future__ import annotations

PROVENANCE = "placeholder: no corpus fitted yet"
UNCALIBRATED = 0.7  # a regime the table does not cover
# regime -> ((margin upper bound, probability right), ...), ascending; the last bound is +inf.
TABLE: dict[str, tuple[tuple[float, float], ...]] = {
    "healthy": ((float("inf"), 0.7),),
    "queue_limited": ((float("inf"), 0.7),),
    "network_limited": ((float("inf"), 0.7),),
    "compute_limited": ((float("inf"), 0.7),),
}
