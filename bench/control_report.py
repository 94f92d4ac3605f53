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
    "wan-cross-traffic": "standard",
    "wan-delay-step": "standard",
    "backpressure-trap": "premium",
    "flash-crowd-squeeze": "premium",
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


def _x(x: Any) -> str:
    return "—" if x is None else f"{x:.2f}x"


def _goal_rows(summary: dict[str, Any]) -> list[str]:
    lines = [
        "| scenario | best non-static peer | goodput | replica-s | goal | met | futile (inferslice / peer) | by replay | ceiling |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for sc, r in summary["ratios"].items():
        g = r["goal"]
        lines.append(
            f"| {sc} | {r['best_peer']} | {_x(r['goodput_ratio_vs_best_peer'])} | {_x(r['replica_seconds_ratio_vs_best_peer'])}"
            f" | >= {g['goodput_at_least']:g}x at <= {g['replica_seconds_at_most']:g}x, 0 futile | {'yes' if r['goal_met'] else 'no'}"
            f" | {_fmt(r['inferslice_futile_actions'], 1)} / {_fmt(r['best_peer_futile_actions'], 1)}"
            f" | {_fmt(r.get('inferslice_counterfactual_futile_actions'), 1)} / {_fmt(r.get('best_peer_counterfactual_futile_actions'), 1)}"
            f" | {_x(r.get('undisturbed_goodput_ratio_vs_best_peer'))} |"
        )
    return lines


def _ablation_rows(summary: dict[str, Any]) -> list[str]:
    names = sorted({a for r in summary["ratios"].values() for a in r.get("ablations", {})})
    if not names:
        return []
    lines = [
        "| scenario | inferslice | " + " | ".join(n.removeprefix("inferslice_") for n in names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for sc, r in summary["ratios"].items():
        me = f"{_x(r['goodput_ratio_vs_best_peer'])} / {_x(r['replica_seconds_ratio_vs_best_peer'])}"
        cells = []
        for n in names:
            a = r.get("ablations", {}).get(n)
            cells.append("—" if a is None else f"{_x(a['goodput_ratio_vs_best_peer'])} / {_x(a['replica_seconds_ratio_vs_best_peer'])}")
        lines.append(f"| {sc} | {me} | " + " | ".join(cells) + " |")
    return lines


def report(out: Path) -> Path:
    summary = json.loads((out / "summary.json").read_text())
    s = summary["settings"]
    lines = [
        "# Control benchmark: inferslice against the autoscalers in use",
        "",
        f"Backend: {s['backend']}. {len(s['seeds'])} seed(s) per cell (means; seeds {', '.join(str(x) for x in s['seeds'])}),"
        f" {s['duration_s']:g} s per run, windows of {s['window_s']:g} s, cold start {s['cold_start_s']:g} s.",
        f"Every peer's time constants are multiplied by {s['time_scale']:.4f} = testbed cold start / 285 s (the paper's"
        " per-pod cold start with the Run:ai streamer), the same compression as the cold start; inferslice's reclaim"
        " delay is Ray's downscale delay (600 s) scaled the same way.",
        "",
        "Goodput = requests/s whose TTFT met the SLO (0.5 s), summed over tiers unless a tier is named; attainment ="
        " share of arrived requests that met it. `futile` = remedies (scale-outs, cap raises, relocations) that could"
        " address none of what bound the tier by the scenario's ground truth (bench/control_scenarios.py: capacity,"
        " a GPU co-tenant, a client-edge cap, a slowed WAN path), the same rule for every policy. `TTR` = first SLO"
        " miss after the disturbance to three good windows in a row (worst affected tier; — = never within the run)."
        " `by replay` = the same count judged by removing each remedy from the run and replaying it on the same"
        " arrivals (bench/control_counterfactual.py): futile when it recovers under a tenth of the SLO misses of its"
        " tier over its span; inferslice and the peers only (— elsewhere).",
        "",
        "## The goal: inferslice against the best non-static peer of each scenario",
        "",
        "Goodput and replica-seconds as inferslice / that peer. `ceiling`: static at the ceiling on the same arrivals"
        " with nothing injected, over the same peer: the most any remedy could reach.",
        "",
        *_goal_rows(summary),
        "",
        "## Ablation (goodput / replica-seconds, each against the same best peer)",
        "",
        *_ablation_rows(summary),
        "",
    ]
    for sc, desc in summary["scenarios"].items():
        cells = summary["results"][sc]
        tiers = list(next(iter(cells.values()))["tiers"])
        lines += [f"## {sc}", "", desc, "", f"![{sc}]({sc}.png)", ""]
        head = (
            "| policy | "
            + " | ".join(f"{t} goodput / attain. / replica-s" for t in tiers)
            + " | goodput | replica-s | out | in | caps | moves | futile | by replay | TTR s | viol. |"
        )
        lines += [head, "|" + "---|" * (head.count("|") - 1)]
        for pol, c in cells.items():
            row = [pol] + [
                f"{_fmt(c['tiers'][t]['goodput_rps'])} / {_fmt(c['tiers'][t]['slo_attainment'])}"
                f" / {c['tiers'][t].get('replica_seconds', 0.0):.0f}"
                for t in tiers
            ]
            row += [
                _fmt(sum(v["goodput_rps"] for v in c["tiers"].values())),
                f"{c['replica_seconds']:.0f}",
                _fmt(c["scale_outs"], 1),
                _fmt(c["scale_ins"], 1),
                _fmt(c["cap_changes"], 1),
                _fmt(c["relocations"], 1),
                _fmt(c["futile_actions"], 1),
                _fmt(c.get("counterfactual_futile_actions"), 1),
                _fmt(c["time_to_recover_s"], 0),
                _fmt(c["guarantee_violations"], 0),
            ]
            lines.append("| " + " | ".join(row) + " |")
        r = summary["ratios"].get(sc)
        if r:
            vs = ", ".join(
                f"{t} {_x(v)} goodput at {_x(r['replica_seconds_ratio_per_tier_vs_best_peer'].get(t))} replica-s"
                for t, v in r["goodput_ratio_per_tier_vs_best_peer"].items()
            )
            per = ", ".join(f"{t} {_x(v)}" for t, v in r["goodput_ratio_per_tier_vs_best_peer_of_that_tier"].items())
            lines += [
                "",
                f"inferslice vs the best non-static peer ({r['best_peer']}): goodput {_x(r['goodput_ratio_vs_best_peer'])} at"
                f" {_x(r['replica_seconds_ratio_vs_best_peer'])} its replica-seconds; per tier: {vs}.",
                f"Per tier against that tier's best peer: {per}. Against static: goodput {_x(r.get('goodput_ratio_vs_static'))}"
                f" at {_x(r.get('replica_seconds_ratio_vs_static'))} replica-s.",
            ]
        lines.append("")
    p = out / "report.md"
    p.write_text("\n".join(lines))
    return p
