"""Figures for people: a value with its unit at a precision a reader wants (61 ms, 0.99 Mbit/s).

Reports (the scenario fidelity report, the demo report) and the demo's live view format through
these, so the same quantity reads the same everywhere. ``None`` (not measured) prints as ``-``.
"""

from __future__ import annotations

import math

MISSING = "-"


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def seconds(value: float | None) -> str:
    """A duration: ``0.0611`` -> ``61 ms``, ``0.0062`` -> ``6.2 ms``, ``2.345`` -> ``2.35 s``, ``125`` -> ``125 s``."""
    if not _finite(value):
        return MISSING
    assert value is not None
    if abs(value) < 0.01:
        return f"{value * 1000:.1f} ms"
    if abs(value) < 1:
        return f"{value * 1000:.0f} ms"
    if abs(value) < 100:
        return f"{value:.2f} s"
    return f"{value:.0f} s"


def bits_per_second(value: float | None) -> str:
    """A rate in bit/s: ``9.919e5`` -> ``0.99 Mbit/s``, ``4.2e7`` -> ``42.0 Mbit/s``, ``1e10`` -> ``10.0 Gbit/s``."""
    if not _finite(value):
        return MISSING
    assert value is not None
    if abs(value) >= 1e9:
        return f"{value / 1e9:.1f} Gbit/s"
    mbit = value / 1e6
    if abs(mbit) < 10:
        return f"{mbit:.2f} Mbit/s"
    if abs(mbit) < 100:
        return f"{mbit:.1f} Mbit/s"
    return f"{mbit:.0f} Mbit/s"


def mbit(value: float | None) -> str:
    """A rate in bit/s as a bare Mbit/s figure, for a column whose header names the unit."""
    return bits_per_second(value).removesuffix(" Mbit/s") if _finite(value) and abs(value or 0) < 1e9 else bits_per_second(value)


def factor(value: float | None) -> str:
    """A ratio of two like quantities: ``2.1837`` -> ``2.18x``."""
    return f"{value:.2f}x" if _finite(value) else MISSING


def number(value: float | None, digits: int = 0) -> str:
    """A plain count or rate (its unit is said elsewhere)."""
    return f"{value:.{digits}f}" if _finite(value) else MISSING
