"""The demo's live view: one row per tier, from the diagnosis API (rich)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from inferslice.cli.demo.story import Phase

REGIME_STYLE = {
    "healthy": "green",
    "queue_limited": "yellow",
    "network_limited": "magenta",
    "compute_limited": "red",
    "unknown": "dim",
}


def _s(v: Any) -> str:
    if v is None:
        return "-"
    v = float(v)
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


def _mbps(v: Any) -> str:
    return "-" if v is None else f"{float(v) / 1e6:.2f}"


def render(phase: Phase, index: int, total: int, remaining_s: float, views: Mapping[str, Mapping[str, Any]]) -> Group:
    table = Table(expand=True)
    for col in ("tier", "clients", "cap Mbit/s", "rx Mbit/s", "P99 TTFT", "P50 TPOT", "P99 TPOT", "tok/s", "queued", "replicas",
                "GPU share", "diagnosis", "expected"):
        table.add_column(col, justify="right" if col not in ("tier", "diagnosis", "expected") else "left")
    for tier, load in phase.loads.items():
        view = views.get(tier, {})
        snap = view.get("snapshot") or {}
        diag = view.get("diagnosis") or {}
        regime = str(diag.get("regime", "-"))
        conf = diag.get("confidence")
        label = Text(f"{regime}" + (f" ({float(conf):.2f})" if conf is not None else ""), style=REGIME_STYLE.get(regime, ""))
        expected = phase.expect.get(tier, "-")
        table.add_row(
            tier,
            str(load.concurrency),
            "none" if load.cap_bps is None else _mbps(load.cap_bps),
            _mbps(snap.get("link_rx_bps")),
            _s(snap.get("ttft_p99_s")),
            _s(snap.get("tpot_p50_s")),
            _s(snap.get("tpot_p99_s")),
            "-" if snap.get("output_tokens_per_s") is None else f"{float(snap['output_tokens_per_s']):.0f}",
            "-" if snap.get("requests_waiting") is None else f"{float(snap['requests_waiting']):.0f}",
            "-" if snap.get("replicas") is None else f"{float(snap['replicas']):.0f}/{float(snap.get('replicas_max') or 0):.0f}",
            "-" if snap.get("gpu_share") is None else f"{float(snap['gpu_share']):.2f}",
            label,
            Text(expected, style=REGIME_STYLE.get(expected, "")),
        )
    head = Text.assemble(
        (f"phase {index}/{total}: {phase.name}", "bold"), f"  ({remaining_s:.0f} s left)\n", (phase.description, "italic")
    )
    return Group(Panel(head, title="inferslice demo", border_style="blue"), table)
