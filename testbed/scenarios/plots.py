"""PNG plots of a scenario summary (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display here; must precede pyplot
import matplotlib.pyplot as plt

Row = Mapping[str, Any]
SLO_S = 0.5


def _series(rows: Sequence[Row], tier: str, key: str, cap: str = "none") -> tuple[list[int], list[float]]:
    mine = sorted((r for r in rows if r["tier"] == tier and r.get("cap", "none") == cap), key=lambda r: r["concurrency"])
    xs = [int(r["concurrency"]) for r in mine if r.get(key) is not None]
    ys = [float(r[key]) for r in mine if r.get(key) is not None]
    return xs, ys


def plot_differentiation(rows: Sequence[Row], out: Path) -> list[Path]:
    rows = [r for r in rows if r.get("scenario") == "differentiation"]
    if not rows:
        return []
    tiers = list(dict.fromkeys(r["tier"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for tier in tiers:
        axes[0].plot(*_series(rows, tier, "p99_ttft_s"), marker="o", label=tier)
        axes[1].plot(*_series(rows, tier, "goodput_rps"), marker="o", label=tier)
        axes[2].plot(*_series(rows, tier, "p50_tpot_s"), marker="o", label=tier)
    axes[0].axhline(SLO_S, color="red", linestyle="--", linewidth=1, label="SLO 500 ms")
    axes[0].set_yscale("log")
    axes[0].set_title("P99 TTFT (s)")
    axes[1].set_title("Goodput (req/s meeting TTFT SLO)")
    axes[2].set_title("Median TPOT (s)")
    for ax in axes:
        ax.set_xlabel("client concurrency")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle("Service differentiation (testbed)")
    fig.tight_layout()
    path = out / "differentiation.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return [path]


def plot_bandwidth(rows: Sequence[Row], out: Path) -> list[Path]:
    rows = [r for r in rows if r.get("scenario") == "client-bandwidth"]
    if not rows:
        return []
    tiers = list(dict.fromkeys(r["tier"] for r in rows))
    caps = ("none", "demand", "fixed")
    fig, axes = plt.subplots(len(tiers), 3, figsize=(15, 3.6 * len(tiers)), squeeze=False)
    for i, tier in enumerate(tiers):
        for cap in caps:
            label = {"none": "uncapped", "demand": "cap ~ demand", "fixed": "0.5 Mbit/s cap"}[cap]
            xs, ys = _series(rows, tier, "link_rx_bps", cap)
            axes[i][0].plot(xs, [y / 1e6 for y in ys], marker="o", label=label)
            axes[i][1].plot(*_series(rows, tier, "p99_tpot_s", cap), marker="o", label=label)
            axes[i][2].plot(*_series(rows, tier, "output_tokens_per_s", cap), marker="o", label=label)
        axes[i][0].set_title(f"{tier}: client receive rate (Mbit/s, kernel)")
        axes[i][1].set_title(f"{tier}: P99 TPOT (s)")
        axes[i][1].set_yscale("log")
        axes[i][2].set_title(f"{tier}: output tokens/s")
        for ax in axes[i]:
            ax.set_xlabel("client concurrency")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "client-bandwidth.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return [path]


def plot_all(rows: Sequence[Row], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return plot_differentiation(rows, out) + plot_bandwidth(rows, out)
