"""``inferslice bench control --backend testbed``: the five scenarios x the six policies on the netns testbed.

The same scenarios as the model (``control.scenarios``, their clock compressed by ``time_scale`` so
a run fits ~70 s), the same policy classes (``control_policies``) over ``TestbedBackend``, the same
scoring (``control.score``). One testbed and one Platform (Prometheus, the diagnosis API in client
perspective) serve every run; between runs caps, GPU shares and replica counts are reset and the
next policy's starting replicas are ready before its clock starts.

Per run: each tier's load is one ``inferslice load`` process in the client namespace, open loop at
the scenario's rate over time (``--rate-schedule``; arrivals thinned from a Poisson process at the
peak rate), per-request records kept. Every ``tick_s`` the backend reads the fronts and engines,
the scenario's caps (HTB, ``lifecycle.set_cap``) and GPU shares (the engine hosts' share API, for
every replica on the affected PoP, new ones included) are applied when due, and the policy steps;
every scrape interval the diagnosis API's latest verdict per tier is the window the policies see.
Goodput and attainment come from the load generators' own records, over the requests sent between
the warm-up and ``score_tail_s`` before the end (later ones may still stream when the drain cuts
them, unrecorded; how many were cut is in the cell). Needs root and the testbed lock.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferslice.bench.control import BenchSettings, count_violations, ratios, score
from inferslice.bench.control_backend import ActionLog, TierReading
from inferslice.bench.control_peers import POLICIES
from inferslice.bench.control_policies import PAPER_COLD_START_S
from inferslice.bench.control_scenarios import Scenario, Serving, causes, scenarios
from inferslice.bench.control_testbed_backend import TestbedBackend
from inferslice.bench.control_testbed_wan import WanPlayer, measured_rtts, path_excess_s, probe_query
from inferslice.control.guardrails import reservations
from inferslice.control.settings import tier_policies
from inferslice.diagnosis import Diagnosis
from inferslice.errors import InferSliceError
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology


@dataclass(frozen=True)
class TestbedBenchSettings:
    __test__ = False  # not a pytest class
    time_scale: float = 0.28  # the scenarios' 240 s clock in 67 s: with the pre-roll ~86 s a run, 30 runs ~45 min on 2 cores
    # Before the scenario's t = 0 every tier runs at its t = 0 load this long, the policy acting: an
    # autoscaler starting at one replica reaches its steady count (cold start 8 s) before anything is
    # scored, as in the model's 20 s warm-up. Actions in it are reported apart, not counted.
    preroll_s: float = 12.0
    tick_s: float = 0.5  # backend read + policy step period (the model steps every 0.25 s; the fronts' reads cost CPU here)
    seed: int = 1  # one arrival sequence per cell: the matrix has room for one
    ready_timeout_s: float = 45.0  # a policy's starting replicas (cold start 8 s each, in parallel) must be up by then
    drain_s: float = 3.0  # after the run, requests in flight get this long, then are cut (not recorded)
    # Requests sent in the run's last seconds are not scored: most are still streaming when the drain
    # ends, and a cut request has no record (its TTFT is unknown). 6 s + the drain: ~2x a typical answer.
    score_tail_s: float = 6.0
    reference_s: float = 30.0  # one low-load stretch before the first run: the diagnosis learns each tier's reference
    failed_ttft_s: float = 30.0  # a failed request's TTFT in the window series (it missed the SLO; plots need a number)


def bench_settings(top: Topology, ts: TestbedBenchSettings, scs: Sequence[str], pols: Sequence[str]) -> BenchSettings:
    base = BenchSettings()
    return BenchSettings(
        duration_s=base.duration_s * ts.time_scale,
        warmup_s=base.warmup_s * ts.time_scale,
        dt_s=ts.tick_s,
        window_s=top.timing.scrape_interval_s,
        seeds=(ts.seed,),
        scenarios=tuple(scs),
        policies=tuple(pols),
    )


def schedule(sc: Scenario, tier: str, duration_s: float, preroll_s: float = 0.0, step_s: float = 1.0) -> list[tuple[float, float]]:
    """The scenario's arrival rate for ``tier`` as points ``step_s`` apart (the load generator
    interpolates), after ``preroll_s`` at its t = 0 rate; times from the load's start."""
    n = math.ceil(duration_s / step_s)
    pts = [(round(preroll_s + i * step_s, 3), round(max(0.0, sc.arrivals(tier, i * step_s)), 4)) for i in range(n + 1)]
    return [(0.0, pts[0][1]), *pts] if preroll_s > 0 else pts


def window_p99(records: Sequence[Mapping[str, Any]], t0_wall: float, t_end: float, window_s: float, failed_s: float) -> float | None:
    """P99 TTFT of the requests sent in (t_end - window_s, t_end] of the run's clock (failed ones at ``failed_s``)."""
    vals = sorted(
        (float(r["ttft_s"]) if r.get("success") and r.get("ttft_s") is not None else failed_s)
        for r in records
        if t_end - window_s < float(r["start_s"]) - t0_wall <= t_end
    )
    if not vals:
        return None
    return vals[min(len(vals) - 1, max(0, math.ceil(0.99 * len(vals)) - 1))]


def tier_outcomes(
    top: Topology, records: Mapping[str, Sequence[Mapping[str, Any]]], t0_wall: float, bs: BenchSettings, tail_s: float
) -> dict[str, dict[str, float]]:
    """Per tier, over the requests sent between the warm-up and ``tail_s`` before the end: goodput
    (req/s whose TTFT met the SLO) and attainment (met / sent; a failed request missed)."""
    end = bs.duration_s - tail_s
    out = {}
    for t in top.tiers:
        recs = [r for r in records.get(t.name, ()) if bs.warmup_s <= float(r["start_s"]) - t0_wall <= end]
        good = sum(1 for r in recs if r.get("success") and r.get("ttft_s") is not None and float(r["ttft_s"]) <= t.slo_ttft_p99_s)
        out[t.name] = {"goodput_rps": good / (end - bs.warmup_s), "slo_attainment": good / len(recs) if recs else 1.0}
    return out


KEPT_BREACHES = 20  # the first instants say what was misread or breached; the count keeps the rest


def live_slots(top: Topology, readings: Mapping[str, TierReading]) -> dict[str, list[str]]:
    """Per tier, the slots its serving replicas hold: not draining, one per front slot number (ready
    first), and at most the target of them: a move's successor, cold-starting beside the replica it
    relieves or already ready in the instant before that one stops, is not an extra replica."""
    out = {}
    for tier, r in readings.items():
        live = sorted((x for x in r.replicas if x.state != "draining"), key=lambda x: x.state != "ready")
        seen: set[int] = set()
        one_each = []
        for x in live:
            if x.index is not None and x.index in seen:
                continue
            if x.index is not None:
                seen.add(x.index)
            one_each.append(x)
        out[tier] = [x.slot for x in one_each[: max(r.target, len([x for x in one_each if x.state == "ready"]))]]
    return out


def _wait_settled(backend: TestbedBackend, top: Topology, timeout_s: float) -> None:
    """Every tier at its target with all replicas ready and nothing queued (the last run's load gone)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        backend.refresh()
        if all(len(r.ready) == r.target == len(r.replicas) and r.queued == 0 for r in (backend.reading(t) for t in top.tier_names)):
            return
        time.sleep(0.5)
    raise TimeoutError(f"tiers not settled after {timeout_s:.0f} s: { {t: backend.reading(t) for t in top.tier_names} }")


def run_one(
    stack: Any, backend: TestbedBackend, top: Topology, sc: Scenario, policy_name: str, bs: BenchSettings, ts: TestbedBenchSettings
) -> tuple[dict[str, Any], dict[str, list[list[Any]]]]:
    from inferslice.service.controller.source import ApiSource
    from inferslice.testbed.net import lifecycle

    sd = backend.state_dir
    for t in top.tier_names:
        lifecycle.set_cap(t, None, "receive", sd)
    WanPlayer.reset(top, sd)
    wan = WanPlayer(top, sc, sd)
    backend.refresh()
    for t in top.tier_names:
        for rep in backend.reading(t).replicas:
            if abs(rep.gpu_share - 1.0) > 1e-6:
                backend.set_share(rep, t, 1.0)
    log = ActionLog()
    policy = POLICIES[policy_name](top.timing.cold_start_s / PAPER_COLD_START_S)
    policy.setup(backend, top, log)
    _wait_settled(backend, top, ts.ready_timeout_s)
    log.entries.clear()  # the starting count is the policy's configuration, not an action
    loads = {
        t: stack.start_load(
            t,
            t,
            1,
            ts.preroll_s + bs.duration_s,
            seed=ts.seed,
            drain_timeout_s=ts.drain_s,
            records=True,
            rate_schedule=schedule(sc, t, bs.duration_s, ts.preroll_s),
        )
        for t in top.tier_names
    }
    for t in top.tier_names:
        stack.wait_load(t, timeout_s=30)
    backend.restart_clock()
    t0_wall = time.time() + ts.preroll_s  # the scenario's t = 0; the policies' clock (backend.t) starts at the pre-roll
    pre = ts.preroll_s
    api = ApiSource(stack.api_url, top.tier_names)
    res = reservations(tier_policies(top))
    caps = sorted(sc.caps, key=lambda c: c[0])
    series: dict[str, list[tuple[float, float | None, int, str]]] = {t: [] for t in top.tier_names}
    truth: list[tuple[float, dict[str, frozenset[str]]]] = []
    replica_s = {t: 0.0 for t in top.tier_names}
    breaches: list[dict[str, Any]] = []
    try:
        violations = _loop(stack, backend, top, sc, policy, bs, ts, wan, api, caps, series, truth, replica_s, res, breaches)
    finally:
        wan.close()
    records: dict[str, list[dict[str, Any]]] = {}
    cut: dict[str, int] = {}
    for t, run in loads.items():
        run.wait(timeout_s=ts.drain_s + 30)
        records[t] = run.records()
        cut[t] = int(run.result().get("cancelled") or 0)
    preroll_actions = [a for a in log.entries if a[0] < pre]
    log.entries = [(a[0] - pre, *a[1:]) for a in log.entries if a[0] >= pre]  # onto the scenario's clock, as the series
    # The plotted and scored P99 is the clients' own (records), not the API's window that the policies saw.
    series = {
        t: [(x[0], window_p99(records[t], t0_wall, x[0], bs.window_s, ts.failed_ttft_s), x[2], x[3]) for x in pts]
        for t, pts in series.items()
    }
    per_tier = tier_outcomes(top, records, t0_wall, bs, ts.score_tail_s)
    for t, rs in replica_s.items():
        per_tier[t]["replica_seconds"] = rs
    cell = score(top, sc, policy_name, policy, log, series, sum(replica_s.values()), violations, bs, per_tier, truth)
    cell["seeds"] = 1
    cell["unrecovered_seeds"] = 1 if cell["time_to_recover_s"] is None else 0
    cell["requests"] = {t: len(r) for t, r in records.items()}
    cell["requests_cut_at_end"] = cut
    cell["backend_read_misses"] = backend.misses
    cell["violation_instants"] = breaches  # what the count rests on, so a breach can be told from a misreading
    cell["actions"] = [[round(a[0], 2), a[1], a[2], a[3], a[4]] for a in log.entries]
    cell["preroll_actions"] = [[round(a[0] - pre, 2), a[1], a[2], a[3], a[4]] for a in preroll_actions]
    backend.misses = 0
    return cell, cell.pop("series")


def _loop(
    stack: Any,
    backend: TestbedBackend,
    top: Topology,
    sc: Scenario,
    policy: Any,
    bs: BenchSettings,
    ts: TestbedBenchSettings,
    wan: WanPlayer,
    api: Any,
    caps: list[tuple[float, str, float | None]],
    series: dict[str, list[tuple[float, float | None, int, str]]],
    truth: list[tuple[float, dict[str, frozenset[str]]]],
    replica_s: dict[str, float],
    res: Mapping[str, Mapping[str, float]],
    breaches: list[dict[str, Any]],
) -> int:
    """The run's ticks: inject what is due, read, score the instant, let the policy act; returns the
    violations, each instant with any entered in ``breaches`` (scenario time, count, what was read;
    the first ``KEPT_BREACHES`` of them)."""
    from inferslice.errors import SourceUnavailable
    from inferslice.testbed.net import lifecycle

    sd, pre = backend.state_dir, ts.preroll_s
    violations, last, next_window = 0, 0.0, bs.window_s
    while backend.t < pre + bs.duration_s:
        started = backend.t
        backend.refresh()
        clock = backend.t
        now = clock - pre  # the scenario's clock
        while caps and caps[0][0] <= now:
            _, tier, cap = caps.pop(0)
            lifecycle.set_cap(tier, cap, "receive", sd)
        wan.step(now)
        for t in top.tier_names:
            for rep in backend.reading(t).replicas:
                want = sc.share_of(rep.slot, now)
                if rep.state != "draining" and abs(rep.gpu_share - want) > 1e-6:
                    backend.set_share(rep, t, want)
        readings = {t: backend.reading(t) for t in top.tier_names}
        if now >= 0:
            for t, r in readings.items():
                replica_s[t] += (now - max(last, 0.0)) * len(r.replicas)
        holding = {t: [x.slot for x in r.replicas if x.state != "draining"] for t, r in readings.items()}
        live, held_caps = live_slots(top, readings), {t: r.cap_bps for t, r in readings.items()}
        n = count_violations(top, res, live, held_caps, holding)
        if n and len(breaches) < KEPT_BREACHES:
            breaches.append({"t_s": round(now, 2), "violations": n, "live": live, "holding": holding, "caps_bps": held_caps})
        violations += n
        last = now
        windows: dict[str, SliceSnapshot] | None = None
        diagnoses: dict[str, Diagnosis] | None = None
        if clock >= next_window:
            next_window += bs.window_s
            try:
                verdicts = api()
            except SourceUnavailable:
                verdicts = {}
            try:  # the per-PoP path reading the controller's WAN remedy needs (the prober, through Prometheus)
                backend.paths = path_excess_s(top, measured_rtts(stack.query(probe_query(4 * bs.window_s))))
            except InferSliceError:
                backend.paths = {}
            windows = {t: s for t, (_, s) in verdicts.items() if s is not None}
            diagnoses = {t: d for t, (d, _) in verdicts.items() if d is not None}
            for t in top.tier_names:
                d = diagnoses.get(t)
                if now >= 0:
                    series[t].append((now, None, readings[t].target, d.regime.value if d else "unknown"))
            if now >= 0:
                serving = Serving({t: [x.slot for x in r.ready] for t, r in readings.items()}, {t: r.cap_bps for t, r in readings.items()})
                truth.append((now, causes(top, sc, now, serving)))
        policy.tick(clock, windows, diagnoses)
        time.sleep(max(0.0, ts.tick_s - (backend.t - started)))
    return violations


def run_matrix(
    out: Path,
    topology_path: str | None,
    state_dir: Path,
    scs: Sequence[str],
    pols: Sequence[str],
    ts: TestbedBenchSettings = TestbedBenchSettings(),
    progress: Callable[[str], None] = print,
    prefix: str | None = None,
) -> dict[str, Any]:
    """Bring up one testbed and Platform, run every (scenario, policy), write summary.json and series.json."""
    from inferslice.service.platform import Platform, PlatformSettings
    from inferslice.testbed.lock import testbed_lock
    from inferslice.testbed.net import lifecycle
    from inferslice.testbed.net.plan import DEFAULT_PREFIX
    from inferslice.topology import load_topology

    out = out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    all_sc = scenarios(ts.time_scale)
    cells: dict[str, dict[str, Any]] = {s: {} for s in scs}
    series: dict[str, dict[str, Any]] = {s: {} for s in scs}
    started = time.time()
    failed: list[dict[str, str]] = []

    def bring_up() -> tuple[Any, TestbedBackend, Topology]:
        reg = lifecycle.up(topology_path, state_dir, services=True, prefix=prefix or DEFAULT_PREFIX)
        top = load_topology(reg.topology_path)
        settings = PlatformSettings(
            scrape_interval_s=top.timing.scrape_interval_s,
            hold_scale=0.2,
            reuse_exporter=True,
            alertmanager=False,
            db_path=out / "work" / f"inferslice-{len(rebuilds)}.db",
        )
        stack = Platform(reg, top, state_dir, out / "work", settings)
        try:
            stack.start()
            backend = TestbedBackend(top, state_dir)
            _learn_references(stack, backend, top, ts)
        except BaseException:
            stack.stop()
            lifecycle.down(state_dir, prefix=prefix)
            raise
        return stack, backend, top

    rebuilds: list[str] = []
    with testbed_lock():
        stack, backend, top = bring_up()
        bs = bench_settings(top, ts, scs, pols)
        try:
            for s in scs:
                for p in pols:
                    for attempt in (1, 2):
                        try:
                            cell, ser = run_one(stack, backend, top, all_sc[s], p, bs, ts)
                            cells[s][p], series[s][p] = cell, ser
                            break
                        except (InferSliceError, TimeoutError, OSError) as err:  # one broken run must not lose the matrix
                            progress(f"{s:<18} {p:<18} FAILED (attempt {attempt}): {str(err)[:300]}")
                            for run in stack.loads.values():
                                run.stop()
                            if attempt == 2:
                                failed.append({"scenario": s, "policy": p, "error": f"{type(err).__name__}: {str(err)[:2000]}"})
                                break
                            # A testbed that does not return to the starting state (seen: a replica scaled in
                            # under a GPU-share drop stays 'stopping' in its front, holding its slot) is rebuilt.
                            rebuilds.append(f"before {s} x {p}: {type(err).__name__}: {str(err)[:300]}")
                            stack.stop()
                            lifecycle.down(state_dir, prefix=prefix)
                            stack, backend, top = bring_up()
                    if p in cells[s]:
                        cell = cells[s][p]
                        progress(
                            f"{s:<18} {p:<18} goodput {sum(v['goodput_rps'] for v in cell['tiers'].values()):5.2f} req/s"
                            f"  replica-s {cell['replica_seconds']:6.0f}  out {cell['scale_outs']} caps {cell['cap_changes']}"
                            f"  viol {cell['guarantee_violations']}  ({time.time() - started:.0f} s)"
                        )
                    _write(out, top, ts, bs, all_sc, cells, series, started, failed, rebuilds)  # a partial matrix survives
        finally:
            stack.stop()
            lifecycle.down(state_dir, prefix=prefix)
    return _write(out, top, ts, bs, all_sc, cells, series, started, failed, rebuilds)


def _learn_references(stack: Any, backend: TestbedBackend, top: Topology, ts: TestbedBenchSettings) -> None:
    """Low load on every tier at one replica for ``reference_s``: the diagnosis learns each tier's unconstrained TTFT/TPOT."""
    for t in top.tier_names:
        backend.set_replicas(t, max(1, top.tier(t).replicas_min))
    _wait_settled(backend, top, ts.ready_timeout_s)
    runs = [stack.start_load(t, t, 1, ts.reference_s, seed=99, rate_schedule=[(0.0, 0.3)]) for t in top.tier_names]
    for run in runs:
        run.wait(timeout_s=ts.reference_s + 60)


def _write(
    out: Path,
    top: Topology,
    ts: TestbedBenchSettings,
    bs: BenchSettings,
    all_sc: Mapping[str, Scenario],
    cells: Mapping[str, Mapping[str, Any]],
    series: Mapping[str, Any],
    started: float,
    failed: Sequence[Mapping[str, str]],
    rebuilds: Sequence[str] = (),
) -> dict[str, Any]:
    done = {s: dict(c) for s, c in cells.items() if c}
    summary = {
        "settings": {
            "duration_s": bs.duration_s,
            "warmup_s": bs.warmup_s,
            "window_s": bs.window_s,
            "seeds": list(bs.seeds),
            "cold_start_s": top.timing.cold_start_s,
            "time_scale": top.timing.cold_start_s / PAPER_COLD_START_S,
            "scenario_time_scale": ts.time_scale,
            "tick_s": ts.tick_s,
            "wall_s": round(time.time() - started),
            "backend": "netns testbed (bench/control_testbed_backend.py): emulated engines, tier fronts, HTB caps, "
            "the diagnosis API in client perspective; load from inferslice load, open loop",
        },
        "scenarios": {k: all_sc[k].description for k in done},
        "results": done,
        "ratios": ratios(done),
        "failed_runs": list(failed),
        "testbed_rebuilds": list(rebuilds),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    (out / "series.json").write_text(json.dumps({s: v for s, v in series.items() if v}))
    return summary


def main(out: Path, topology_path: str | None, state_dir: Path, scs: Sequence[str], pols: Sequence[str], ts: TestbedBenchSettings) -> int:
    main_pid = os.getpid()

    def _interrupt(signum: int, frame: object) -> None:
        if os.getpid() != main_pid:  # a forked helper (pyroute2's netns workers) exits quietly
            os._exit(128 + signum)
        raise KeyboardInterrupt  # a timeout's SIGTERM must tear the platform and the testbed down too

    signal.signal(signal.SIGTERM, _interrupt)
    run_matrix(out, topology_path, state_dir, scs, pols, ts)
    return 0
