"""What a generated corpus holds (pure): windows per (class, tier) cell and compound pair, healthy
and clean-breach windows, yield per seed and testbed time: what sizes a blind set."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

CLASSES = ("queue", "network", "compute")
PAIRS = (("network", "queue"), ("compute", "queue"), ("compute", "network"))


def read_windows(path: Path) -> list[dict[str, Any]]:
    opener = __import__("gzip").open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def summarize(windows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    cells: Counter[tuple[str, str]] = Counter()
    pairs: Counter[tuple[str, ...]] = Counter()
    kinds: Counter[str] = Counter()
    healthy: Counter[str] = Counter()
    clean_breach = 0
    injected_not_truth = 0
    per_seed: Counter[int] = Counter()
    with_prom = with_emb = 0
    for w in windows:
        t = w["truth"]
        causes = tuple(t["causes"])
        per_seed[int(w["seed"])] += 1
        for c in causes:
            cells[(c, w["tier"])] += 1
        for k in t["kinds"]:
            kinds[k] += 1
        if len(causes) >= 2:
            pairs[causes] += 1
        if not causes:
            healthy[w["tier"]] += 1
            if any(c["tier"] == w["tier"] for c in w["causes"]):
                injected_not_truth += 1
        clean_breach += bool(t.get("clean_breach"))
        with_prom += w["snapshots"].get("prometheus") is not None
        with_emb += w["snapshots"].get("embedded") is not None
    seeds = sorted(per_seed)
    out: dict[str, Any] = {
        "windows": len(windows),
        "seeds": len(seeds),
        "seed_range": [seeds[0], seeds[-1]] if seeds else None,
        "cells": {f"{c}/{t}": n for (c, t), n in sorted(cells.items())},
        "healthy": dict(sorted(healthy.items())),
        "compound_pairs": {"+".join(p): n for p, n in sorted(pairs.items())},
        "kinds": dict(sorted(kinds.items())),
        "clean_breach_windows": clean_breach,
        "injected_on_tier_but_not_in_truth": injected_not_truth,
        "windows_with_prometheus": with_prom,
        "windows_with_embedded": with_emb,
        "windows_per_seed": round(len(windows) / len(seeds), 1) if seeds else 0,
    }
    if meta:
        done = [v for s, v in meta.get("seeds", {}).items() if int(s) in per_seed]
        wall = sum(float(v.get("wall_s", 0)) for v in done)
        out["testbed_hours"] = round(wall / 3600, 2)
        out["seconds_per_seed"] = round(wall / len(done), 1) if done else None
    return out


def markdown(s: Mapping[str, Any], tiers: Iterable[str] = ("free", "standard", "premium")) -> str:
    tiers = list(tiers)
    lines = [f"{s['windows']} windows from {s['seeds']} seeds (seeds {s['seed_range']}), {s['windows_per_seed']} per seed"
             + (f"; {s['testbed_hours']} testbed-hours ({s['seconds_per_seed']} s per seed)" if "testbed_hours" in s else "") + ".", "",
             "| class | " + " | ".join(tiers) + " |", "|---|" + "---|" * len(tiers)]  # fmt: skip
    for c in CLASSES:
        lines.append(f"| {c} | " + " | ".join(str(s["cells"].get(f"{c}/{t}", 0)) for t in tiers) + " |")
    lines.append("| healthy | " + " | ".join(str(s["healthy"].get(t, 0)) for t in tiers) + " |")
    lines += ["", "Compound pairs (windows whose truth holds both): "
              + ", ".join(f"{k} {v}" for k, v in s["compound_pairs"].items()) + ".",
              f"Cause kinds in truth: {', '.join(f'{k} {v}' for k, v in s['kinds'].items())}.",
              f"Windows whose clean twin breached: {s['clean_breach_windows']}; with a cause injected on the tier but"
              f" none in truth: {s['injected_on_tier_but_not_in_truth']}.",
              f"Snapshots: Prometheus {s['windows_with_prometheus']}, embedded {s['windows_with_embedded']}."]  # fmt: skip
    return "\n".join(lines) + "\n"
