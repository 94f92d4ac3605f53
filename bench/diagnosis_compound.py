"""Compound scenarios on the testbed: two causes at once on one tier, and each removed in turn.

One shared timeline of five phases (``phase_s`` each), every tier at fixed replicas:

- Free (1 replica, 12 slots), 4 clients: +20 clients (queue) -> + a 0.5 Mbit/s cap (network and
  queue: a cap cut on a tier past its replica ceiling) -> -20 clients (network) -> cap removed;
- Premium (2 replicas, 12 slots), 8 clients: +12 clients (queue) -> GPU share 0.35 (compute and
  queue: a share drop on a queueing tier) -> -12 clients (compute) -> share restored;
- Standard (3 replicas, 18 slots), 10 clients under a 1.2 Mbit/s cap (just above their ~0.93 Mbit/s
  demand): +6 clients (network: demand ~1.45 Mbit/s) -> +10 more (network and queue: 26 > 18) ->
  cap removed (queue) -> back to 10 clients.

The phases on either side of a compound one are its counterfactuals (the same tier with one cause
removed): the latency that disappears is that cause's true share. Windows (embedded and
Prometheus sources, 4 s) are recorded as ``windows-<source>-4s.jsonl`` with ``phases.json``; the
corpus (``bench.corpus``) reads them as the ``compound`` family.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferslice.bench.diagnosis import (
    BenchSettings,
    Ticker,
    _original_caps,
    _sleep_until,
    build_loops,
    ensure_testbed,
    restore_tiers,
    stop_run,
    write_windows,
)
from inferslice.bottleneck import DEFAULT
from inferslice.common.registry import DEFAULT_STATE_DIR
from inferslice.service.platform import Platform, PlatformSettings
from inferslice.service.store import Store
from inferslice.testbed.net import lifecycle
from inferslice.testbed.ops import set_gpu_share, set_replicas, wait_replicas_ready
from inferslice.topology import load_topology

PHASES_FILE = "phases.json"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Step:
    """What one tier is in one phase: its extra clients, its cap (None: the topology's), its GPU share."""

    extra_clients: int = 0
    cap_bps: float | None = None
    gpu_share: float = 1.0
    causes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TierPlan:
    tier: str
    replicas: int
    clients: int
    steps: tuple[Step, ...] = field(default_factory=tuple)


PLANS: tuple[TierPlan, ...] = (
    TierPlan("free", 1, 4, (Step(), Step(20, causes=("queue",)), Step(20, 0.5e6, causes=("network", "queue")),
                           Step(0, 0.5e6, causes=("network",)), Step())),
    TierPlan("premium", 2, 8, (Step(), Step(12, causes=("queue",)), Step(12, gpu_share=0.35, causes=("compute", "queue")),
                              Step(0, gpu_share=0.35, causes=("compute",)), Step())),
    TierPlan("standard", 3, 10, (Step(0, 1.2e6), Step(6, 1.2e6, causes=("network",)), Step(16, 1.2e6, causes=("network", "queue")),
                                Step(16, causes=("queue",)), Step())),
)  # fmt: skip


def run(out: Path, phase_s: float = 30.0, state_dir: Path = DEFAULT_STATE_DIR, progress: Progress = print) -> dict[str, Any]:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    reg, started_here = ensure_testbed(state_dir, None, progress)
    top = load_topology(reg.topology_path)
    settings = BenchSettings(windows_s=(4.0,), sources=("prometheus", "embedded"))
    keys = [p.tier for p in PLANS] + [f"{p.tier}+" for p in PLANS]
    platform = Platform(reg, top, state_dir, out / "platform",
                        PlatformSettings(scrape_interval_s=settings.interval_s, alertmanager=False, api=False, load_keys=keys))  # fmt: skip
    caps = _original_caps(reg)
    n = len(PLANS[0].steps)
    total_s = n * phase_s + 30
    stores: list[Store] = []
    ticker: Ticker | None = None
    phases: list[dict[str, Any]] = []
    try:
        for p in PLANS:
            lifecycle.set_cap(p.tier, caps.get(p.tier), "receive", state_dir)
            set_replicas(p.tier, p.replicas, state_dir)
            set_gpu_share(p.tier, 1.0, state_dir)
        wait_replicas_ready({p.tier: p.replicas for p in PLANS}, state_dir, settings.ready_timeout_s)
        platform.start()
        for i, p in enumerate(PLANS):
            platform.start_load(p.tier, p.tier, p.clients, total_s, 7 + i, drain_timeout_s=2.0)
        for p in PLANS:
            platform.wait_load(p.tier)
        loops, logs, stores = build_loops(top, settings, DEFAULT, platform.prom.url, platform.targets)
        ticker = Ticker(list(loops.values()), settings.interval_s)
        ticker.start()
        start = time.time()
        current: dict[str, Step] = {p.tier: Step() for p in PLANS}
        for k in range(n):
            _sleep_until(start + k * phase_s)
            at = time.time()
            for i, p in enumerate(PLANS):
                step, was = p.steps[k], current[p.tier]
                if step.cap_bps != was.cap_bps or k == 0:
                    lifecycle.set_cap(p.tier, step.cap_bps if step.cap_bps is not None else caps.get(p.tier), "receive", state_dir)
                if step.gpu_share != was.gpu_share:
                    set_gpu_share(p.tier, step.gpu_share, state_dir)
                if step.extra_clients != was.extra_clients:
                    if was.extra_clients:
                        platform.stop_load(f"{p.tier}+")
                    if step.extra_clients:
                        platform.start_load(f"{p.tier}+", p.tier, step.extra_clients, total_s, 100 * k + i, drain_timeout_s=2.0)
                current[p.tier] = step
            tiers = {
                p.tier: {"causes": list(p.steps[k].causes), "extra_clients": p.steps[k].extra_clients, "cap_bps": p.steps[k].cap_bps,
                         "gpu_share": p.steps[k].gpu_share}
                for p in PLANS
            }  # fmt: skip
            phases.append({"phase": k, "at_s": at, "until_s": start + (k + 1) * phase_s, "tiers": tiers})
            progress(f"phase {k}: " + "; ".join(f"{p.tier} {'+'.join(p.steps[k].causes) or 'healthy'}" for p in PLANS))
        _sleep_until(start + n * phase_s)
        ticker.stop()
        write_windows(logs, out)
        result = {"benchmark": "diagnosis-compound", "phase_s": phase_s, "phases": phases, "plans": [p.tier for p in PLANS],
                  "late_ticks": ticker.late_ticks, "wall_s": round(time.time() - start, 1)}  # fmt: skip
        (out / PHASES_FILE).write_text(json.dumps(result, indent=1))
        return result
    finally:
        stop_run(ticker, platform, stores)
        restore_tiers([p.tier for p in PLANS], caps, state_dir, progress)
        if started_here:
            lifecycle.down(state_dir)


def phase_of(phases: list[Mapping[str, Any]], start_s: float, end_s: float, margin_s: float) -> Mapping[str, Any] | None:
    """The phase a window lies wholly inside (``margin_s`` after its start for the change to settle)."""
    return next((ph for ph in phases if ph["at_s"] + margin_s <= start_s and end_s <= ph["until_s"]), None)


if __name__ == "__main__":
    import sys

    run(Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results/diagnosis-compound"), float(sys.argv[2]) if len(sys.argv) > 2 else 30.0)
