"""``inferslice bench diagnosis --corpus``: build the labelled corpus, score every method, write the report.

Writes into ``--diagnosis-out`` (default ``bench/results/diagnosis``): ``corpus.jsonl`` (the
windows and their truth), ``rca-ranks.json`` (RCAEval's rankings: they take minutes, so they are
kept and reused unless ``rerun_rca``), ``corpus-eval.json`` and ``corpus-eval.md``.

RCAEval runs in its own interpreter (``rca_python``; default ``$INFERSLICE_RCAEVAL_PYTHON`` or
``.venv-rcaeval/bin/python`` under the repository); without one the RCA peers are left out and
the report says so.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from inferslice.bench import corpus, corpus_eval
from inferslice.bench.classifier import bench_classifier
from inferslice.bottleneck import DEFAULT
from inferslice.topology import load_topology

RESULT_FILE = "corpus-eval.json"
REPORT_FILE = "corpus-eval.md"
RCA_FILE = "rca-ranks.json"


def run(out: Path, results_dir: Path, rca_python: str | None, rerun_rca: bool = False, cost_n: int = 4000) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    records = corpus.build(results_dir, load_topology(), sorted(p for p in results_dir.glob("diagnosis-edge*") if p.is_dir()))
    corpus.write(records, out / corpus.CORPUS_FILE)
    rca: dict[str, Any] | None = None
    rca_path = out / RCA_FILE
    if rca_python is not None and (rerun_rca or not rca_path.exists()):
        rca = corpus_eval.run_rca(records, rca_python)
        rca_path.write_text(json.dumps(rca, sort_keys=True))
    elif rca_path.exists():
        rca = json.loads(rca_path.read_text())
    tuned, trials = corpus_eval.tune(records)
    names = list(corpus_eval.TUNING_GRID)
    result: dict[str, Any] = {
        "benchmark": "diagnosis-corpus",
        "corpus": {
            "windows": len(records),
            "families": {f: sum(r["family"] == f for r in records) for f in sorted({r["family"] for r in records})},
            "tune": sum(r["split"] == "tune" for r in records),
            "test": sum(r["split"] == "test" for r in records),
            "compound": sum(len(r["causes"]) > 1 for r in records),
        },
        "rca_peers": sorted(rca) if rca else [],
        "default_thresholds": {n: getattr(DEFAULT, n) for n in names},
        "tuned_thresholds": {n: getattr(tuned, n) for n in names},
        "tuning_trials": trials,
        "default": corpus_eval.evaluate(records, rca, DEFAULT),
        "tuned": corpus_eval.evaluate(records, rca, tuned),
        "cost": bench_classifier(cost_n),
        "thresholds": dataclasses.asdict(tuned),
    }
    result["targets"] = corpus_eval.targets(result)
    (out / RESULT_FILE).write_text(json.dumps(result, indent=1, sort_keys=True))
    (out / REPORT_FILE).write_text(corpus_eval.markdown(result))
    return result
