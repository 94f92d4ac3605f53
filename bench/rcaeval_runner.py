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
import sys
import warnings
from contextlib import redirect_stderr
from typing import Any

# RCAEval's own harness (rq2.py) always names its dataset; any name but its special ones makes each
# method drop the time column and the constant columns before it ranks (RCAEval.io.time_series
# preprocess; RCD's own branch). Without a name BARO, NSigma and CIRCA rank the same columns (their
# z-scores put a constant or the time last) but RCD would search over the time column itself.
DATASET = "inferslice"
# RCD draws the order in which it visits neighbours (np.random); a fixed seed makes a rerun reproduce.
SEEDED: dict[str, dict[str, Any]] = {"rcd": {"seed": 0}}


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


def _corr(x: list[float], y: list[float]) -> float:
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy)


def linear_copies(columns: dict[str, list[float]]) -> list[str]:
    """The columns that are an exact affine function of a varying column listed before them.

    The corpus gives each number raw and normalised by what inferslice judges it against (the SLO,
    the reference, the cap); within one case those are constants, so ``latency_ttftoverslo`` is
    ``latency_ttftp99`` over 0.5 and the two are perfectly correlated. CIRCA's PC (Fisher-z) inverts
    correlation sub-matrices and fails on every such case ("Data correlation matrix is singular");
    a copy carries nothing its original does not, so the first of each group (the raw column: the
    corpus lists it first) is kept. The time and constant columns are never copies (RCAEval's own
    preprocessing drops them).
    """
    kept: list[list[float]] = []
    copies: list[str] = []
    for name, x in columns.items():
        if name == "time" or max(x) == min(x):
            continue
        if any(abs(_corr(x, y)) > 1.0 - 1e-9 for y in kept):
            copies.append(name)
        else:
            kept.append(x)
    return copies


def without_linear_copies(df: Any) -> Any:
    """``df`` without ``linear_copies``: what CIRCA is given. BARO, NSigma and RCD take every column."""
    return df.drop(columns=linear_copies({str(c): [float(v) for v in df[c]] for c in df.columns}))


PREPARE = {"circa": without_linear_copies}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("inp")
    p.add_argument("out")
    p.add_argument("--methods", default="baro,nsigma,circa,rcd")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
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
                        result = fn(data, inject_time=float(case["inject_time"]), dataset=DATASET, **SEEDED.get(name, {}))
                    ranks = [str(r) for r in result.get("ranks", []) if str(r) != "time"]
                    if "failed (" in err.getvalue():
                        error, ranks = err.getvalue().strip().splitlines()[-1][:300], []
                except Exception as e:  # noqa: BLE001 - a peer's failure is a result, reported as such
                    error = f"{type(e).__name__}: {e}"[:300]
                fout.write(json.dumps({"id": case["id"], "method": name, "ranks": ranks, "error": error}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
