"""Diagnosis benchmark on the testbed: time to the right verdict after a load step, a cap cut and a GPU-share drop.

Run (root; brings the testbed up and down if it is not up already, ~5-6 min with the defaults):
    .venv/bin/python bench/diagnosis_bench.py --out bench/results/diagnosis
Replay a finished run's recorded windows with other thresholds (no testbed, seconds):
    .venv/bin/python bench/diagnosis_bench.py --out bench/results/diagnosis --rescore --set tpot_tail_inflation_ratio=2.5
The logic lives in ``inferslice.benchmarks.diagnosis`` (``run``, ``rescore``, ``markdown``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from inferslice.benchmarks import diagnosis
from inferslice.bottleneck import DEFAULT, Thresholds
from inferslice.common.registry import DEFAULT_STATE_DIR


def _thresholds(pairs: list[str]) -> Thresholds:
    names = {f.name for f in dataclasses.fields(Thresholds)}
    values = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if key not in names:
            raise SystemExit(f"--set: unknown threshold {key!r} (have {', '.join(sorted(names))})")
        values[key] = float(value)
    return dataclasses.replace(DEFAULT, **values)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("bench/results/diagnosis"))
    p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    p.add_argument("--topology", default=None)
    p.add_argument("--windows", default="4,6,8", help="comma-separated window lengths (s), evaluated side by side")
    p.add_argument("--sources", default="prometheus,embedded")
    p.add_argument("--repetitions", type=int, default=None)
    p.add_argument("--baseline-s", type=float, default=None)
    p.add_argument("--hold-s", type=float, default=None)
    p.add_argument("--recover-s", type=float, default=None)
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a classifier threshold")
    p.add_argument("--rescore", action="store_true", help="replay the recorded windows in --out instead of running")
    args = p.parse_args(argv)
    thresholds = _thresholds(args.set)
    if args.rescore:
        result = diagnosis.rescore(args.out, thresholds, args.topology)
        out = args.out / "rescored"
        out.mkdir(exist_ok=True)
        diagnosis.write(result, out)
        print(diagnosis.markdown(result))
        return 0
    if os.geteuid() != 0:
        print("diagnosis_bench: the testbed needs root", file=sys.stderr)
        return 1
    overrides = {
        k: v
        for k, v in (
            ("repetitions", args.repetitions),
            ("baseline_s", args.baseline_s),
            ("hold_s", args.hold_s),
            ("recover_s", args.recover_s),
        )
        if v is not None
    }
    settings = dataclasses.replace(
        diagnosis.BenchSettings(),
        windows_s=tuple(float(w) for w in args.windows.split(",") if w.strip()),
        sources=tuple(s.strip() for s in args.sources.split(",") if s.strip()),
        **overrides,
    )
    result = diagnosis.run(args.out, settings, state_dir=args.state_dir, topology_path=args.topology, thresholds=thresholds)
    print(diagnosis.markdown(result))
    print(json.dumps({"recommended_window_s": result["recommended_window_s"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
