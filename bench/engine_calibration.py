"""Calibration check of the engine performance model against the brief's figures (simulated time).

For each tier of the topology (all replicas_max replicas up, the tier alone on its GPUs) a closed
loop of C clients (C = 1..32) sends ShareGPT-like requests through Ray Serve's routing rule
(max_ongoing_requests per replica, FIFO queue); prints median TPOT, P99 TTFT and output tok/s.
Runs in a few seconds: no sockets, no sleeping.

    .venv/bin/python bench/engine_calibration.py [--topology PATH] [--duration-s 60] [--tier premium]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from dataclasses import dataclass

from inferslice.testbed.engine.model import EngineModel, EngineRequest
from inferslice.testbed.serving.router import RouterCore
from inferslice.topology import Topology, load_topology, parse_slot


@dataclass
class Outcome:
    concurrency: int
    tpot_p50_s: float
    tpot_p99_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    output_tok_s: float
    request_s: float


def _pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def simulate_tier(top: Topology, tier_name: str, concurrency: int, duration_s: float = 60.0, seed: int = 1) -> Outcome:
    tier = top.tier(tier_name)
    model = EngineModel(seed=seed)
    router = RouterCore(tier.max_ongoing_requests, seed=seed)
    for k in range(tier.replicas_max):
        pop, gpu = parse_slot(tier.placement[k])
        rid = f"{tier_name}-{k}"
        model.add_replica(rid, (pop, gpu), now_s=0.0)
        router.add_replica(rid, routable=True)
    rng = random.Random(seed)
    warmup_s = 5.0
    arrivals: dict[str, float] = {}
    first: dict[str, float] = {}
    where: dict[str, str] = {}
    ttfts: list[float] = []
    tpots: list[float] = []
    tokens = 0
    done = 0
    counter = 0

    def new_request(now: float) -> None:
        nonlocal counter
        counter += 1
        rid = f"r{counter}"
        arrivals[rid] = now
        replica = router.try_assign(rid)
        if replica is not None:
            _submit(rid, replica, now)

    def _submit(rid: str, replica: str, now: float) -> None:
        where[rid] = replica
        prompt = max(4, min(1024, round(rng.lognormvariate(math.log(220), 0.8))))
        out = max(2, min(1024, round(rng.lognormvariate(math.log(190), 0.6))))
        model.submit(replica, EngineRequest(rid, prompt, out, arrivals[rid]), now)

    for _ in range(concurrency):
        new_request(0.0)
    now = 0.0
    while True:
        t = model.next_event_time()
        if t is None or t > duration_s:
            break
        now = t
        for ev in model.step(now).events:
            if ev.index == 0:
                first[ev.request_id] = ev.time_s
            if ev.time_s >= warmup_s:
                tokens += 1
            if ev.finish_reason is None:
                continue
            rid = ev.request_id
            arrived = arrivals.pop(rid)
            t_first = first.pop(rid)
            if arrived >= warmup_s:
                ttfts.append(t_first - arrived)
                if ev.index > 0:
                    tpots.append((ev.time_s - t_first) / ev.index)
                done += 1
            router.release(where.pop(rid))
            new_request(now)
            for token, replica in router.dispatch():
                _submit(str(token), replica, now)
    span = max(1e-9, now - warmup_s)
    return Outcome(
        concurrency,
        statistics.median(tpots) if tpots else math.nan,
        _pct(tpots, 0.99),
        statistics.median(ttfts) if ttfts else math.nan,
        _pct(ttfts, 0.99),
        tokens / span,
        done / span,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default=None)
    ap.add_argument("--duration-s", type=float, default=60.0)
    ap.add_argument("--tier", action="append", default=None)
    ap.add_argument("--concurrency", type=int, action="append", default=None)
    args = ap.parse_args()
    top = load_topology(args.topology)
    levels = args.concurrency or [1, 2, 4, 8, 10, 12, 14, 16, 20, 24, 28, 32]
    for tier in args.tier or top.tier_names:
        t = top.tier(tier)
        print(f"\n{tier}: {t.replicas_max} replicas, max_ongoing_requests {t.max_ongoing_requests}")
        print(f"{'conc':>5} {'TPOT p50 ms':>12} {'TPOT p99 ms':>12} {'TTFT p50 s':>11} {'TTFT p99 s':>11} {'tok/s':>8} {'req/s':>7}")
        for c in levels:
            o = simulate_tier(top, tier, c, args.duration_s)
            print(
                f"{c:>5} {o.tpot_p50_s * 1e3:>12.1f} {o.tpot_p99_s * 1e3:>12.1f} {o.ttft_p50_s:>11.3f} {o.ttft_p99_s:>11.3f}"
                f" {o.output_tok_s:>8.0f} {o.request_s:>7.2f}"
            )


if __name__ == "__main__":
    main()
