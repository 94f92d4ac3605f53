"""Plots and the markdown report of the control benchmark (reads what ``run_control_bench`` wrote)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FOCUS = {
    "load-ramp": "standard",
    "bandwidth-squeeze": "standard",
    "gpu-share-drop": "standard",
    "overlap": "standard",
    "diurnal": "premium",
}


def plot(out: Path, series: dict[str, dict[str, dict[str, list[list[Any]]]]], slo_s: float = 0.5) -> list[Path]:
    """Per scenario: P99 TTFT and replicas over time of the scenario's focus tier, one line per policy (seed 1)."""
    paths = []
    for sc, pols in series.items():
        tier = FOCUS.get(sc, next(iter(next(iter(pols.values())))))
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
        for pol, tiers in pols.items():
            pts = tiers[tier]
            t = [p[0] for p in pts]
            ttft = [p[1] if p[1] is not None else float("nan") for p in pts]
            reps = [p[2] for p in pts]
            lw = 2.2 if pol == "inferslice" else 1.0
            a1.plot(t, ttft, label=pol, linewidth=lw)
            a2.step(t, reps, where="post", label=pol, linewidth=lw)
        a1.axhline(slo_s, color="k", linestyle="--", linewidth=0.8, label="SLO")
        a1.set_yscale("log")
        a1.set_ylabel(f"{tier} P99 TTFT (s)")
        a1.set_title(f"{sc}: {tier}")
        a2.set_ylabel(f"{tier} replicas (target)")
        a2.set_xlabel("time (s, testbed-compressed)")
        a1.legend(fontsize=7, ncol=4)
        fig.tight_layout()
        p = out / f"{sc}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


def _fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def report(out: Path) -> Path:
    summary = json.loads((out / "summary.json").read_text())
    s = summary["settings"]
    lines = [
        "# Control benchmark: inferslice against the autoscalers in use",
        "",
        f"Backend: {s['backend']}. {len(s['seeds'])} seeds per cell (means), {s['duration_s']:g} s per run, "
        f"windows of {s['window_s']:g} s, cold start {s['cold_start_s']:g} s.",
        f"Every peer's time constants are multiplied by {s['time_scale']:.4f} = testbed cold start / 285 s (the paper's"
        " per-pod cold start with the Run:ai streamer), the same compression as the cold start; inferslice's reclaim"
        " delay is Ray's downscale delay (600 s) scaled the same way.",
        "",
        "Goodput = requests/s whose TTFT met the SLO (0.5 s); attainment = share of arrived requests that met it.",
        "`futile` = actions taken while a resource bound that still bound one cold start + two windows later (the same"
        " classifier judges every policy); `TTR` = first SLO miss after the disturbance to three good windows in a row"
        " (worst affected tier; — = never within the run).",
        "",
    ]
    for sc, desc in summary["scenarios"].items():
        cells = summary["results"][sc]
        tiers = list(next(iter(cells.values()))["tiers"])
        lines += [f"## {sc}", "", desc, "", f"![{sc}]({sc}.png)", ""]
        head = (
            "| policy | "
            + " | ".join(f"{t} goodput / attain." for t in tiers)
            + " | replica-s | out | in | caps | moves | futile | TTR s | guarantee viol. |"
        )
        lines += [head, "|" + "---|" * (head.count("|") - 1)]
        for pol, c in cells.items():
            row = [pol] + [f"{_fmt(c['tiers'][t]['goodput_rps'])} / {_fmt(c['tiers'][t]['slo_attainment'])}" for t in tiers]
            row += [
                f"{c['replica_seconds']:.0f}",
                _fmt(c["scale_outs"], 1),
                _fmt(c["scale_ins"], 1),
                _fmt(c["cap_changes"], 1),
                _fmt(c["relocations"], 1),
                _fmt(c["futile_actions"], 1),
                _fmt(c["time_to_recover_s"], 0),
                _fmt(c["guarantee_violations"], 0),
            ]
            lines.append("| " + " | ".join(row) + " |")
        r = summary["ratios"].get(sc)
        if r:
            per = ", ".join(f"{t} {_fmt(v)}x" for t, v in r["goodput_ratio_per_tier_vs_best_peer_of_that_tier"].items())
            lines += [
                "",
                f"inferslice vs the best peer ({r['best_peer']}): goodput {_fmt(r['goodput_ratio_vs_best_peer'])}x at "
                f"{_fmt(r['replica_seconds_ratio_vs_best_peer'])}x its replica-seconds; per tier against that tier's best peer: {per}.",
                f"Best peer at no more replica-seconds than inferslice: {r['best_peer_at_no_more_replica_seconds'] or 'none'}"
                + (f" (inferslice goodput {_fmt(r['goodput_ratio_vs_that_peer'])}x)" if r["best_peer_at_no_more_replica_seconds"] else ""),
            ]
        lines.append("")
    p = out / "report.md"
    p.write_text("\n".join(lines))
    return p
