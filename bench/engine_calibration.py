"""Calibration check of the engine performance model against the brief's figures (simulated time).

Thin wrapper around ``inferslice.benchmarks.engine`` (also ``inferslice bench engine``):

    .venv/bin/python bench/engine_calibration.py [--topology PATH] [--duration-s 60] [--tier premium]
"""

from __future__ import annotations

import argparse

from inferslice.benchmarks import engine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default=None)
    ap.add_argument("--duration-s", type=float, default=60.0)
    ap.add_argument("--tier", action="append", default=None)
    ap.add_argument("--concurrency", type=int, action="append", default=None)
    args = ap.parse_args()
    result = engine.run(
        args.topology,
        tuple(args.tier) if args.tier else None,
        tuple(args.concurrency) if args.concurrency else engine.DEFAULT_LEVELS,
        args.duration_s,
    )
    print(engine.markdown(result), end="")


if __name__ == "__main__":
    main()
