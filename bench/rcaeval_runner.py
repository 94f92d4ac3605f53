"""Run RCAEval's metric-based root-cause methods on the corpus' series (a child process).

RCAEval's dependencies conflict with nothing here but weigh a lot (causal-learn, matplotlib), so it
lives in its own virtual environment (the ``rcaeval`` extra, or ``make rcaeval-venv``) and this
script is run with that interpreter; it imports nothing from inferslice. RCD needs a third one
(``make rcd-venv``: causal-learn 0.1.2.3 with RCAEval's patch, ``bench/rcaeval-rcd/``).

    <rcaeval-python> rcaeval_runner.py IN.jsonl OUT.jsonl [--methods baro,nsigma,circa,rcd]

IN: one case per line, ``{"id", "inject_time", "rows": [{"time": t, "<entity>_<metric>": v, ...}]}``.
OUT: one line per case and method, ``{"id", "method", "ranks": [...], "error": null | "..."}``. A
method that raises is reported with its error and no ranks (RCAEval's own wrapper would return the
unranked column order, which would score as a guess).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
import warnings
from contextlib import redirect_stderr
from typing import Any

# How each method is called (keyword arguments beyond the data and ``inject_time``).
# - A dataset name (RCAEval's harness, rq2.py, always passes one) turns on RCAEval's preprocessing:
#   the time column and constant columns dropped. CIRCA preprocesses the whole case at once, so only
#   what is constant over the whole case goes; it is given a name, without which its Fisher-z PC
#   fails on the constants. BARO, NSigma and RCD preprocess the normal and the anomalous period
#   apart, so a set-point gauge constant in the clean twin (the GPU share at 1, the cap, nothing
#   waiting) would be dropped however far it moves after: they are given no name and see every
#   column (the time column too, which the ranks below leave out).
# - RCD draws the order of its columns' chunks and its neighbours, CIRCA the SLI node its regression
#   test starts from (RCAEval's rht: np.random.choice): numpy's generator is seeded before every call
#   (RCD's own seed argument too), so a rerun ranks the same.
CALL: dict[str, dict[str, Any]] = {"circa": {"dataset": "inferslice"}, "rcd": {"seed": 0}}
SEED = 0


def _methods(names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        if name == "baro":
            from RCAEval.e2e.baro import baro

            out[name] = baro
        elif name == "nsigma":
            from RCAEval.e2e import nsigma

            out[name] = nsigma
        elif name == "circa":
            from RCAEval.e2e.circa import circa

            out[name] = circa
        elif name == "rcd":
            from RCAEval.e2e import rcd

            out[name] = rcd
    return out


def _corr(x: list[float], y: list[float]) -> float | None:
    """Pearson's r; None when either series does not vary (or its variance is not a finite number)."""
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    den = math.sqrt(sxx * syy)
    return sxy / den if den > 0 and math.isfinite(den) else None


def linear_copies(columns: dict[str, list[float]]) -> list[str]:
    """The columns that are an exact affine function of a column of their own family listed before
    them (the family: the name up to its first ``_``, as the peers' mapping reads it).

    The corpus gives each number raw and normalised by what inferslice judges it against (the SLO,
    the reference, the cap); within one case those are constants, so ``latency_ttftoverslo`` is
    ``latency_ttftp99`` over 0.5 and the two are perfectly correlated. CIRCA's PC (Fisher-z) inverts
    correlation sub-matrices and fails on every such case ("Data correlation matrix is singular");
    a copy carries nothing its original does not, so the first of each group (the raw column: the
    corpus lists it first) is kept. Only within a family: two columns of different families that
    happen to move together (two set-points stepping at the injection, two gauges zero but in one
    row) are both kept, so which cause CIRCA can name never depends on the columns' order. The time
    and constant columns are never copies (CIRCA's own preprocessing drops them).
    """
    kept: list[tuple[str, list[float]]] = []
    copies: list[str] = []
    for name, x in columns.items():
        if name == "time" or len(x) < 3 or max(x) == min(x):
            continue
        family = name.split("_", 1)[0]
        same = [y for f, y in kept if f == family]
        if any((r := _corr(x, y)) is not None and abs(r) > 1.0 - 1e-9 for y in same):
            copies.append(name)
        else:
            kept.append((family, x))
    return copies


def without_linear_copies(df: Any) -> Any:
    """``df`` without ``linear_copies``: what CIRCA is given. BARO, NSigma and RCD take every column."""
    return df.drop(columns=linear_copies({str(c): [float(v) for v in df[c]] for c in df.columns}))


PREPARE = {"circa": without_linear_copies}


def main(argv: list[str] | None = None) -> int:
    if argv is None and os.environ.get("PYTHONHASHSEED") != "0":
        # CIRCA's graph search walks sets of column names, whose order follows the per-process string
        # hash: the same case ranked twice differs without a fixed hash seed (5 of 40 cases did).
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    p = argparse.ArgumentParser()
    p.add_argument("inp")
    p.add_argument("out")
    p.add_argument("--methods", default="baro,nsigma,circa,rcd")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    import numpy as np
    import pandas as pd

    methods = _methods(args.methods.split(","))
    with open(args.inp) as fin, open(args.out, "w") as fout:
        for line in fin:
            case = json.loads(line)
            df = pd.DataFrame(case["rows"]).astype(float).fillna(0.0)
            for name, fn in methods.items():
                err = io.StringIO()
                ranks: list[str] = []
                error: str | None = None
                try:
                    with redirect_stderr(err):
                        data = PREPARE[name](df) if name in PREPARE else df
                        np.random.seed(SEED)
                        result = fn(data, inject_time=float(case["inject_time"]), **CALL.get(name, {}))
                    ranks = [str(r) for r in result.get("ranks", []) if str(r) != "time"]
                    if "failed (" in err.getvalue():
                        error, ranks = err.getvalue().strip().splitlines()[-1][:300], []
                except Exception as e:  # noqa: BLE001 - a peer's failure is a result, reported as such
                    error = f"{type(e).__name__}: {e}"[:300]
                fout.write(json.dumps({"id": case["id"], "method": name, "ranks": ranks, "error": error}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
