"""The diagnosis's four-digit rounding, without ``round``'s cost where its answer is known. Pure.

``round(x, 4)`` converts through decimal (0.25-0.3 µs) and a window rounds about eight values, most
of them whole (a factor of 1, a margin of 0 or 6) or fractions at 0 or 1, which it returns
unchanged. These answer exactly as the plain expressions they stand for (bit for bit, hypothesis-
tested in ``tests/bottleneck/test_fast_paths.py``), so a diagnosis never changes with them.
"""

from __future__ import annotations


def r4(x: float) -> float:
    """``round(x, 4)``."""
    return x if x.is_integer() else round(x, 4)


def unit_r4(x: float) -> float:
    """``round(min(1.0, x), 4)`` of a fraction that rose from +0.0 (never -0.0 or NaN): a largest-so-far."""
    return (round(x, 4) if x > 0.0 else 0.0) if x < 1.0 else 1.0
