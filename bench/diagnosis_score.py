"""Scoring of the diagnosis benchmark (pure): per change, how fast and how steadily the injected regime is seen.

A *change* is one thing the benchmark did to one tier at one instant (``inject`` or ``revert``),
valid until the next change of that tier. For each diagnosis loop (a source and a window length)
its windows ending in ``(at_s, until_s]`` are scored:

- ``intervals``: (end of the first window diagnosed with the expected regime - change time) /
  scrape interval; ``None`` when the regime never showed before the next change.
- ``share``: among the *settled* windows (after that first correct one, until the next change),
  the fraction carrying the expected regime.

``replay`` re-runs recorded windows through a fresh ``DiagnosisService`` (same reference learning,
other thresholds), so thresholds can be tuned offline on one testbed run.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from inferslice.bottleneck import DEFAULT, Thresholds
from inferslice.service.diagnosis import DiagnosisService
from inferslice.service.store import Store
from inferslice.snapshot import snapshot_from_dict
from inferslice.topology import Topology


@dataclass(frozen=True)
class Change:
    injection: str
    tier: str
    kind: str  # "inject" or "revert"
    repetition: int
    at_s: float  # unix time the change took effect
    until_s: float  # the tier's next change (or the end of the run)
    expected: str  # the regime the platform should diagnose after this change


@dataclass(frozen=True)
class Targets:
    intervals: float = 2.0  # the issue: the injected regime within two 2 s scrape intervals
    share: float = 0.95  # the issue: >= 95 % of the settled windows carry it


def score_change(change: Change, windows: Iterable[tuple[float, str]], interval_s: float) -> dict[str, Any]:
    """Score one change against one loop's ``(window_end_s, regime)`` windows."""
    after = sorted((t, r) for t, r in windows if change.at_s < t <= change.until_s)
    first = next((i for i, (_, r) in enumerate(after) if r == change.expected), None)
    out: dict[str, Any] = {**asdict(change), "windows": len(after)}
    if first is None:
        return out | {
            "first_s": None,
            "intervals": None,
            "windows_to_first": None,
            "before_first": dict(Counter(r for _, r in after)),
            "settled": 0,
            "settled_correct": 0,
            "share": None,
            "settled_regimes": {},
        }
    settled = after[first + 1 :]
    correct = sum(1 for _, r in settled if r == change.expected)
    first_s = after[first][0]
    return out | {
        "first_s": first_s,
        "intervals": round((first_s - change.at_s) / interval_s, 3),
        "windows_to_first": first + 1,
        "before_first": dict(Counter(r for _, r in after[:first])),
        "settled": len(settled),
        "settled_correct": correct,
        "share": round(correct / len(settled), 4) if settled else None,
        "settled_regimes": dict(Counter(r for _, r in settled)),
    }


def summarize(scores: Sequence[Mapping[str, Any]], targets: Targets = Targets()) -> list[dict[str, Any]]:
    """One row per (injection, change kind, source, window): repetitions pooled."""
    groups: dict[tuple[str, str, str, float], list[Mapping[str, Any]]] = {}
    for s in scores:
        groups.setdefault((s["injection"], s["kind"], s["source"], float(s["window_s"])), []).append(s)
    rows = []
    for (injection, kind, source, window_s), group in groups.items():
        found = [float(s["intervals"]) for s in group if s["intervals"] is not None]
        settled = sum(int(s["settled"]) for s in group)
        correct = sum(int(s["settled_correct"]) for s in group)
        share = correct / settled if settled else None
        worst = max(found) if found else None
        seen: Counter[str] = Counter()
        for s in group:
            seen.update(s["settled_regimes"])
        rows.append(
            {
                "injection": injection,
                "tier": group[0]["tier"],
                "kind": kind,
                "expected": group[0]["expected"],
                "source": source,
                "window_s": window_s,
                "changes": len(group),
                "detected": len(found),
                "intervals_median": statistics.median(found) if found else None,
                "intervals_max": worst,
                "settled_windows": settled,
                "settled_share": round(share, 4) if share is not None else None,
                "settled_regimes": dict(seen),
                "meets_latency": bool(found) and len(found) == len(group) and worst is not None and worst <= targets.intervals,
                "meets_share": share is not None and share >= targets.share,
            }
        )
    rows.sort(key=lambda r: (r["injection"], r["kind"] != "inject", r["window_s"], r["source"]))
    return rows


def recommend_window(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """The window that meets the most targets, the shorter on a tie (it reacts faster)."""
    by_window: dict[float, int] = {}
    for r in rows:
        by_window[r["window_s"]] = by_window.get(r["window_s"], 0) + int(r["meets_latency"]) + int(r["meets_share"])
    if not by_window:
        return None
    return min(by_window, key=lambda w: (-by_window[w], w))


def replay(
    windows: Sequence[Mapping[str, Any]], topology: Topology | None, thresholds: Thresholds = DEFAULT
) -> list[tuple[str, float, str]]:
    """Re-diagnose recorded raw snapshots in order: ``(slice, window_end_s, regime)`` per window."""
    store = Store(":memory:")
    try:
        service = DiagnosisService(store, topology, clock=lambda: 0.0, thresholds=thresholds)
        out = []
        for w in windows:
            result = service.ingest(snapshot_from_dict(w["snapshot"]))
            out.append((result.diagnosis.slice, result.ts, result.diagnosis.regime.value))
        return out
    finally:
        store.close()


def score_loops(
    changes: Sequence[Change], loops: Mapping[tuple[str, float], Sequence[tuple[str, float, str]]], interval_s: float
) -> list[dict[str, Any]]:
    """Score every change against every loop; ``loops[(source, window_s)]`` = ``(slice, ts, regime)`` windows."""
    scores = []
    for (source, window_s), windows in loops.items():
        for change in changes:
            tier_windows = [(t, r) for sl, t, r in windows if sl == change.tier]
            scores.append({"source": source, "window_s": window_s, **score_change(change, tier_windows, interval_s)})
    return scores


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown_table(rows: Sequence[Mapping[str, Any]], targets: Targets = Targets()) -> str:
    lines = [
        "| injection | tier | change | expected | source | window | detected "
        f"| intervals to first (median / max; target <= {targets.intervals:g}) | settled share (target >= {targets.share:.0%}) "
        "| settled windows | other regimes while settled |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        others = ", ".join(f"{k} {v}" for k, v in sorted(r["settled_regimes"].items()) if k != r["expected"]) or "-"
        lat = f"{_fmt(r['intervals_median'], '.2f')} / {_fmt(r['intervals_max'], '.2f')}" + ("" if r["meets_latency"] else " ✗")
        share = ("-" if r["settled_share"] is None else f"{r['settled_share']:.1%}") + ("" if r["meets_share"] else " ✗")
        lines.append(
            f"| {r['injection']} | {r['tier']} | {r['kind']} | {r['expected']} | {r['source']} | {r['window_s']:g} s "
            f"| {r['detected']}/{r['changes']} | {lat} | {share} | {r['settled_windows']} | {others} |"
        )
    return "\n".join(lines) + "\n"
