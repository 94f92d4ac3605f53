"""Steady-state statistics of one scenario step from per-request records (pure).

A closed-loop step starts with every client sending at once and ends with in-flight streams
draining at falling concurrency; the paper's figures are steady-state. So latency percentiles
use the requests *started* inside the measurement window, and throughput counts the tokens
*emitted* inside it (token times are rebuilt from each record's TTFT and inter-token gaps).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def load_records(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


def _tpot(r: Mapping[str, Any]) -> float | None:
    ttft, e2e, n = r.get("ttft_s"), r.get("e2e_s"), int(r.get("output_tokens") or 0)
    if ttft is None or e2e is None or n < 2:
        return None
    return float((e2e - ttft) / (n - 1))


def token_times(r: Mapping[str, Any]) -> np.ndarray:
    """Absolute emission times of a request's content tokens."""
    if not r.get("success") or r.get("ttft_s") is None:
        return np.empty(0)
    first = float(r["start_s"]) + float(r["ttft_s"])
    gaps = np.asarray(r.get("itl_s") or (), dtype=float)
    return np.concatenate(([first], first + np.cumsum(gaps)))


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else None


def window_stats(records: Iterable[Mapping[str, Any]], t0: float, t1: float, slo_ttft_s: float = 0.5) -> dict[str, Any]:
    """Latency percentiles of requests started in [t0, t1); tokens/s and goodput over the window."""
    recs = list(records)
    span = max(t1 - t0, 1e-9)
    started = [r for r in recs if t0 <= float(r["start_s"]) < t1]
    ok = [r for r in started if r.get("success")]
    ttfts = [float(r["ttft_s"]) for r in ok if r.get("ttft_s") is not None]
    tpots = [t for t in (_tpot(r) for r in ok) if t is not None]
    tokens = sum(int(((tt >= t0) & (tt < t1)).sum()) for tt in (token_times(r) for r in recs))
    # Goodput counts the requests whose first token arrived in the window within the SLO: the
    # rate at which the tier delivers SLO-meeting responses, independent of when they finish.
    good = 0
    for r in recs:
        if r.get("success") and r.get("ttft_s") is not None:
            first = float(r["start_s"]) + float(r["ttft_s"])
            if t0 <= first < t1 and float(r["ttft_s"]) <= slo_ttft_s:
                good += 1
    return {
        "p50_ttft_s": _pct(ttfts, 50),
        "p99_ttft_s": _pct(ttfts, 99),
        "p50_tpot_s": _pct(tpots, 50),
        "p99_tpot_s": _pct(tpots, 99),
        "mean_ttft_s": float(np.mean(ttfts)) if ttfts else None,
        "mean_tpot_s": float(np.mean(tpots)) if tpots else None,
        "output_tokens_per_s": tokens / span,
        "goodput_rps": good / span,
        "request_throughput": len(ok) / span,
        "completed": len(ok),
        "failed": len(started) - len(ok),
        "window_s": span,
    }
