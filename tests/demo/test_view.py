"""The demo's live view at 80 columns and the one-line-per-window form, rendered as a user sees them."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from inferslice.cli.demo.story import DEFAULT_STORY
from inferslice.cli.demo.view import render, window_key, window_line

PHASE = DEFAULT_STORY.phases[1]  # three regimes: a capped tier, a queued one, a co-tenant
VIEWS: dict[str, Any] = {
    "free": {"snapshot": {"ttft_p99_s": 2.31, "tpot_p99_s": 0.031, "link_rx_bps": 4.2e5, "requests_waiting": 10.0},
             "diagnosis": {"regime": "queue_limited", "confidence": 0.91, "ts": 100.0}},
    "standard": {"snapshot": {"ttft_p99_s": 0.0611, "tpot_p99_s": 0.212, "link_rx_bps": 9.919e5, "requests_waiting": 0.0},
                 "diagnosis": {"regime": "network_limited", "confidence": 0.8, "ts": 100.0}},
    "premium": {"snapshot": {"ttft_p99_s": 0.09, "tpot_p99_s": 0.088, "link_rx_bps": 1.1e6},
                "diagnosis": {"regime": "healthy", "confidence": 0.6, "ts": 100.0}},
}  # fmt: skip


def _text(width: int) -> str:
    console = Console(width=width, record=True, force_terminal=False, color_system=None)
    console.print(render(PHASE, 2, 3, 40.0, VIEWS, width))
    return console.export_text()


def test_80_columns_keep_every_header_and_value_whole() -> None:
    text = _text(80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # nothing cut to an ellipsis
    for word in ("tier", "clients", "rx/cap Mbit/s", "P99 TTFT", "P99 TPOT", "queued", "diagnosis"):
        assert word in text, word
    standard = next(line for line in text.splitlines() if line.startswith("standard"))
    assert "0.99/0.50" in standard and "61 ms" in standard and "212 ms" in standard and "network .80 ✓" in standard
    premium = next(line for line in text.splitlines() if line.startswith("premium"))
    assert "healthy .60 ✗" in premium  # the script expects compute_limited here
    assert "expected: free queue  standard network  premium compute" in text


def test_a_wide_terminal_gets_the_full_table() -> None:
    text = _text(180)
    for word in ("cap Mbit/s", "P50 TPOT", "tok/s", "replicas", "GPU share", "expected", "network_limited"):
        assert word in text, word
    assert "…" not in text


def test_one_compact_line_per_window() -> None:
    line = window_line(PHASE, 2, 3, 40.0, VIEWS)
    assert line == "[2/3 40s] free queue .91✓  standard network .80✓  premium healthy .60✗"
    assert len(line) <= 80
    later = {**VIEWS, "free": {**VIEWS["free"], "diagnosis": {**VIEWS["free"]["diagnosis"], "ts": 102.0}}}
    assert window_key(later) != window_key(VIEWS) and window_key(dict(VIEWS)) == window_key(VIEWS)


def test_no_diagnosis_yet_reads_as_a_dash() -> None:
    assert window_line(PHASE, 2, 3, 75.0, {}) == "[2/3 75s] free -  standard -  premium -"


def test_each_phase_verdict_says_where_the_p99_ttft_went() -> None:
    from inferslice.cli.demo.story import attribution_mean

    share = {"observed_s": 5.0, "reference_s": 0.1, "queue_s": 4.0, "network_s": 0.5, "compute_s": 0.0, "base_s": 0.5}
    diags = [{"attribution": {"ttft_p99": share}}, {"attribution": {"ttft_p99": {**share, "queue_s": 2.0, "base_s": 2.5}}}, {}]
    assert attribution_mean(diags) == {"queue": 3.0, "network": 0.5, "compute": 0.0, "base": 1.5}
    assert attribution_mean([{"attribution": None}]) == {}
