"""How far a per-(class, tier) AC@1 could be from its point figure: a bootstrap over seeds.

A corpus window is not an independent sample. The windows of one seed share its workload, its
placement, its causes and the host's state while it ran, so a classifier that misreads one of a
seed's windows tends to misread its neighbours. A binomial interval over windows would treat 38
windows from nine seeds as 38 draws and claim a precision the corpus does not have. Here the seed is
the unit: each draw resamples the scored seeds with replacement and recomputes every cell from the
windows of the seeds drawn (a seed drawn twice counts twice), and the interval is the 2.5th and 97.5th
percentile of the draws (the percentile bootstrap). It answers "could this cell be at the 97 %
target?" for a reader: a cell whose upper bound is under 0.97 is below it on this evidence.

Beside the per-cell AC@1, never instead of it. The draws are seeded, so a score regenerates the same
intervals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from inferslice.bench import corpus_metrics as cm
from inferslice.bench.corpus_windows import LabelledWindow

DRAWS = 2000  # percentiles at 2.5 / 97.5 % move by well under a point between reruns at this many
RNG_SEED = 0  # fixed: the same windows give the same intervals
LEVEL = 0.95
# Fewer seeds than this and the draws can only recombine the same few: an interval from them would
# read as certainty (one seed: every draw is the seed itself), so the cell gets none.
MIN_SEEDS = 5


def seed_intervals(
    ws: Sequence[LabelledWindow], verdicts: Mapping[str, cm.Verdict], *, draws: int = DRAWS, rng_seed: int = RNG_SEED
) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """Per source, class and tier (and "all"): the AC@1 interval from resampling seeds, with how many
    seeds hold a window of that cell (no interval, None, under ``MIN_SEEDS``). ``verdicts``:
    inferslice's verdict per window id; a window without one is left out."""
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for source in sorted({w.source for w in ws}):
        tally: dict[tuple[str, str], dict[int, list[int]]] = {}  # (class, tier) -> seed -> [windows, right]
        for w in ws:
            if w.source != source or w.id not in verdicts:
                continue
            t = cm.Truth.of(w.truth, w.tier)
            right = int(verdicts[w.id].primary == t.primary)
            for key in ((t.primary, w.tier), (t.primary, "all")):
                c = tally.setdefault(key, {}).setdefault(w.seed, [0, 0])
                c[0] += 1
                c[1] += right
        seeds = sorted({w.seed for w in ws if w.source == source and w.id in verdicts})
        if not seeds:  # no verdict on this source: nothing to resample
            continue
        cells = sorted(tally)
        n = np.array([[tally[k].get(s, [0, 0])[0] for k in cells] for s in seeds], dtype=float)  # seeds x cells
        h = np.array([[tally[k].get(s, [0, 0])[1] for k in cells] for s in seeds], dtype=float)
        rng = np.random.default_rng(rng_seed)
        picks = rng.multinomial(len(seeds), np.full(len(seeds), 1.0 / len(seeds)), size=draws).astype(float)  # draws x seeds
        dn, dh = picks @ n, picks @ h
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(dn > 0, dh / np.where(dn > 0, dn, 1.0), np.nan)  # a draw without the cell says nothing of it
        lo_q, hi_q = 100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2
        per: dict[str, dict[str, dict[str, Any]]] = {}
        for j, (cls, tier) in enumerate(cells):
            col = rate[:, j]
            col = col[~np.isnan(col)]
            held = int((n[:, j] > 0).sum())
            wide = held >= MIN_SEEDS and col.size > 0
            per.setdefault(cls, {})[tier] = {
                "ac1": cm.rate(int(h[:, j].sum()), int(n[:, j].sum())),
                "windows": int(n[:, j].sum()),
                "seeds": held,
                "lo": round(float(np.percentile(col, lo_q)), 4) if wide else None,
                "hi": round(float(np.percentile(col, hi_q)), 4) if wide else None,
            }
        out[source] = per
    return out


def markdown(iv: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]], target: float) -> list[str]:
    """One table per source: each cell's AC@1, its interval, and its windows / seeds."""
    if not iv:
        return []
    lines = [
        f"## AC@1 per (class, tier) with a {LEVEL:.0%} interval over seeds",
        "",
        f"Percentile bootstrap, {DRAWS} draws of the scored seeds with replacement (`bench/corpus_interval.py`):",
        "a seed's windows are not independent, so the seed is the unit. % [low, high] (windows / seeds);",
        f"[-]: fewer than {MIN_SEEDS} seeds hold the cell, too few to resample.",
        f"a cell whose high end is under {target:.0%} is below the target on this evidence. Beside the",
        "per-cell AC@1 above, not instead of it.",
        "",
    ]
    for source, per in iv.items():
        tiers = sorted({t for cells in per.values() for t in cells if t != "all"})
        lines += [f"{source}:", "", "| class | " + " | ".join([*tiers, "all"]) + " |", "|---|" + "---|" * (len(tiers) + 1)]
        for cls in cm.CLASSES:
            cells = per.get(cls)
            if not cells:
                continue
            row = []
            for t in [*tiers, "all"]:
                c = cells.get(t)
                if c is None:
                    row.append("-")
                    continue
                span = "-" if c["lo"] is None else f"{c['lo'] * 100:.0f}, {c['hi'] * 100:.0f}"
                row.append(f"{c['ac1'] * 100:.1f} [{span}] ({c['windows']} / {c['seeds']})")
            lines.append(f"| {cls} | " + " | ".join(row) + " |")
        lines.append("")
    return lines
