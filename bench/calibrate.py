"""``inferslice bench corpus calibrate``: fit the confidence table on the corpus's tune seeds only.

Per predicted regime, the verdicts of the tune windows (both sources) that no cap holds below the
bar are sorted by their margin (the ``confidence_margin`` evidence) and an isotonic step function
of "the verdict was right" on the margin is fitted by pool-adjacent-violators; blocks of fewer than
``min_block`` windows are merged into a neighbour so no step rests on a handful of windows, and each
step's value is the block's share right with one pseudo-window each way ((k + 1) / (n + 2)).
The table is written to ``bottleneck/calibration.py`` with its provenance (corpus, seeds, counts,
date, the code hash of the classifier it was fitted on). Capped verdicts are not fitted: their
confidence is the table's value held below the bar.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import textwrap
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferslice.bench.corpus_metrics import REGIME_CLASS, Truth
from inferslice.bench.corpus_windows import LabelledWindow
from inferslice.bottleneck import DEFAULT, classify

Step = tuple[float, float, int]  # (margin upper bound, probability right, windows)
MIN_BLOCK = 30  # windows per step: a share from 30 windows is known to ~+-0.09 at 0.8; fewer is noise


def pav(points: Sequence[tuple[float, bool]], min_block: int = MIN_BLOCK) -> list[tuple[float, float, int]]:
    """Isotonic (non-decreasing) fit of correctness on margin: ``[(upper margin, p, n), ...]``."""
    pts = sorted(points, key=lambda x: x[0])
    blocks: list[list[float]] = []  # [sum right, n, lo margin, hi margin]
    for m, ok in pts:
        if blocks and blocks[-1][3] == m:  # equal margins are one point of the step function (a saturated margin ties many)
            blocks[-1][0] += float(ok)
            blocks[-1][1] += 1.0
        else:
            blocks.append([float(ok), 1.0, m, m])
        while len(blocks) > 1 and (blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1] or blocks[-2][1] < min_block):
            s, n, _, hi = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
            blocks[-1][3] = hi
    while len(blocks) > 1 and blocks[-1][1] < min_block:  # the last block too small: into its neighbour
        s, n, _, hi = blocks.pop()
        blocks[-1][0] += s
        blocks[-1][1] += n
        blocks[-1][3] = hi
    # Re-impose monotonicity after the merges (a merge can leave a violation behind), on the values
    # published: the pseudo-windows can reorder two blocks whose raw shares were in order.
    def smoothed(b: list[float]) -> float:
        return (b[0] + 1.0) / (b[1] + 2.0)

    i = 1
    while i < len(blocks):
        if smoothed(blocks[i - 1]) >= smoothed(blocks[i]):
            s, n, _, hi = blocks.pop(i)
            blocks[i - 1][0] += s
            blocks[i - 1][1] += n
            blocks[i - 1][3] = hi
            i = max(1, i - 1)
        else:
            i += 1
    out = []
    for j, (s, n, _lo, hi) in enumerate(blocks):
        upper = (hi + blocks[j + 1][2]) / 2.0 if j + 1 < len(blocks) else float("inf")
        out.append((upper, (s + 1.0) / (n + 2.0), int(n)))
    return out


def margin_points(windows: Sequence[LabelledWindow], include_capped: bool = False) -> dict[str, list[tuple[float, bool]]]:
    """Per predicted regime: (margin, right) of every uncapped verdict (every verdict with ``include_capped``)."""
    points: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for w in windows:
        d = classify(w.snapshot, w.reference, DEFAULT)
        if d.regime.value == "unknown":
            continue
        ev = {e.signal: e for e in d.evidence}
        if ("confidence_cap" in ev and not include_capped) or "confidence_margin" not in ev:
            continue
        right = REGIME_CLASS[d.regime.value] == Truth.of(w.truth, w.tier).primary
        points[d.regime.value].append((float(ev["confidence_margin"].value or 0.0), right))
    return points


def fit(windows: Sequence[LabelledWindow], min_block: int = MIN_BLOCK, include_capped: bool = False) -> dict[str, list[Step]]:
    return {regime: pav(pts, min_block) for regime, pts in sorted(margin_points(windows, include_capped).items()) if pts}


def render(table: Mapping[str, Sequence[tuple[float, float, int]]], provenance: str) -> str:
    wrapped = textwrap.wrap(provenance, 96)
    lines = [
        '"""The confidence calibration table (``bottleneck/confidence.py``). Written by ``inferslice bench corpus',
        'calibrate`` (bench/calibrate.py); edit the corpus or the fit, not this file.',
        "",
        "Provenance:",
        *wrapped,
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "PROVENANCE = (",
        *(f"    {json.dumps(part + (' ' if i < len(wrapped) - 1 else ''))}" for i, part in enumerate(wrapped)),
        ")",
        "UNCALIBRATED = 0.5  # a regime the tune seeds never produced: no evidence it is right",
        "# regime -> ((margin upper bound, probability right), ...), ascending; the last bound is +inf.",
        "# Each step's window count is in the comment beside it.",
        "TABLE: dict[str, tuple[tuple[float, float], ...]] = {",
    ]
    for regime, steps in table.items():
        lines.append(f"    {json.dumps(regime)}: (")
        for upper, p, n in steps:
            bound = 'float("inf")' if upper == float("inf") else f"{upper:.4f}"
            lines.append(f"        ({bound}, {p:.4f}),  # {n} windows")
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


_STEP = re.compile(r"\((float\(\"inf\"\)|[0-9.]+), ([0-9.]+)\),  # (\d+) windows")
_REGIME = re.compile(r'^    "([a-z_]+)": \($')
_PROVENANCE = re.compile(r"^PROVENANCE = \(\n(.*?)\n\)$", re.M | re.S)


def read_table(text: str) -> tuple[dict[str, list[Step]], str]:
    """A table file written by ``render``, read back: its steps (with their window counts) and provenance."""
    table: dict[str, list[Step]] = {}
    regime: str | None = None
    for line in text.splitlines():
        if (m := _REGIME.match(line)) is not None:
            regime = m.group(1)
            table[regime] = []
        elif regime is not None and (s := _STEP.search(line)) is not None:
            upper = float("inf") if s.group(1).startswith("float") else float(s.group(1))
            table[regime].append((upper, float(s.group(2)), int(s.group(3))))
    prov = _PROVENANCE.search(text)
    provenance = "".join(json.loads(part.strip()) for part in prov.group(1).splitlines()) if prov is not None else ""
    return table, provenance


def calibrate(
    windows: Sequence[LabelledWindow],
    seeds_text: str,
    corpus: Sequence[str],
    code_sha: str,
    out: Path,
    regimes: Sequence[str] = (),
) -> dict[str, Any]:
    """Fit every regime's steps, or (``regimes``) only those, keeping the others and their provenance
    from the table ``out`` holds: a regime the table could not fit before (no uncapped verdict) is
    fitted without refitting what was already fitted and validated."""
    table = fit(windows)
    fitted = "every regime"
    if regimes:
        unknown = [r for r in regimes if r not in table]
        if unknown:
            raise ValueError(f"no uncapped verdict of {', '.join(unknown)} on these seeds: nothing to fit")
        kept, old = read_table(out.read_text()) if out.exists() else ({}, "")
        merged = {**{k: v for k, v in kept.items() if k not in regimes}, **{r: table[r] for r in regimes}}
        table = dict(sorted(merged.items()))
        fitted = ", ".join(regimes) + " only (the rest as fitted before: " + old + ")"
    counts = {r: sum(n for _, _, n in steps) for r, steps in table.items()}
    refit = {r: counts[r] for r in (regimes or table)}
    provenance = (
        f"isotonic fit (PAV, >= {MIN_BLOCK} windows a step) of {fitted} on the tune seeds {seeds_text} of {', '.join(corpus)}: "
        f"{sum(refit.values())} uncapped verdicts of {len(windows)} windows x sources "
        f"({', '.join(f'{r} {n}' for r, n in refit.items())}); classifier sha256 {code_sha[:16]}; "
        f"{dt.datetime.now(dt.UTC).strftime('%Y-%m-%d')}"
    )
    out.write_text(render(table, provenance))
    return {"table": table, "provenance": provenance, "counts": counts}
