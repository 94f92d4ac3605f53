"""Calibration check of the engine performance model against the brief's figures (simulated time).

For each tier of the topology (all replicas_max replicas up, the tier alone on its GPUs) a closed
loop of C clients sends ShareGPT-like requests through Ray Serve's routing rule
(max_ongoing_requests per replica, FIFO queue): median TPOT, P99 TTFT and output tok/s per C.
The baseline of each tier is its own C = 1 run, so the result is the model's shape (how TPOT and
throughput grow with load), plus how many simulated seconds one wall second buys. No sockets, no
sleeping.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

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


DEFAULT_LEVELS = (1, 2, 4, 8, 10, 12, 14, 16, 20, 24, 28, 32)


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) else math.nan


def run(
    topology: str | None = None,
    tiers: tuple[str, ...] | None = None,
    levels: tuple[int, ...] = DEFAULT_LEVELS,
    duration_s: float = 60.0,
) -> dict[str, Any]:
    top = load_topology(topology)
    levels = tuple(sorted(set(levels) | {1}))  # C = 1 is every tier's baseline
    out: dict[str, Any] = {"benchmark": "engine", "baseline": "concurrency_1", "duration_s": duration_s, "tiers": {}}
    wall0 = time.perf_counter()
    for tier in tiers or tuple(top.tier_names):
        t = top.tier(tier)
        rows = [simulate_tier(top, tier, c, duration_s) for c in levels]
        base = rows[0]
        out["tiers"][tier] = {
            "replicas": t.replicas_max,
            "max_ongoing_requests": t.max_ongoing_requests,
            "levels": [
                {
                    **asdict(o),
                    "tpot_p50_over_c1": _ratio(o.tpot_p50_s, base.tpot_p50_s),
                    "ttft_p99_over_c1": _ratio(o.ttft_p99_s, base.ttft_p99_s),
                    "output_tok_s_over_c1": _ratio(o.output_tok_s, base.output_tok_s),
                }
                for o in rows
            ],
        }
    wall = time.perf_counter() - wall0
    simulated = duration_s * len(levels) * len(out["tiers"])
    out["simulated_s_per_wall_s"] = simulated / wall if wall > 0 else math.nan
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Engine model, {result['duration_s']:g} simulated s per point ({result['simulated_s_per_wall_s']:.0f} simulated s per wall s)."
    ]
    for tier, r in result["tiers"].items():
        lines += [
            "",
            f"{tier}: {r['replicas']} replicas, max_ongoing_requests {r['max_ongoing_requests']}",
            "",
            "| C | TPOT p50 ms | TPOT p50 / C=1 | TTFT p99 s | tok/s | tok/s / C=1 |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for o in r["levels"]:
            lines.append(
                f"| {o['concurrency']} | {o['tpot_p50_s'] * 1e3:.1f} | {o['tpot_p50_over_c1']:.2f} | {o['ttft_p99_s']:.3f}"
                f" | {o['output_tok_s']:.0f} | {o['output_tok_s_over_c1']:.2f} |"
            )
    return "\n".join(lines) + "\n"
