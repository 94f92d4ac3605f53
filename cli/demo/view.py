"""The demo's live view: one row per tier, from the diagnosis API (rich), readable at 80 columns.

``render`` picks its columns by the width it is given (the terminal's): the full table from
``FULL_WIDTH`` columns up, a compact one that fits 80 columns below. ``window_line`` is the
one-line-per-window form for ``--no-live`` and for output that is not a terminal (a log, CI).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from inferslice.cli.demo.story import Phase
from inferslice.common import units

FULL_WIDTH = 160  # the full table's thirteen columns with their headers uncut
REGIME_STYLE = {
    "healthy": "green",
    "queue_limited": "yellow",
    "network_limited": "magenta",
    "compute_limited": "red",
    "unknown": "dim",
}
SHORT = {"healthy": "healthy", "queue_limited": "queue", "network_limited": "network", "compute_limited": "compute", "unknown": "unknown"}


def _num(v: Any, digits: int = 0) -> str:
    return units.number(None if v is None else float(v), digits)


def _secs(v: Any) -> str:
    return units.seconds(None if v is None else float(v))


def _mbit(v: Any) -> str:
    return units.mbit(None if v is None else float(v))


def _verdict(view: Mapping[str, Any], expected: str | None) -> tuple[str, str, bool | None]:
    """(short regime, confidence as '.92', matches the script?) of a tier's latest diagnosis."""
    diag = view.get("diagnosis") or {}
    regime = str(diag.get("regime", "-"))
    conf = diag.get("confidence")
    conf_text = f"{float(conf):.2f}".removeprefix("0") if conf is not None else ""
    ok = None if regime == "-" or expected is None else regime == expected
    return SHORT.get(regime, regime), conf_text, ok


def _mark(ok: bool | None) -> str:
    return "" if ok is None else "✓" if ok else "✗"


def _full(phase: Phase, views: Mapping[str, Mapping[str, Any]]) -> Table:
    table = Table(expand=False)
    columns = ("tier", "clients", "cap Mbit/s", "rx Mbit/s", "P99 TTFT", "P50 TPOT", "P99 TPOT", "tok/s", "queued", "replicas",
               "GPU share", "diagnosis", "expected")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="left" if col in ("tier", "diagnosis", "expected") else "right", no_wrap=True)
    for tier, load in phase.loads.items():
        view = views.get(tier, {})
        snap = view.get("snapshot") or {}
        expected = phase.expect.get(tier, "-")
        regime = str((view.get("diagnosis") or {}).get("regime", "-"))
        _, conf, ok = _verdict(view, phase.expect.get(tier))
        replicas = "-" if snap.get("replicas") is None else f"{_num(snap['replicas'])}/{_num(snap.get('replicas_max') or 0)}"
        table.add_row(
            tier,
            str(load.concurrency),
            "none" if load.cap_bps is None else _mbit(load.cap_bps),
            _mbit(snap.get("link_rx_bps")),
            _secs(snap.get("ttft_p99_s")),
            _secs(snap.get("tpot_p50_s")),
            _secs(snap.get("tpot_p99_s")),
            _num(snap.get("output_tokens_per_s")),
            _num(snap.get("requests_waiting")),
            replicas,
            _num(snap.get("gpu_share"), 2),
            Text(f"{regime} {conf} {_mark(ok)}".strip(), style=REGIME_STYLE.get(regime, "")),
            Text(expected, style=REGIME_STYLE.get(expected, "")),
        )
    return table


def _compact(phase: Phase, views: Mapping[str, Mapping[str, Any]]) -> Table:
    # Seven columns in 75 characters: no vertical rules, two spaces between columns, short regime names.
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False, expand=False)
    for col in ("tier", "clients", "rx/cap Mbit/s", "P99 TTFT", "P99 TPOT", "queued", "diagnosis"):
        table.add_column(col, justify="left" if col in ("tier", "diagnosis") else "right", no_wrap=True)
    for tier, load in phase.loads.items():
        view = views.get(tier, {})
        snap = view.get("snapshot") or {}
        regime = str((view.get("diagnosis") or {}).get("regime", "-"))
        short, conf, ok = _verdict(view, phase.expect.get(tier))
        cap = "none" if load.cap_bps is None else _mbit(load.cap_bps)
        table.add_row(
            tier,
            str(load.concurrency),
            f"{_mbit(snap.get('link_rx_bps'))}/{cap}",
            _secs(snap.get("ttft_p99_s")),
            _secs(snap.get("tpot_p99_s")),
            _num(snap.get("requests_waiting")),
            Text(f"{short} {conf} {_mark(ok)}".strip(), style=REGIME_STYLE.get(regime, "")),
        )
    return table


def render(
    phase: Phase, index: int, total: int, remaining_s: float, views: Mapping[str, Mapping[str, Any]], width: int = 80
) -> Group:
    """The live frame for a console ``width`` columns wide."""
    table = _full(phase, views) if width >= FULL_WIDTH else _compact(phase, views)
    expect = "  ".join(f"{tier} {SHORT.get(regime, regime)}" for tier, regime in phase.expect.items())
    head = Text.assemble(
        (f"phase {index}/{total}: {phase.name}", "bold"),
        f"  ({remaining_s:.0f} s left)\n",
        (phase.description, "italic"),
        f"\nexpected: {expect}",
    )
    return Group(Panel(head, title="inferslice demo", border_style="blue", width=min(width, FULL_WIDTH)), table)


def window_line(phase: Phase, index: int, total: int, remaining_s: float, views: Mapping[str, Mapping[str, Any]]) -> str:
    """One compact line for one diagnosis window: ``[2/3 40s] free queue .91✓  standard network .80✓ ...``."""
    parts = []
    for tier in phase.loads:
        short, conf, ok = _verdict(views.get(tier, {}), phase.expect.get(tier))
        parts.append(f"{tier} {short} {conf}{_mark(ok)}".rstrip())
    return f"[{index}/{total} {remaining_s:.0f}s] " + "  ".join(parts)


def window_key(views: Mapping[str, Mapping[str, Any]]) -> tuple[Any, ...]:
    """What identifies the current window: each tier's latest diagnosis timestamp."""
    return tuple((tier, (view.get("diagnosis") or {}).get("ts")) for tier, view in sorted(views.items()))
