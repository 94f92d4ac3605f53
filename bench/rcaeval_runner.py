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
                        result = fn(df, inject_time=float(case["inject_time"]), dataset=DATASET, **SEEDED.get(name, {}))
                    ranks = [str(r) for r in result.get("ranks", []) if str(r) != "time"]
                    if "failed (" in err.getvalue():
                        error, ranks = err.getvalue().strip().splitlines()[-1][:300], []
                except Exception as e:  # noqa: BLE001 - a peer's failure is a result, reported as such
                    error = f"{type(e).__name__}: {e}"[:300]
                fout.write(json.dumps({"id": case["id"], "method": name, "ranks": ranks, "error": error}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
