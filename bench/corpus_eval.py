"""Score the classifier and its peers on the labelled corpus (``bench.corpus``), held-out half apart.

Methods, fed the same windows:

- ``inferslice``: ``classify`` (primary regime; the cause set is the primary plus ``secondary``;
  its ranking is that set, then the other resources by attributed share);
- ``rule-ttft-slo``: P99 TTFT over the SLO -> queue-limited, else healthy;
- ``rule-link-util``: link at >= 0.9 of its cap -> network-limited; else P99 TTFT over the SLO ->
  queue-limited; else P99 TPOT over twice the reference -> compute-limited; else healthy;
- RCAEval's BARO, NSigma, CIRCA, RCD (``rcaeval_runner`` in its own environment): each ranks the
  window's metric series (``PEER_COLUMNS``); a metric's rank is mapped to the cause it belongs to
  (link rate -> network; waiting, queue time, TTFT -> queue; GPU share, KV cache, preemptions,
  TPOT -> compute). Recorded windows give them their real series (8 windows before the change, up
  to 8 since); a single operating point gets 10 rows of its reference and 5 of the point, each
  with a deterministic 3 % jitter. RCA methods rank causes, they never say "healthy": they are
  scored on AC@k over the windows that have a cause.

Figures: primary accuracy per regime and the confusion matrix (regime methods), set F1 over the
cause set (all windows with a cause, and the compound ones), AC@1/AC@3 per cause class and per
scenario family, and the attribution error against counterfactual truth (``counterfactual``
records: the same point with the cause removed).
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from inferslice.bottleneck import DEFAULT, Thresholds, classify
from inferslice.diagnosis import RESOURCES, Regime
from inferslice.snapshot import Reference, SliceSnapshot, snapshot_from_dict

PEER_COLUMNS: dict[str, tuple[str, str]] = {
    "ttft_p50_s": ("client_ttftmedian", "queue"),
    "ttft_p99_s": ("client_ttfttail", "queue"),
    "tpot_p50_s": ("client_tpotmedian", "compute"),
    "tpot_p99_s": ("client_tpottail", "compute"),
    "link_rx_bps": ("link_rxrate", "network"),
    "requests_waiting": ("queue_waiting", "queue"),
    "queue_time_p99_s": ("queue_waittime", "queue"),
    "gpu_share": ("gpu_share", "compute"),
    "kv_cache_usage": ("gpu_kvcache", "compute"),
    "preemptions_per_s": ("gpu_preemptions", "compute"),
}
CAUSE_OF_COLUMN = {col: cause for col, cause in PEER_COLUMNS.values()}
RCA_METHODS = ("baro", "nsigma", "circa", "rcd")
REGIME_CAUSE = {Regime.QUEUE_LIMITED.value: "queue", Regime.NETWORK_LIMITED.value: "network", Regime.COMPUTE_LIMITED.value: "compute"}
REGIMES = [r.value for r in Regime]
Prediction = tuple[str, list[str], list[str]]  # primary regime, cause set, cause ranking


def _snap(rec: Mapping[str, Any]) -> tuple[SliceSnapshot, Reference | None]:
    snap = snapshot_from_dict(rec["snapshot"])
    sat = rec.get("saturation")
    return snap, (Reference(tokens_per_s_saturation=float(sat), source="learned", samples=99) if sat else None)


def predict_inferslice(rec: Mapping[str, Any], th: Thresholds = DEFAULT) -> Prediction:
    snap, ref = _snap(rec)
    d = classify(snap, ref, th)
    causes = [REGIME_CAUSE[r.value] for r in (d.regime, *d.secondary) if r.value in REGIME_CAUSE]
    rest = sorted((r for r in RESOURCES if r not in causes), key=lambda r: -(d.attribution.fraction(r) if d.attribution else 0.0))
    return d.regime.value, causes, causes + rest


def predict_rule_ttft(rec: Mapping[str, Any]) -> Prediction:
    snap, _ = _snap(rec)
    slo = snap.slo_ttft_p99_s or 0.5
    if snap.ttft_p99_s is not None and snap.ttft_p99_s > slo:
        return Regime.QUEUE_LIMITED.value, ["queue"], ["queue"]
    return Regime.HEALTHY.value, [], []


def predict_rule_link(rec: Mapping[str, Any]) -> Prediction:
    snap, _ = _snap(rec)
    slo = snap.slo_ttft_p99_s or 0.5
    ref = snap.ref_tpot_p50_s or snap.ref_tpot_mean_s
    if snap.link_rx_bps is not None and snap.link_cap_bps and snap.link_rx_bps >= 0.9 * snap.link_cap_bps:
        return Regime.NETWORK_LIMITED.value, ["network"], ["network"]
    if snap.ttft_p99_s is not None and snap.ttft_p99_s > slo:
        return Regime.QUEUE_LIMITED.value, ["queue"], ["queue"]
    if snap.tpot_p99_s is not None and ref and snap.tpot_p99_s > 2 * ref:
        return Regime.COMPUTE_LIMITED.value, ["compute"], ["compute"]
    return Regime.HEALTHY.value, [], []


# -- RCAEval peers ----------------------------------------------------------------------------------
def _row(values: Mapping[str, Any], t: float, jitter: float = 0.0) -> dict[str, float]:
    row = {"time": t}
    for field, (col, _) in PEER_COLUMNS.items():
        v = values.get(field)
        if v is not None:
            row[col] = float(v) * (1.0 + jitter)
    return row


def rca_case(rec: Mapping[str, Any]) -> dict[str, Any] | None:
    if not rec["causes"]:
        return None
    if rec.get("context"):
        rows = [_row(h, float(h["t"])) for h in rec["context"]]
        return {"id": rec["id"], "inject_time": rec["change_at_s"], "rows": rows}
    snap = rec["snapshot"]
    normal = {k[4:]: v for k, v in snap.items() if k.startswith("ref_")}
    if snap.get("link_rx_bps") and snap.get("output_tokens_per_s") and snap.get("ref_output_tokens_per_s"):
        normal["link_rx_bps"] = snap["link_rx_bps"] * snap["ref_output_tokens_per_s"] / snap["output_tokens_per_s"]
    rows = [_row(normal, float(i), 0.03 * math.sin(1.7 * i + 0.3)) for i in range(10)]
    rows += [_row(snap, float(10 + i), 0.03 * math.sin(2.3 * i + 1.1)) for i in range(5)]
    return {"id": rec["id"], "inject_time": 10.0, "rows": rows}


def run_rca(records: Sequence[Mapping[str, Any]], python: str, methods: Sequence[str] = RCA_METHODS) -> dict[str, dict[str, Any]]:
    """``{method: {id: {"ranks": [...causes], "error": ...}}}`` from the child interpreter."""
    runner = Path(__file__).with_name("rcaeval_runner.py")
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        with inp.open("w") as fh:
            for rec in records:
                case = rca_case(rec)
                if case is not None:
                    fh.write(json.dumps(case) + "\n")
        subprocess.run([python, str(runner), str(inp), str(out), "--methods", ",".join(methods)], check=True, timeout=3600)
        results: dict[str, dict[str, Any]] = defaultdict(dict)
        for line in out.read_text().splitlines():
            r = json.loads(line)
            causes: list[str] = []
            for col in r["ranks"]:
                c = CAUSE_OF_COLUMN.get(col)
                if c is not None and c not in causes:
                    causes.append(c)
            results[r["method"]][r["id"]] = {"ranks": causes, "error": r["error"]}
    return dict(results)


# -- scoring -----------------------------------------------------------------------------------------
def set_f1(pred: Sequence[str], truth: Sequence[str]) -> float:
    p, t = set(pred), set(truth)
    if not p and not t:
        return 1.0
    tp = len(p & t)
    return 0.0 if tp == 0 else 2 * tp / (len(p) + len(t))


def score_regimes(records: Sequence[Mapping[str, Any]], preds: Mapping[str, Prediction]) -> dict[str, Any]:
    confusion: dict[str, Counter[str]] = {r: Counter() for r in REGIMES}
    for rec in records:
        confusion[rec["primary"]][preds[rec["id"]][0]] += 1
    per_regime = {
        r: {"windows": sum(c.values()), "accuracy": round(c[r] / sum(c.values()), 4) if c else None} for r, c in confusion.items() if c
    }
    right = sum(confusion[r][r] for r in confusion)
    caused = [rec for rec in records if rec["causes"]]
    compound = [rec for rec in caused if len(rec["causes"]) > 1]
    f1 = [set_f1(preds[rec["id"]][1], rec["causes"]) for rec in caused]
    f1c = [set_f1(preds[rec["id"]][1], rec["causes"]) for rec in compound]
    return {
        "windows": len(records),
        "primary_accuracy": round(right / len(records), 4) if records else None,
        "per_regime": per_regime,
        "confusion": {r: dict(c) for r, c in confusion.items() if c},
        "set_f1": round(sum(f1) / len(f1), 4) if f1 else None,
        "compound_windows": len(compound),
        "compound_set_f1": round(sum(f1c) / len(f1c), 4) if f1c else None,
    }


def ac_at_k(records: Sequence[Mapping[str, Any]], ranks: Mapping[str, Sequence[str]], k: int) -> dict[str, Any]:
    """AC@k per cause class and per family: the share of windows with that cause found in the top k."""
    by_cause: dict[str, list[int]] = defaultdict(list)
    single: dict[str, list[int]] = defaultdict(list)
    by_family: dict[str, list[int]] = defaultdict(list)
    for rec in records:
        top = list(ranks.get(rec["id"], []))[:k]
        for cause in rec["causes"]:
            hit = int(cause in top)
            by_cause[cause].append(hit)
            by_family[rec["family"]].append(hit)
            if len(rec["causes"]) == 1:
                single[cause].append(hit)
    return {
        "by_cause": {c: round(sum(v) / len(v), 4) for c, v in sorted(by_cause.items())},
        # Windows with one cause only: at k=1 a compound window can credit one of its causes at most.
        "by_cause_single": {c: round(sum(v) / len(v), 4) for c, v in sorted(single.items())},
        "by_family": {f: round(sum(v) / len(v), 4) for f, v in sorted(by_family.items())},
    }


def attribution_error(records: Sequence[Mapping[str, Any]], th: Thresholds = DEFAULT) -> dict[str, Any]:
    """Against counterfactual truth: the latency that disappears with a cause removed is its share."""
    stats = {"ttft_p50": "ttft_p50_s", "ttft_p99": "ttft_p99_s", "tpot_p50": "tpot_p50_s", "tpot_p99": "tpot_p99_s"}
    ms: list[float] = []
    pp: list[float] = []
    pp_positive: list[float] = []  # pairs whose true share is > 0: most pairs are 0 truth, 0 prediction
    rows = []
    for rec in records:
        cf = rec.get("counterfactual")
        if not cf:
            continue
        snap, ref = _snap(rec)
        d = classify(snap, ref, th)
        if d.attribution is None:
            continue
        for stat, field in stats.items():
            share = d.attribution.share(stat)
            obs = getattr(snap, field)
            if share is None or obs is None or share.reference_s is None:
                continue
            excess = obs - share.reference_s
            if excess <= 0:
                continue
            truth: dict[str, float] = {}
            for r in RESOURCES:
                alone = cf.get(f"without_{r}", {}).get(field)
                if r not in rec["causes"]:
                    truth[r] = 0.0
                elif alone is not None:
                    truth[r] = max(0.0, obs - alone)
                elif r == "queue" and cf.get("without_network", {}).get(field) is not None:
                    truth[r] = max(0.0, cf["without_network"][field] - share.reference_s)  # the queue alone, over the reference
            if set(truth) != set(RESOURCES):
                continue
            for r in RESOURCES:
                err = abs(share.seconds(r) - min(truth[r], excess))
                ms.append(1000 * err)
                pp.append(100 * err / excess)
                if truth[r] > 0:
                    pp_positive.append(100 * err / excess)
            rows.append({"id": rec["id"], "stat": stat, "excess_s": round(excess, 4),
                         "predicted": {r: round(share.seconds(r), 4) for r in RESOURCES},
                         "truth": {r: round(min(truth[r], excess), 4) for r in RESOURCES}})  # fmt: skip
    return {
        "pairs": len(ms),
        "mae_ms": round(sum(ms) / len(ms), 1) if ms else None,
        "mae_pp": round(sum(pp) / len(pp), 1) if pp else None,
        "pairs_true_positive": len(pp_positive),
        "mae_pp_true_positive": round(sum(pp_positive) / len(pp_positive), 1) if pp_positive else None,
        "rows": rows,
    }


REGIME_METHODS: dict[str, Callable[[Mapping[str, Any]], Prediction]] = {
    "inferslice": predict_inferslice,
    "rule-ttft-slo": predict_rule_ttft,
    "rule-link-util": predict_rule_link,
}


def evaluate(
    records: Sequence[Mapping[str, Any]], rca: Mapping[str, Mapping[str, Any]] | None = None, th: Thresholds = DEFAULT
) -> dict[str, Any]:
    out: dict[str, Any] = {"splits": {}}
    for part in ("tune", "test", "all"):
        recs = [r for r in records if part == "all" or r["split"] == part]
        caused = [r for r in recs if r["causes"]]
        entry: dict[str, Any] = {"windows": len(recs), "families": dict(Counter(r["family"] for r in recs)), "methods": {}}
        for name, fn in REGIME_METHODS.items():
            preds = {r["id"]: (predict_inferslice(r, th) if name == "inferslice" else fn(r)) for r in recs}
            entry["methods"][name] = {
                **score_regimes(recs, preds),
                "ac1": ac_at_k(caused, {i: p[2] for i, p in preds.items()}, 1),
                "ac3": ac_at_k(caused, {i: p[2] for i, p in preds.items()}, 3),
            }
        for name, per_id in (rca or {}).items():
            ranks = {i: v["ranks"] for i, v in per_id.items()}
            # this half's caused windows only (the rankings cover both halves): a window with no result failed too
            results = [per_id.get(r["id"], {"error": "no result"}) for r in caused]
            errors = Counter(str(v["error"]).split(":")[0] for v in results if v.get("error"))
            entry["methods"][name] = {
                "windows_with_cause": len(caused),
                "failed": sum(errors.values()),
                "errors": dict(errors),
                "ac1": ac_at_k(caused, ranks, 1),
                "ac3": ac_at_k(caused, ranks, 3),
            }
        entry["attribution_error"] = attribution_error(recs, th)
        out["splits"][part] = entry
    return out


# -- tuning on the tune half only --------------------------------------------------------------------
TUNING_GRID: dict[str, tuple[float, ...]] = {
    "first_chunk_tpot_multiple": (10.0, 20.0, 40.0, 80.0, 160.0),
    "link_binding_ratio": (0.75, 0.8, 0.85),
}


def tune(records: Sequence[Mapping[str, Any]], base: Thresholds = DEFAULT) -> tuple[Thresholds, list[dict[str, Any]]]:
    """The grid point with the best tune-half score: primary accuracy + set F1 - attribution error (pp / 100) on the
    pairs whose true share is > 0 (the figure the target reads; the all-pairs one is mostly 0 against 0)."""
    import dataclasses
    import itertools

    recs = [r for r in records if r["split"] == "tune"]
    trials = []
    names = list(TUNING_GRID)
    for values in itertools.product(*(TUNING_GRID[n] for n in names)):
        th = dataclasses.replace(base, **dict(zip(names, values, strict=True)))
        preds = {r["id"]: predict_inferslice(r, th) for r in recs}
        s = score_regimes(recs, preds)
        err = attribution_error(recs, th)["mae_pp_true_positive"] or 0.0
        score = (s["primary_accuracy"] or 0.0) + (s["set_f1"] or 0.0) - err / 100.0
        trials.append({**dict(zip(names, values, strict=True)), "primary": s["primary_accuracy"], "set_f1": s["set_f1"], "attr_pp": err,
                       "score": round(score, 4)})  # fmt: skip
    best = max(trials, key=lambda t: (t["score"], -abs(t["first_chunk_tpot_multiple"] - base.first_chunk_tpot_multiple)))
    return dataclasses.replace(base, **{n: best[n] for n in names}), trials


# -- the report --------------------------------------------------------------------------------------
TARGETS = {"primary": 0.97, "compound_f1": 0.9, "attribution_pp": 15.0, "cost_ratio": 4.0}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def _method_table(entry: Mapping[str, Any]) -> list[str]:
    regimes = [r for r in REGIMES if r != Regime.UNKNOWN.value]
    lines = [
        "| method | primary | " + " | ".join(regimes) + " | set F1 | compound F1 (n) |",
        "|---|---|" + "---|" * len(regimes) + "---|---|",
    ]
    for name, m in entry["methods"].items():
        if "primary_accuracy" not in m:
            continue
        per = m["per_regime"]
        cells = [_pct(per[r]["accuracy"]) if r in per else "-" for r in regimes]
        lines.append(
            f"| {name} | {_pct(m['primary_accuracy'])} | "
            + " | ".join(cells)
            + f" | {m['set_f1']} | {m['compound_set_f1']} ({m['compound_windows']}) |"
        )
    return lines


def _ac_table(entry: Mapping[str, Any], key: str, by: str = "by_cause") -> list[str]:
    causes = sorted({c for m in entry["methods"].values() for c in m[key][by]})
    families = sorted({f for m in entry["methods"].values() for f in m[key]["by_family"]}) if by == "by_cause" else []
    cols = [*causes, *families]
    lines = ["| method | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for name, m in entry["methods"].items():
        by_c, by_f = m[key][by], m[key]["by_family"]
        note = f" ({m['failed']} failed)" if m.get("failed") else ""
        cells = [*(_pct(by_c.get(c)) for c in causes), *(_pct(by_f.get(f)) for f in families)]
        lines.append(f"| {name}{note} | " + " | ".join(cells) + " |")
    return lines


def _confusion(m: Mapping[str, Any]) -> list[str]:
    cols = REGIMES
    lines = ["| truth \\ predicted | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for truth, row in m["confusion"].items():
        lines.append(f"| {truth} | " + " | ".join(str(row.get(c, 0)) for c in cols) + " |")
    return lines


def markdown(result: Mapping[str, Any]) -> str:
    test = result["tuned"]["splits"]["test"]
    ours = test["methods"]["inferslice"]
    attr = test["attribution_error"]
    families = ", ".join(f"{k} {v}" for k, v in sorted(result["corpus"]["families"].items()))
    cost = result["cost"]
    lines = [
        "# Diagnosis on the labelled corpus (held-out half)",
        "",
        f"Corpus: {result['corpus']['windows']} windows ({families}); "
        f"{result['corpus']['tune']} tune / {result['corpus']['test']} test, split by scenario. Labels from the injected truth only.",
        "",
        "Thresholds tuned on the tune half only: "
        + ", ".join(f"{k} = {v:g}" for k, v in result["tuned_thresholds"].items())
        + " (defaults: "
        + ", ".join(f"{k} = {v:g}" for k, v in result["default_thresholds"].items())
        + ").",
        "",
        "## Primary regime and cause sets (test half, tuned)",
        "",
        *_method_table(test),
        "",
        "Confusion of `inferslice` (test half, tuned):",
        "",
        *_confusion(ours),
        "",
        "## AC@1 per cause class and per scenario family (test half, windows with a cause)",
        "",
        *_ac_table(test, "ac1"),
        "",
        "AC@1 on the windows with a single cause (a compound window can credit only one cause at k = 1):",
        "",
        *_ac_table(test, "ac1", "by_cause_single"),
        "",
        "AC@3 (with three cause classes a ranking that names all three scores 100 %):",
        "",
        *_ac_table(test, "ac3"),
        "",
        "## Attribution error against counterfactual truth (test half, tuned)",
        "",
        f"On the {attr['pairs_true_positive']} pairs whose true share is > 0: {attr['mae_pp_true_positive']} percentage points of the"
        f" statistic's excess over the reference. All {attr['pairs']} (window, statistic, resource) pairs, most of them 0 truth and"
        f" 0 predicted: mean absolute error {attr['mae_ms']} ms, {attr['mae_pp']} percentage points.",
        "",
        "## With the default thresholds (test half)",
        "",
        *_method_table(result["default"]["splits"]["test"]),
        "",
        f"Attribution error: {result['default']['splits']['test']['attribution_error']['mae_ms']} ms, "
        f"{result['default']['splits']['test']['attribution_error']['mae_pp']} pp.",
        "",
        f"Classifier cost: {cost['classify_over_parse_cost']:.2f}x parsing alone "
        f"({cost['classify_only_per_s']:.0f} snapshots/s classified, {cost['parse_per_s']:.0f}/s parsed; target <= 4x).",
        "",
        "## Targets",
        "",
    ]
    for name, ok, text in result["targets"]:
        lines.append(f"- {'met' if ok else 'MISSED'}: {name}: {text}")
    return "\n".join(lines) + "\n"


def targets(result: Mapping[str, Any]) -> list[tuple[str, bool, str]]:
    test = result["tuned"]["splits"]["test"]
    ours = test["methods"]["inferslice"]
    attr = test["attribution_error"]
    out = [
        ("primary regime >= 97 % held-out", (ours["primary_accuracy"] or 0) >= TARGETS["primary"], _pct(ours["primary_accuracy"])),
        (
            "compound set F1 >= 0.9",
            (ours["compound_set_f1"] or 0) >= TARGETS["compound_f1"],
            f"{ours['compound_set_f1']} over {ours['compound_windows']} compound windows (set F1 over all caused windows {ours['set_f1']})",
        ),
        (
            "attribution error <= 15 pp (pairs whose true share is > 0)",
            (attr["mae_pp_true_positive"] or 1e9) <= TARGETS["attribution_pp"],
            f"{attr['mae_pp_true_positive']} pp over {attr['pairs_true_positive']} pairs"
            f" (all {attr['pairs']} pairs, most of them 0 truth and 0 predicted: {attr['mae_pp']} pp)",
        ),
        (
            "classifier cost <= 4x parsing",
            result["cost"]["classify_over_parse_cost"] <= TARGETS["cost_ratio"],
            f"{result['cost']['classify_over_parse_cost']:.2f}x",
        ),
    ]
    for key, label in (("by_cause", "all windows"), ("by_cause_single", "single-cause windows")):
        mine = ours["ac1"][key]
        for name, m in test["methods"].items():
            if name == "inferslice":
                continue
            if m.get("failed") and m["failed"] >= m.get("windows_with_cause", 0):
                if key == "by_cause":  # a peer that ran on no window is not beaten: it is not run, and claims nothing
                    out.append(
                        (f"{name}: not run", False, f"failed on all {m['failed']} windows ({', '.join(m['errors'])}); no claim either way")
                    )
                continue
            worse = [f"{c} ({v:.3f} vs {mine.get(c, 0.0):.3f})" for c, v in m["ac1"][key].items() if v >= mine.get(c, 0.0)]
            text = "ties or loses on " + ", ".join(worse) if worse else "beaten on all"
            out.append((f"beats {name} on every cause class (AC@1, {label})", not worse, text))
    return out
