"""Run one tier's load steps against a real Ray Serve and record its replicas over time.

The control benchmark's way to run Ray Serve's default autoscaling policy *for real* (and the
inferslice queue policy as a Ray custom policy, side by side), on the testbed's compressed timing:

    python -m inferslice.testbed.rayserve.timeline --tier premium --mode ray-default \\
        --steps 4:30,16:60,4:60 --out timeline.json

As root it re-runs itself inside ``unshare --net`` (Ray binds non-loopback addresses; CONTRACTS.md).
Writes {mode, tier, steps, timeline: [{t_s, target, running}], loads: [per-step summary]}.

Open loop instead of closed-loop steps (the control benchmark's ramp on real Ray Serve):

    python -m inferslice.testbed.rayserve.timeline --tier standard --mode inferslice-queue \
        --rate-schedule 0:1,40:1,150:2.3 --duration-s 240 --out timeline.json

arrivals thinned from a Poisson process at the schedule's peak (``LoadConfig.rate_schedule``); the
result then also has ``requests``: [{start_s, ttft_s, success}] with start_s from the load's start,
and ``t0_s``, the load's start on the timeline's clock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from inferslice.testbed.loadgen import LoadConfig, WorkloadSpec, run_load
from inferslice.testbed.rayserve.cluster import RayCluster, running_replicas
from inferslice.testbed.rayserve.config import DEPLOYMENT, Mode, serve_config
from inferslice.topology import load_topology

HTTP_PORT = 8000
METRICS_PORT = 8080
SAMPLE_S = 1.0


def parse_schedule(text: str) -> list[tuple[float, float]]:
    """``"0:1,40:1,150:2.3"`` -> [(0.0, 1.0), (40.0, 1.0), (150.0, 2.3)] (seconds : requests/s)."""
    out = []
    for item in text.split(","):
        t, _, r = item.partition(":")
        out.append((float(t), float(r)))
    return out


def parse_steps(text: str) -> list[tuple[int, float]]:
    """``"4:30,16:60"`` -> [(4, 30.0), (16, 60.0)] (concurrency : seconds)."""
    out = []
    for item in text.split(","):
        c, _, s = item.partition(":")
        out.append((int(c), float(s)))
    return out


def _sample(cluster: RayCluster, tier: str, t0: float, timeline: list[dict[str, Any]], stop: threading.Event) -> None:
    while not stop.wait(SAMPLE_S):
        try:
            app = cluster.get()["applications"][tier]
        except (OSError, KeyError, ValueError):
            continue
        dep = app["deployments"][DEPLOYMENT]
        timeline.append({"t_s": time.monotonic() - t0, "target": dep.get("target_num_replicas"), "running": running_replicas(app)})


def run(
    tier: str,
    mode: Mode,
    steps: list[tuple[int, float]],
    topology: str | None,
    seed: int,
    schedule: list[tuple[float, float]] | None = None,
    duration_s: float = 0.0,
) -> dict[str, Any]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    top = load_topology(topology)
    tmp = Path(tempfile.mkdtemp(prefix="isray-", dir="/tmp"))
    cluster = RayCluster(tmp, metrics_port=METRICS_PORT)
    cluster.start()
    timeline: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    try:
        cluster.put(serve_config(top, http_host="127.0.0.1", http_port=HTTP_PORT, modes={tier: mode}, seed=seed))
        cluster.wait_running([tier], timeout_s=300)
        stop = threading.Event()
        t0 = time.monotonic()
        sampler = threading.Thread(target=_sample, args=(cluster, tier, t0, timeline, stop), daemon=True)
        sampler.start()
        url = f"http://127.0.0.1:{HTTP_PORT}/{tier}"
        if schedule:
            peak = max(r for _, r in schedule)
            cfg = LoadConfig(url=url, model=top.model, slice=tier, request_rate_rps=peak, rate_schedule=tuple(schedule),
                             duration_s=duration_s, seed=seed, workload=WorkloadSpec(), drain_timeout_s=5.0, prompt_tokens_hint=True)
            load_t0 = time.monotonic() - t0
            wall0 = time.time()
            result = asyncio.run(run_load(cfg))
            stop.set()
            sampler.join()
            requests = [{"start_s": r.start_s - wall0, "ttft_s": r.ttft_s, "success": r.success} for r in result.records]
            return {"mode": mode, "tier": tier, "schedule": schedule, "duration_s": duration_s, "t0_s": load_t0,
                    "timing": top.timing.model_dump(), "timeline": timeline, "requests": requests,
                    "cancelled": result.cancelled, "slo_ttft_p99_s": top.tier(tier).slo_ttft_p99_s}
        for i, (conc, secs) in enumerate(steps):
            cfg = LoadConfig(url=url, model=top.model, slice=tier, concurrency=conc, duration_s=secs, seed=seed + i,
                             workload=WorkloadSpec(), drain_timeout_s=5.0, prompt_tokens_hint=True)
            s = asyncio.run(run_load(cfg)).summary
            loads.append({"step": i, "concurrency": conc, "duration_s": secs, "completed": s["completed"], "failed": s["failed"],
                          "p99_ttft_ms": s["p99_ttft_ms"], "median_ttft_ms": s["median_ttft_ms"]})
        stop.set()
        sampler.join()
    finally:
        cluster.stop()
    return {"mode": mode, "tier": tier, "steps": steps, "timing": top.timing.model_dump(), "timeline": timeline, "loads": loads}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferslice.testbed.rayserve.timeline", description=__doc__.splitlines()[0])
    ap.add_argument("--tier", required=True)
    ap.add_argument("--mode", choices=["ray-default", "inferslice-queue", "fixed"], default="ray-default")
    ap.add_argument("--steps", type=parse_steps, default=parse_steps("4:30,16:60,4:60"))
    ap.add_argument("--topology", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rate-schedule", type=parse_schedule, default=None, help="open loop: t:rps,... (instead of --steps)")
    ap.add_argument("--duration-s", type=float, default=240.0, help="open loop: seconds of load")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--in-netns", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not args.in_netns:
        if os.geteuid() != 0:
            print("timeline: needs root for a private network namespace (Ray binds non-loopback addresses)", file=sys.stderr)
            return 2
        return subprocess.call(["unshare", "--net", sys.executable, "-m", "inferslice.testbed.rayserve.timeline",
                                *(argv if argv is not None else sys.argv[1:]), "--in-netns"])
    result = run(args.tier, args.mode, args.steps, args.topology, args.seed, args.rate_schedule, args.duration_s)
    args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
