"""``inferslice diagnose``: one JSON snapshot per input line, one JSON diagnosis per output line.

The contract other tools rely on: output lines come in input order, one per accepted line, each with
``id`` (copied as given, else null), ``slice``, ``regime``, ``secondary``, ``confidence`` and
``evidence`` (plus ``slo``, ``missing`` and ``window_end_s``). A line that is not a JSON object or has
a wrong type is reported on stderr with its 1-based line number and gets no output line; the other
lines are still answered and the exit status is 1. Blank lines are skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from inferslice.bottleneck import classify
from inferslice.errors import ConfigError, InputError
from inferslice.snapshot import SliceSnapshot, snapshot_from_dict
from inferslice.topology import Topology, load_topology

HELP = "classify snapshots: one JSON object per line in, one diagnosis per line out"

DEFAULT_SLO_TTFT_P99_S = 0.5  # the brief's interactive SLO, for lines that name none


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", "-i", default="-", help="JSON-lines file of snapshots, '-' for stdin (default)")
    parser.add_argument("--topology", default=None, help="topology file: SLOs and replica ceilings of known tiers")
    parser.add_argument("--default-slo-ttft", type=float, default=DEFAULT_SLO_TTFT_P99_S, help="P99 TTFT SLO in seconds for unknown slices")


def _prepare(snap: SliceSnapshot, topology: Topology | None, default_slo_s: float) -> SliceSnapshot:
    if topology is not None:
        try:
            tier = topology.tier(snap.slice)
        except KeyError:
            tier = None
        if tier is not None:
            snap = dataclasses.replace(
                snap,
                slo_ttft_p99_s=snap.slo_ttft_p99_s if snap.slo_ttft_p99_s is not None else tier.slo_ttft_p99_s,
                slo_tpot_p99_s=snap.slo_tpot_p99_s if snap.slo_tpot_p99_s is not None else tier.slo_tpot_p99_s,
                replicas_max=snap.replicas_max if snap.replicas_max is not None else float(tier.replicas_max),
            )
    if snap.slo_ttft_p99_s is None:
        snap = dataclasses.replace(snap, slo_ttft_p99_s=default_slo_s)
    return snap


def diagnose_line(line: str, topology: Topology | None = None, default_slo_s: float = DEFAULT_SLO_TTFT_P99_S) -> dict[str, Any]:
    """One input line to one output object; raises ``InputError`` for a line to reject."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object, got {type(data).__name__}")
    snap = _prepare(snapshot_from_dict(data), topology, default_slo_s)
    out = classify(snap).to_dict()
    out["id"] = data.get("id")  # copied as given: an integer id stays an integer
    return out


def diagnose_lines(lines: Iterable[str], out: TextIO, err: TextIO, topology: Topology | None, default_slo_s: float) -> int:
    rejected = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            result = diagnose_line(line, topology, default_slo_s)
        except InputError as exc:
            rejected += 1
            print(f"line {number}: {exc}", file=err)
            continue
        out.write(json.dumps(result, separators=(",", ":")) + "\n")
        out.flush()  # answer each line as it comes: the command may sit in a live pipe
    return 1 if rejected else 0


def _lines(path: str) -> Iterator[str]:
    if path == "-":
        yield from sys.stdin
        return
    try:
        with open(path, encoding="utf-8") as fh:
            yield from fh
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}", "--input") from None


def run(args: argparse.Namespace) -> int:
    if args.default_slo_ttft <= 0:
        raise ConfigError("must be > 0", "--default-slo-ttft")
    topology = load_topology(args.topology) if args.topology else None
    return diagnose_lines(_lines(args.input), sys.stdout, sys.stderr, topology, args.default_slo_ttft)
