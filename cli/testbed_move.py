"""``inferslice testbed move TIER --replica R --to POP[/gpuN]``: a make-before-break replica move.

Asks the tier's front to move one replica (``POST /admin/moves``: a successor cold-starts at the
destination PoP's engine host, is routed to once it serves, then the old replica drains), prints each
phase as the front reports it (``GET /admin/moves/{id}``) and the tier's placement at the end. The
move is named by ``--id`` (default: a fresh one): the same id again watches the same move instead
of starting a second one, so an interrupted command can be rerun. Exit 0 once done, 1 if the move
failed (the old replica keeps serving) or was still under way at ``--timeout-s``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from inferslice.common.registry import DEFAULT_STATE_DIR
from inferslice.errors import InputError

POLL_S = 0.5  # the front moves in ticks of 0.1-1 s; half a second shows every phase without busy-looping
DEFAULT_TIMEOUT_S = 300.0  # beyond the front's own limit for a successor (4 cold starts + 30 s on the testbed)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("tier")
    p.add_argument("--replica", required=True, help="the replica id that moves (`inferslice testbed status` / the front's state)")
    p.add_argument("--to", required=True, metavar="POP[/gpuN]", help="destination PoP, optionally its GPU (default gpu0)")
    p.add_argument("--id", default=None, help="the move's id (default: a new one); an id already known watches that move")
    p.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S, help=f"stop watching after S s (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--no-wait", action="store_true", help="start the move and return")
    p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help=f"state directory (default {DEFAULT_STATE_DIR})")


def parse_destination(text: str) -> tuple[str, int]:
    """``"dublin"`` -> ("dublin", 0); ``"dublin/gpu1"`` -> ("dublin", 1); InputError naming --to otherwise."""
    pop, sep, gpu = text.partition("/")
    if not pop or (sep and not (gpu.startswith("gpu") and gpu[3:].isdigit())):
        raise InputError(f"--to must be POP or POP/gpuN, got {text!r}", "--to")
    return pop, int(gpu[3:]) if sep else 0


def _describe(move: dict[str, Any]) -> str:
    phase, old, new, dest = move.get("phase"), move.get("replica"), move.get("successor"), move.get("dest")
    if phase == "starting":
        return f"{new or 'a successor'} cold-starts at {dest}; {old} keeps serving"
    if phase == "draining":
        return f"{new} serves; {old} takes no new requests and drains its in-flight ones"
    if phase == "done":
        return str(move.get("detail") or f"{old} is gone; its slot serves at {dest} as {new}")
    return f"{move.get('detail') or 'failed'}; {old} keeps serving"


def placement_lines(state: dict[str, Any]) -> list[str]:
    reps = state.get("replicas") or []
    lines = [f"placement of {state.get('tier')} ({len(reps)} replicas, target {state.get('target')}):"]
    lines += [f"  {r['id']:<24} slot {r['slot']}  {r['pop']}/gpu{r['gpu']}  {r['state']}" for r in reps]
    return lines


def run(args: argparse.Namespace) -> int:
    from inferslice.testbed.ops import front_state, move_state, start_move

    pop, gpu = parse_destination(args.to)
    before = front_state(args.tier, args.state_dir)
    ids = [r["id"] for r in before.get("replicas") or []]
    if args.id is None and args.replica not in ids:
        raise InputError(f"no replica {args.replica!r} in tier {args.tier!r} (it has {', '.join(ids) or 'none'})", "--replica")
    move_id = args.id or f"cli-{args.replica}-{int(time.time() * 1000)}"
    move = start_move(args.tier, args.replica, pop, gpu, move_id, args.state_dir)
    print(f"move {move_id}: {move.get('replica')} {move.get('source')} -> {move.get('dest')}, make-before-break", flush=True)
    t0 = time.monotonic()
    last: str | None = None
    while True:
        phase = str(move.get("phase"))
        if phase != last:
            print(f"  {time.monotonic() - t0:5.1f} s  {phase:<9} {_describe(move)}", flush=True)
            last = phase
        if phase in ("done", "failed") or args.no_wait:
            break
        if time.monotonic() - t0 > args.timeout_s:
            print(f"  still {phase} after {args.timeout_s:g} s; `inferslice testbed move {args.tier} --replica {args.replica}"
                  f" --to {args.to} --id {move_id}` watches it again")  # fmt: skip
            break
        time.sleep(POLL_S)
        move = move_state(args.tier, move_id, args.state_dir)
    for line in placement_lines(front_state(args.tier, args.state_dir)):
        print(line)
    return 0 if last == "done" or (args.no_wait and last != "failed") else 1
