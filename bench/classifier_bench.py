"""Benchmarks of the diagnosis path (classifier throughput, API latency), as ratios to a baseline.

Thin wrapper around ``inferslice.benchmarks.classifier`` (also ``inferslice bench classifier``).
Run: ``.venv/bin/python bench/classifier_bench.py [--n 20000] [--rate 200] [--duration 10] [--skip-api]``.
"""

from __future__ import annotations

import argparse
import sys

from inferslice.benchmarks import classifier


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=20000, help="snapshots for the classifier benchmark")
    parser.add_argument("--rate", type=float, default=200.0, help="API requests per second")
    parser.add_argument("--duration", type=float, default=10.0, help="API load seconds")
    parser.add_argument("--skip-api", action="store_true")
    args = parser.parse_args(argv)
    result = classifier.run(args.n, api=not args.skip_api, rate=args.rate, duration_s=args.duration)
    print(classifier.markdown(result), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
