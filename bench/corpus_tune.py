"""``inferslice bench corpus tune``: choose the classifier's thresholds on the tune seeds only.

Coordinate descent over ``GRID`` from the current defaults: each pass tries every value of one
threshold with the others held, keeps the best, and moves on; two passes. The score of a threshold
set on the tune windows (both sources) is lexicographic, in the order the issue's targets bind:
the worst (class, tier) cell's AC@1, then the worst compound pair's exact-set accuracy, then the
mean cell AC@1, then minus the attribution error on true-share > 0 pairs (pp / 100). The result
(``tune.json``) lists every trial; the chosen values become ``Thresholds``' defaults by hand, each
with its reason, so the code says where a number came from.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferslice.bench import corpus_metrics as cm
from inferslice.bench.corpus_windows import LabelledWindow, inferslice_verdict
from inferslice.bottleneck import DEFAULT, Thresholds

GRID: dict[str, tuple[float, ...]] = {
    "ttft_inflation_ratio": (1.5, 2.0, 2.5, 3.0),
    "ttft_tail_inflation_ratio": (1.5, 2.0, 2.5, 3.0),
    "tpot_inflation_ratio": (1.2, 1.35, 1.5),
    "tpot_tail_inflation_ratio": (1.5, 2.0, 2.5),
    "first_chunk_tpot_multiple": (10.0, 20.0, 40.0, 80.0),
    "link_binding_ratio": (0.75, 0.8, 0.85),
    "secondary_share": (0.2, 0.25, 0.33),
    "delay_rtts_per_first_token": (1.0, 2.0, 3.0),
}


def objective(windows: Sequence[LabelledWindow], th: Thresholds) -> tuple[tuple[float, ...], dict[str, Any]]:
    pairs = [(cm.Truth.of(w.truth, w.tier), inferslice_verdict(w, th)) for w in windows]
    cells = [v["ac1"] for per in cm.ac1(pairs).values() for t, v in per.items() if t != "all" and v["ac1"] is not None]
    comp = [v["accuracy"] for v in cm.compound(pairs).values() if v["accuracy"] is not None]
    attr = cm.attribution(pairs)["true_share_positive"]["mean_pp"] or 0.0
    worst, mean = (min(cells), sum(cells) / len(cells)) if cells else (0.0, 0.0)
    worst_comp = min(comp) if comp else 1.0
    key = (round(worst, 4), round(worst_comp, 4), round(mean, 4), round(-attr / 100.0, 4))
    return key, {"worst_cell_ac1": worst, "worst_compound": worst_comp, "mean_cell_ac1": round(mean, 4), "attribution_pp": attr}


def tune(
    windows: Sequence[LabelledWindow], base: Thresholds = DEFAULT, grid: Mapping[str, Sequence[float]] = GRID, passes: int = 2
) -> tuple[Thresholds, list[dict[str, Any]]]:
    best = base
    best_key, info = objective(windows, best)
    trials: list[dict[str, Any]] = [{"pass": 0, "name": None, "value": None, **info}]
    for p in range(1, passes + 1):
        for name, values in grid.items():
            for value in values:
                if getattr(best, name) == value:
                    continue
                th = dataclasses.replace(best, **{name: value})
                key, info = objective(windows, th)
                trials.append({"pass": p, "name": name, "value": value, **info})
                if key > best_key:
                    best, best_key = th, key
    return best, trials


def write(out: Path, base: Thresholds, chosen: Thresholds, trials: Sequence[Mapping[str, Any]], seeds_text: str) -> dict[str, Any]:
    changed = {n: {"default": getattr(base, n), "tuned": getattr(chosen, n)} for n in GRID if getattr(base, n) != getattr(chosen, n)}
    result = {"seeds": seeds_text, "changed": changed, "trials": list(trials)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.json").write_text(json.dumps(result, indent=1))
    return result
