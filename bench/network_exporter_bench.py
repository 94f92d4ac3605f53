"""Scrape cost of inferslice's network exporter vs prometheus-node-exporter's netdev collector.

Thin wrapper around ``inferslice.benchmarks.network_exporter`` (also ``inferslice bench exporter``).
Run as root: ``.venv/bin/python bench/network_exporter_bench.py [--sizes 100 1000] [--repeat 15]``.
"""

from __future__ import annotations

import argparse
import json
import sys

from inferslice.benchmarks import network_exporter


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print the raw result as JSON too")
    args = parser.parse_args()
    try:
        result = network_exporter.run(tuple(args.sizes), args.repeat)
    except network_exporter.Unavailable as err:
        print(err, file=sys.stderr)
        return 2
    print(network_exporter.markdown(result), end="")
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
