"""The ramp on real Ray Serve 2.60: inferslice's ``QueuePolicy`` alone against Ray's default policy.

What a Ray Serve user would adopt without the rest of the platform: the queue part of the controller
as a Ray custom autoscaling policy (``control/actuators/rayserve_policy.py``), against Ray's default
(``replica_queue_length_autoscaling_policy`` in Ray's own controller), on the same tier, the same
arrivals (the model benchmark's load-ramp for that tier, open loop, one seed) and the same
compressed timing (the topology's: cold start 8 s, upscale 3 s, downscale 60 s, look-back 3 s).
Each mode is one ``testbed/rayserve/timeline.py`` run (Ray Serve itself, in a private network
namespace; root), scored here:

    python -m inferslice.bench.control_rayserve --out bench/results/control/rayserve-ramp [--tier standard]

Goodput = requests/s sent in the scored span whose TTFT met the tier's SLO; replica-seconds = the
replicas Ray reported running (and, beside it, the target it was asked for) integrated over the
timeline's samples within the same span.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferslice.bench.control_scenarios import scenarios

MODES = ("ray-default", "inferslice-queue")
SCORED_FROM_S = 20.0  # the model's warm-up: both policies have reached their steady count
TAIL_S = 10.0  # requests sent in the last seconds may still stream at the drain (and go unrecorded)


def ramp_schedule(tier: str, duration_s: float, k: float = 1.0, step_s: float = 5.0) -> list[tuple[float, float]]:
    sc = scenarios(k)["load-ramp"]
    n = int(duration_s // step_s)
    return [(round(i * step_s, 3), round(sc.arrivals(tier, i * step_s), 4)) for i in range(n + 1)]


def score(result: Mapping[str, Any], start_s: float = SCORED_FROM_S, tail_s: float = TAIL_S) -> dict[str, Any]:
    """Goodput, attainment and replica-seconds of one timeline run over [start_s, duration - tail_s]."""
    end = float(result["duration_s"]) - tail_s
    slo = float(result["slo_ttft_p99_s"])
    reqs = [r for r in result["requests"] if start_s <= float(r["start_s"]) <= end]
    good = sum(1 for r in reqs if r["success"] and r["ttft_s"] is not None and float(r["ttft_s"]) <= slo)
    t0 = float(result["t0_s"])
    pts = [(float(p["t_s"]) - t0, p) for p in result["timeline"]]
    running_s = target_s = 0.0
    for (t, p), (t_next, _) in itertools.pairwise(pts):
        lo, hi = max(t, start_s), min(t_next, end)
        if hi > lo:
            running_s += (hi - lo) * float(p.get("running") or 0)
            target_s += (hi - lo) * float(p.get("target") or 0)
    span = end - start_s
    ttfts = sorted(float(r["ttft_s"]) for r in reqs if r["success"] and r["ttft_s"] is not None)
    return {
        "requests": len(reqs),
        "goodput_rps": good / span,
        "slo_attainment": good / len(reqs) if reqs else 1.0,
        "replica_seconds_running": running_s,
        "replica_seconds_target": target_s,
        "p99_ttft_s": ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))] if ttfts else None,
        "max_running": max((float(p.get("running") or 0) for _, p in pts), default=0.0),
        "scored_span_s": [start_s, end],
    }


def compare(scored: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    me, ray = scored.get("inferslice-queue"), scored.get("ray-default")
    if not me or not ray:
        return {}
    return {
        "goodput_ratio": me["goodput_rps"] / ray["goodput_rps"] if ray["goodput_rps"] else None,
        "replica_seconds_ratio": me["replica_seconds_running"] / ray["replica_seconds_running"]
        if ray["replica_seconds_running"]
        else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferslice.bench.control_rayserve", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tier", default="standard")
    ap.add_argument("--duration-s", type=float, default=240.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("control_rayserve: needs root (Ray Serve runs in a private network namespace)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    schedule = ramp_schedule(args.tier, args.duration_s)
    spec = ",".join(f"{t:g}:{r:g}" for t, r in schedule)
    scored: dict[str, Any] = {}
    for mode in args.modes.split(","):
        path = args.out / f"timeline-{args.tier}-{mode}.json"
        cmd = [sys.executable, "-m", "inferslice.testbed.rayserve.timeline", "--tier", args.tier, "--mode", mode,
               "--rate-schedule", spec, "--duration-s", f"{args.duration_s:g}", "--seed", str(args.seed), "--out", str(path)]  # fmt: skip
        print(" ".join(cmd), flush=True)
        rc = subprocess.call(cmd)
        if rc != 0:
            print(f"control_rayserve: {mode} failed (exit {rc})", file=sys.stderr)
            return rc
        scored[mode] = score(json.loads(path.read_text()))
        print(mode, json.dumps(scored[mode]), flush=True)
    summary = {"tier": args.tier, "schedule": schedule, "seed": args.seed, "results": scored, "inferslice_vs_ray": compare(scored)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
