"""The ``inferslice`` command line: one entry point, one module per subcommand.

Each subcommand lives in ``cli/<name>.py`` (the demo in ``cli/demo/``) and exposes ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``. Modules are imported only when their
subcommand runs, so a broken optional dependency of one command never breaks the others.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from inferslice.errors import InferSliceError

COMMANDS: dict[str, str] = {
    "testbed": "local testbed: up | down | status | run SCENARIO | cap | replicas | share",
    "load": "load generator: fixed-concurrency or Poisson streaming requests against a tier",
    "exporter": "serve the exporters' /metrics (or print one exposition with --once)",
    "diagnose": "classify snapshots: one JSON object per line in, one diagnosis per line out",
    "api": "run the diagnosis API (FastAPI)",
    "dashboards": "generate Grafana dashboards and Prometheus rules from the tiers file",
    "demo": "the main job: testbed up, a scripted load/cap story with a live view, a report, teardown",
    "bench": "benchmarks, reported as ratios against a baseline run in the same process",
    "control": "the control loop: scale replicas, raise caps within each tier's guarantees (auto | approve | dry-run)",
    "deploy": "Kubernetes: render the Kustomize tree from the tiers file (base + overlays), check it, pods-sync",
}


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inferslice", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == selected:
            try:
                module = importlib.import_module(f"inferslice.cli.{name}")
            except ImportError as err:  # a missing optional dependency disables just this command
                p.set_defaults(_import_error=f"{name}: unavailable ({err})")
                continue
            module.add_arguments(p)
            p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "_import_error", None):
        print(f"inferslice {args._import_error}", file=sys.stderr)
        return 2
    try:
        return int(args._module.run(args) or 0)
    except InferSliceError as err:
        print(f"inferslice {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130

