"""Prometheus durations: one formatter and one parser for configs, rules and PromQL ranges."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}


def format_duration(seconds: float) -> str:
    """Seconds as a Prometheus duration: whole seconds as ``"10s"``, anything else in ``ms``.

    Prometheus rejects fractions (``"0.8s"``) and durations are integers of one unit, so
    milliseconds keep sub-second and fractional values exact. Raises ``ValueError`` below 1 ms.
    """
    ms = round(seconds * 1000)
    if ms <= 0:
        raise ValueError(f"a Prometheus duration must be positive, got {seconds} s")
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def parse_duration(text: str) -> float:
    """A Prometheus duration (``"1h30m"``, ``"10m"``, ``"500ms"``) in seconds."""
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(n) * _UNIT_S[u] for n, u in parts)
