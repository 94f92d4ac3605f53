"""``inferslice bench corpus generate --seeds A-B --out DIR``: the randomised, counterfactual corpus (issue 17).

Per seed: ``corpus_draws.draw_run`` plans the run; the plan runs once per twin (clean first, each
cause removed, then all), each twin its own testbed (``up`` to ``down``, the testbed lock held for
that run only, so other work interleaves between runs). A run: the run's topology (the drawn
placements), the tiers' replicas fixed or autoscaling, the exporter and a real Prometheus
(``Platform``), one load generator per tier (seeded: the same requests in every twin), the causes
applied and reverted on the plan's schedule, and every ``window_s`` a snapshot of every tier from
both sources (Prometheus and embedded) over that window. After the twins, ``corpus_truth`` labels
each (run, tier, window) from the load generators' request records.

Writes, under ``--out``: ``windows.jsonl`` (one line per window: truth, both sources' snapshots with
the reference inline, the window's request statistics, the run's draws, the seed), ``seeds/seed-N.json``
(the plan, every twin's measurements and timing), ``generate.json`` (settings, code hash, load).
A seed whose file exists is skipped, so an interrupted generation resumes.
"""

from __future__ import annotations

import functools
import json
import math
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from inferslice.bench import corpus_draws as draws
from inferslice.bench import corpus_truth as truth
from inferslice.bench.corpus_draws import Cause, RunPlan, TierPlan
from inferslice.bench.corpus_windows import EDGE_CAP_KEY, EDGE_CAP_REPORTED
from inferslice.bottleneck.reference import LearningPolicy, learn_reference
from inferslice.collectors import MetricSource
from inferslice.common import hostcpu
from inferslice.diagnosis import Diagnosis, Regime, SloState
from inferslice.errors import InferSliceError, PermanentError
from inferslice.service.platform import Platform, PlatformSettings
from inferslice.service.sources import SourceSettings, make_source
from inferslice.snapshot import Reference, snapshot_from_dict
from inferslice.testbed.loadgen.workload import Workload, mix_spec
from inferslice.testbed.lock import testbed_lock
from inferslice.testbed.net import lifecycle, wan
from inferslice.testbed.ops import set_gpu_share, set_replicas, wait_replicas_ready
from inferslice.topology import Topology, load_topology, topology_from_dict

Progress = Callable[[str], None]
SOURCES = ("prometheus", "embedded")
WINDOWS_FILE = "windows.jsonl"
_LEARN = LearningPolicy(alpha=0.1, min_confidence=0.0, min_samples=1)
_HEALTHY = Diagnosis(slice="", regime=Regime.HEALTHY, confidence=1.0, slo=SloState.MET)


@dataclass(frozen=True)
class GenSettings:
    scrape_interval_s: float = 2.0  # the testbed's scrape interval (Prometheus and the embedded source alike)
    ready_timeout_s: float = 90.0  # fixed replicas cold-start in 8 s each, behind each other on a loaded machine
    prometheus_ready_s: float = 30.0  # Prometheus's first scrape lands ~5 s after it starts
    drain_timeout_s: float = 2.0  # requests still running past the run are cut: the next run must start clean
    ttft_prior_s: float = 0.1  # sizes open-loop base load before anything is measured (the emulator's unloaded TTFT)
    tpot_prior_s: float = 0.030  # ... and its decode pace (26-32 ms measured at the tiers' base loads)
    max_clients: int = 40  # per tier and load generator: what two shared cores drive without the client becoming the bottleneck
    min_rate_rps: float = 0.2
    min_wan_rate_bps: float = 10e3  # a degraded link still carries something
    real_tier: str | None = None  # a tier served by a real vLLM (item 4): its runs draw single causes on it
    vllm_venv: str | None = None  # the venv of testbed/vllm/install_cpu.sh
    vllm_ready_timeout_s: float = 240.0  # a real vLLM on 2 loaded cores is ready in ~70 s, and more when others load them


# -- sizing the plan's fractions into rates ------------------------------------------------------
_MEAN_OUTPUT: dict[str, float] = {}


def mean_output_tokens(mix: str) -> float:
    if mix not in _MEAN_OUTPUT:
        w = Workload(mix_spec(mix), seed=0)
        _MEAN_OUTPUT[mix] = sum(w.lengths(i)[1] for i in range(2000)) / 2000
    return _MEAN_OUTPUT[mix]


def base_load(top: Topology, tp: TierPlan, settings: GenSettings) -> dict[str, float]:
    """The tier's steady load: ``utilisation`` x its breach point, in clients (closed) or req/s (open)."""
    breach = draws.breach_point(top, tp.tier, tp.replicas)
    if tp.arrivals == "closed":
        return {"clients": float(min(settings.max_clients, max(1, round(tp.utilisation * breach))))}
    service_s = settings.ttft_prior_s + mean_output_tokens(tp.mix) * settings.tpot_prior_s
    return {"rate_rps": round(max(settings.min_rate_rps, tp.utilisation * breach / service_s), 3)}


def applied_magnitude(top: Topology, plan: RunPlan, cause: Cause, clean: Mapping[str, Any], settings: GenSettings) -> dict[str, Any]:
    """What a cause does in rates and counts, from its drawn fraction and the clean twin's measurements."""
    tp = plan.tier(cause.tier)
    breach = draws.breach_point(top, tp.tier, tp.replicas)
    meas = clean["measured"]
    if cause.kind == "load":
        base = base_load(top, tp, settings)
        if tp.arrivals == "closed":
            extra = max(1, min(settings.max_clients, round(cause.magnitude * breach) - int(base["clients"])))
            return {"extra_clients": extra, "breach_point": breach, "total_multiple": (base["clients"] + extra) / breach}
        service_s = meas["tiers"][tp.tier].get("mean_e2e_s") or (settings.ttft_prior_s + mean_output_tokens(tp.mix) * settings.tpot_prior_s)
        breach_rps = breach / service_s
        extra_rps = max(settings.min_rate_rps, cause.magnitude * breach_rps - base["rate_rps"])
        return {"extra_rate_rps": round(extra_rps, 3), "breach_rps": round(breach_rps, 3), "service_s": round(service_s, 3),
                "total_multiple": round((base["rate_rps"] + extra_rps) / breach_rps, 3)}  # fmt: skip
    if cause.kind == "cap":
        demand = _mean_over(meas["tiers"][tp.tier]["link_rx_bps"], cause, plan.window_s)
        return {"cap_bps": round(max(1e4, cause.magnitude * (demand or 1e6))), "demand_bps": demand}
    if cause.kind == "gpu":
        return {"gpu_share": cause.magnitude}
    link = top_link(top, cause)
    if cause.kind == "wan_delay":
        return {"link": cause.link, "rtt_s": round(link.rtt_s + cause.magnitude, 4), "base_rtt_s": link.rtt_s}
    demand = _mean_over(meas["links"].get(str(cause.link), []), cause, plan.window_s) or 0.0
    capacity = link.capacity_bps or 0.0
    if cause.kind == "wan_cross":
        return {"link": cause.link, "cross_bps": round(cause.magnitude * capacity), "demand_bps": demand, "capacity_bps": capacity}
    return {"link": cause.link, "rate_bps": round(max(settings.min_wan_rate_bps, cause.magnitude * demand)), "demand_bps": demand,
            "capacity_bps": capacity}  # fmt: skip


def top_link(top: Topology, cause: Cause) -> Any:
    a, b = _link_ends(str(cause.link))
    link = top.link_between(a, b)
    if link is None:
        raise PermanentError(f"no topology link for {cause.link}")
    return link


def _link_ends(name: str) -> tuple[str, str]:
    """``wan-<gateway side>-<far side>`` -> (gateway side, far side); PoP names have no '-' in our topologies."""
    parts = name.removeprefix("wan-").split("-")
    if len(parts) != 2:
        raise PermanentError(f"cannot read the ends of link {name!r}")
    return parts[0], parts[1]


def _mean_over(series: Sequence[float | None], cause: Cause, window_s: float) -> float | None:
    """Mean of per-window values over the windows the cause spans (by their index)."""
    k0, k1 = int(cause.onset_s // window_s), math.ceil(cause.end_s / window_s)
    vals = [v for v in series[k0:k1] if v is not None]
    return sum(vals) / len(vals) if vals else None


# -- one run ---------------------------------------------------------------------------------------
def _loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def _wait_prometheus(platform: Platform, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if platform.query("up"):
                return
        except (InferSliceError, OSError, ValueError):
            pass
        time.sleep(0.5)
    raise PermanentError(f"Prometheus scraped nothing within {timeout_s:g} s")


class Actions:
    """What a run does to the testbed, as (time from the load start, what, how) entries, plus undo."""

    def __init__(self) -> None:
        self.items: list[tuple[float, str, Callable[[], object]]] = []
        self.done: list[dict[str, Any]] = []

    def add(self, at_s: float, what: str, fn: Callable[[], object]) -> None:
        self.items.append((at_s, what, fn))
        self.items.sort(key=lambda x: x[0])

    def run_due(self, rel_s: float, progress: Progress) -> None:
        while self.items and self.items[0][0] <= rel_s:
            at, what, fn = self.items.pop(0)
            t = time.monotonic()
            try:
                fn()
                ok, err = True, None
            except (InferSliceError, OSError) as e:
                ok, err = False, str(e)
                progress(f"    action {what} failed: {e}")
            self.done.append({"at_s": round(at, 2), "late_s": round(rel_s - at, 3), "what": what, "ok": ok, "error": err,
                              "took_s": round(time.monotonic() - t, 3)})  # fmt: skip


def _schedule_causes(
    actions: Actions, plan: RunPlan, applied: Mapping[str, Mapping[str, Any]], platform: Platform, state_dir: Path
) -> None:
    for c in plan.causes:
        a = applied[c.name]
        tp = plan.tier(c.tier)
        on: Callable[[], object]
        off: Callable[[], object] | None = None
        if c.kind == "load":
            extra: dict[str, Any] = {"drain_timeout_s": 2.0, "records": True, "mix": tp.mix}
            if tp.arrivals == "closed":
                n, what = int(a["extra_clients"]), f"+{a['extra_clients']} clients"
            else:
                n, what = 1, f"+{a['extra_rate_rps']} req/s"
                extra.update(rate_schedule=((0.0, float(a["extra_rate_rps"])),),
                             burstiness=draws.BURSTY_SHAPE if tp.arrivals == "bursty" else 1.0)  # fmt: skip
            # the extra generator ends by itself after the cause's duration
            on = functools.partial(platform.start_load, f"{c.tier}+", tp.tier, n, c.duration_s, tp.seed + 1, **extra)
        elif c.kind == "cap":
            what = f"cap {a['cap_bps']:.0f} bit/s"
            on = functools.partial(lifecycle.set_cap, c.tier, float(a["cap_bps"]), "receive", state_dir)
            off = functools.partial(lifecycle.set_cap, c.tier, None, "receive", state_dir)
        elif c.kind == "gpu":
            what = f"GPU share {a['gpu_share']}"
            on = functools.partial(set_gpu_share, c.tier, float(a["gpu_share"]), state_dir)
            off = functools.partial(set_gpu_share, c.tier, 1.0, state_dir)
        elif c.kind == "wan_delay":
            what = f"{c.link} RTT {a['rtt_s']} s"
            on = functools.partial(wan.set_wan_delay, str(c.link), float(a["rtt_s"]), state_dir)
            off = functools.partial(wan.set_wan_delay, str(c.link), None, state_dir)
        elif c.kind == "wan_rate":
            what = f"{c.link} rate {a['rate_bps']:.0f} bit/s"
            on = functools.partial(wan.set_wan_rate, str(c.link), float(a["rate_bps"]), state_dir)
            off = functools.partial(wan.set_wan_rate, str(c.link), None, state_dir)
        else:  # wan_cross: toward the link's gateway-side end, the direction the tiers' streams take
            toward, _ = _link_ends(str(c.link))
            what = f"{c.link} UDP cross {a['cross_bps']:.0f} bit/s"
            on = functools.partial(wan.start_cross_traffic, str(c.link), float(a["cross_bps"]), toward, "udp", state_dir)
            off = functools.partial(wan.stop_cross_traffic, str(c.link), state_dir)
        actions.add(c.onset_s, f"{c.name} {c.kind} on {c.tier}: {what}", on)
        if off is not None:
            actions.add(c.end_s, f"{c.name} {c.kind} off", off)


def _link_rates(state_dir: Path) -> dict[str, float]:
    """Bytes each link has delivered toward its gateway-side end so far, by the registry name of that end."""
    out: dict[str, float] = {}
    for w in wan.wan_status(state_dir):
        for d in w.directions:
            out[f"wan-{d.receiver}-{d.sender}"] = float(d.forwarded_bytes)
    return out


def execute_run(
    top: Topology,
    topology_path: Path,
    plan: RunPlan,
    label: str,
    applied: Mapping[str, Mapping[str, Any]],
    work: Path,
    state_dir: Path,
    settings: GenSettings,
    progress: Progress,
) -> dict[str, Any]:
    """One twin on its own testbed; returns its snapshots, request records and timing."""
    top = load_topology(topology_path)  # the run's: its placements are the drawn ones
    n_windows = int(plan.run_s // plan.window_s)
    load_keys = [tp.tier for tp in plan.tiers] + [f"{c.tier}+" for c in plan.causes if c.kind == "load"]
    info: dict[str, Any] = {"label": label, "causes": [c.name for c in plan.causes], "applied": dict(applied)}
    with testbed_lock():
        t_lock = time.time()
        info["loadavg_start"] = _loadavg()
        factory = None
        if settings.real_tier is not None:
            from inferslice.testbed.vllm.services import default_venv, engine_services

            factory = engine_services({settings.real_tier: "vllm"}, Path(settings.vllm_venv) if settings.vllm_venv else default_venv())
        reg = lifecycle.up(str(topology_path), state_dir, services=True, service_factory=factory,
                           ready_timeout_s=settings.vllm_ready_timeout_s if factory else lifecycle.READY_TIMEOUT_S)  # fmt: skip
        platform: Platform | None = None
        try:
            for tp in plan.tiers:
                set_replicas(tp.tier, None if tp.autoscale else tp.replicas, state_dir)
            # The exporter and Prometheus start while the replicas cold-start: ~10 s of each run's setup.
            platform = Platform(reg, top, state_dir, work / label / "platform",
                                PlatformSettings(scrape_interval_s=settings.scrape_interval_s, alertmanager=False, api=False,
                                                 load_keys=load_keys))  # fmt: skip
            platform.start()
            wait_replicas_ready(
                {tp.tier: tp.replicas for tp in plan.tiers},
                state_dir,
                settings.vllm_ready_timeout_s if settings.real_tier else settings.ready_timeout_s,
            )
            _wait_prometheus(platform, settings.prometheus_ready_s)
            sources: dict[str, MetricSource] = {}
            for kind in SOURCES:
                kind_: Literal["prometheus", "embedded"] = "prometheus" if kind == "prometheus" else "embedded"
                sources[kind] = make_source(SourceSettings(kind_, platform.prom.url, tuple(platform.targets), "client", plan.window_s,
                                                           scrape_timeout_s=0.75 * settings.scrape_interval_s), top)  # fmt: skip
            for tp in plan.tiers:
                base = base_load(top, tp, settings)
                if tp.arrivals == "closed":
                    platform.start_load(tp.tier, tp.tier, int(base["clients"]), plan.run_s, tp.seed,
                                        drain_timeout_s=settings.drain_timeout_s, records=True, mix=tp.mix)  # fmt: skip
                else:
                    platform.start_load(tp.tier, tp.tier, 1, plan.run_s, tp.seed, drain_timeout_s=settings.drain_timeout_s, records=True,
                                        mix=tp.mix, rate_schedule=((0.0, base["rate_rps"]),),
                                        burstiness=draws.BURSTY_SHAPE if tp.arrivals == "bursty" else 1.0)  # fmt: skip
            starts = {tp.tier: platform.wait_load(tp.tier) for tp in plan.tiers}
            t0 = max(starts.values())
            info["setup_s"] = round(t0 - t_lock, 1)
            actions = Actions()
            _schedule_causes(actions, plan, applied, platform, state_dir)
            snaps: list[dict[str, Any]] = []
            links: list[dict[str, float]] = []
            lateness: list[float] = []
            next_poll = t0
            cpu = hostcpu.read()  # the host's steal per window: a starved host measures itself, not the causes
            for k in range(n_windows):
                boundary = t0 + (k + 1) * plan.window_s
                while True:
                    now = time.time()
                    actions.run_due(now - t0, progress)
                    if now >= next_poll:
                        sources["embedded"].poll(now)
                        next_poll += settings.scrape_interval_s
                    if now >= boundary:
                        break
                    time.sleep(min(0.05, max(0.0, min(boundary, next_poll) - now)))
                now = time.time()
                lateness.append(now - boundary)
                # Both sources answer for the window ending at the boundary, however late this loop got
                # there: Prometheus evaluates at that instant, the embedded source over its samples up to it.
                row: dict[str, Any] = {"window": k, "at": now, "loadavg1": next(iter(_loadavg()), None), "late_s": round(now - boundary, 3)}
                cpu, was = hostcpu.read(), cpu
                share = hostcpu.steal_share(was, cpu)
                row["steal"] = None if share is None else round(share, 4)
                for kind, src in sources.items():
                    try:
                        row[kind] = {s.slice: s.to_dict() for s in src.snapshots(boundary, plan.window_s)}
                    except InferSliceError as err:
                        row[kind] = None
                        row[f"{kind}_error"] = str(err)
                snaps.append(row)
                links.append(_link_rates(state_dir))
            actions.run_due(math.inf, progress)  # undo what is left (cause ends at the run's end)
            info["actions"] = actions.done
            info["late_windows"] = sum(1 for x in lateness if x > 1.0)
            info["max_lateness_s"] = round(max(lateness, default=0.0), 3)
            records: dict[str, list[dict[str, Any]]] = {}
            for key, run in platform.loads.items():
                run.wait(plan.run_s + 30)
                records[key] = [_slim(r) for r in run.records()]
            info["t0"] = t0
            info["starts"] = starts
            info["snapshots"] = snaps
            info["link_bytes"] = links
            info["records"] = records
        finally:
            if platform is not None:
                platform.stop()
            info["loadavg_end"] = _loadavg()
            lifecycle.down(state_dir)
        info["wall_s"] = round(time.time() - t_lock, 1)
    return info


def _slim(r: Mapping[str, Any]) -> dict[str, Any]:
    return {k: r.get(k) for k in ("slice", "start_s", "success", "ttft_s", "e2e_s", "prompt_tokens", "output_tokens", "error")}


# -- measurements and windows ---------------------------------------------------------------------
def measure(plan: RunPlan, run: Mapping[str, Any]) -> dict[str, Any]:
    """What a run measured that later twins size their causes by: per tier its edge demand per window
    and mean service time; per WAN link its delivered rate toward the gateway per window."""
    tiers: dict[str, Any] = {}
    for tp in plan.tiers:
        rx = []
        for row in run["snapshots"]:
            emb = (row.get("embedded") or {}).get(tp.tier) or {}
            rx.append(emb.get("link_rx_bps"))
        recs = [truth.Request.from_record(r) for r in run["records"].get(tp.tier, [])]
        e2e = [r.e2e_s for r in recs if r.success and r.e2e_s is not None]
        tiers[tp.tier] = {"link_rx_bps": rx, "mean_e2e_s": sum(e2e) / len(e2e) if e2e else None}
    links: dict[str, list[float | None]] = {}
    prev: Mapping[str, float] | None = None
    for cur in run["link_bytes"]:
        for name, b in cur.items():
            links.setdefault(name, []).append(None if prev is None or name not in prev else 8 * (b - prev[name]) / plan.window_s)
        prev = cur
    return {"tiers": tiers, "links": links}


def _reference_of(snaps: Sequence[Mapping[str, Any] | None]) -> Reference | None:
    ref: Reference | None = None
    for s in snaps[1:]:  # the first window is the load's ramp
        if s:
            ref = learn_reference(ref, snapshot_from_dict(s), _HEALTHY, _LEARN)
    return ref


def seed_windows(top: Topology, plan: RunPlan, runs: Mapping[str, Mapping[str, Any]], code: str) -> list[dict[str, Any]]:
    """Every (run, tier, window) of a seed with its truth (the first window of each run, the ramp, left out)."""
    n = int(plan.run_s // plan.window_s)
    clean = runs["clean"]
    stats: dict[tuple[str, str], list[truth.WindowStat]] = {}
    for label, run in runs.items():
        for tp in plan.tiers:
            reqs = [truth.Request.from_record(r) for key, rs in run["records"].items() if key.rstrip("+") == tp.tier for r in rs]
            stats[(label, tp.tier)] = truth.window_stats(reqs, float(run["t0"]), plan.window_s, n)
    refs: dict[str, dict[str, float | None]] = {}
    inline: dict[tuple[str, str], Reference | None] = {}
    for tp in plan.tiers:
        reqs = [truth.Request.from_record(r) for key, rs in clean["records"].items() if key.rstrip("+") == tp.tier for r in rs]
        refs[tp.tier] = truth.reference(stats[("clean", tp.tier)], reqs, float(clean["t0"]), plan.window_s)
        for src in SOURCES:
            inline[(src, tp.tier)] = _reference_of([(row.get(src) or {}).get(tp.tier) for row in clean["snapshots"]])
    out: list[dict[str, Any]] = []
    for label, run in runs.items():
        present = set(run["causes"])
        causes = [c for c in plan.causes if c.name in present]
        for tp in plan.tiers:
            slo = top.tier(tp.tier).slo_ttft_p99_s
            for k in range(1, n):
                without: dict[str, truth.WindowStat | None] = {}
                for c in causes:
                    twin = _twin_label(runs, present - {c.name}, plan)
                    without[c.name] = stats[(twin, tp.tier)][k] if twin is not None else None
                w = stats[(label, tp.tier)][k]
                truth_runs = {label, "clean", *(_twin_label(runs, present - {c.name}, plan) or "clean" for c in causes)}
                t = truth.judge(w, without, stats[("clean", tp.tier)][k], refs[tp.tier],
                                [(c.name, c.kind, c.cls, c.tier) for c in causes], slo)  # fmt: skip
                row = run["snapshots"][k]
                snaps = {}
                for src in SOURCES:
                    snap = (row.get(src) or {}).get(tp.tier)
                    ref = inline[(src, tp.tier)]
                    snaps[src] = None if snap is None else (snapshot_from_dict(snap).with_reference(ref).to_dict() if ref else snap)
                out.append({
                    "id": f"s{plan.seed}-{label}-{tp.tier}-w{k:02d}",
                    "seed": plan.seed,
                    "draw_version": plan.draw_version,
                    "code": code,
                    EDGE_CAP_KEY: EDGE_CAP_REPORTED,
                    "run": label,
                    "tier": tp.tier,
                    "window": k,
                    "start_s": k * plan.window_s,
                    "end_s": (k + 1) * plan.window_s,
                    "truth": {**t.to_dict(), "primary": truth.primary_regime(t.causes), "healthy": t.healthy},
                    "truth_version": truth.TRUTH_VERSION,
                    "stats": asdict(w),
                    "snapshots": snaps,
                    "causes": [{**asdict(c), "class": c.cls, "applied": run["applied"].get(c.name)} for c in causes],
                    "tier_plan": asdict(tp),
                    "loadavg": [run.get("loadavg_start"), run.get("loadavg_end")],
                    "window_loadavg1": row.get("loadavg1"),
                    "window_late_s": row.get("late_s"),
                    # The host's CPU steal over this window, and the most over the twins its truth reads
                    # (common/hostcpu.py; None: unmeasured, lines before 2026-12-07).
                    "window_steal": row.get("steal"),
                    "truth_steal_max": _most(runs[x]["snapshots"][k].get("steal") for x in truth_runs),
                })  # fmt: skip
    return out


def _most(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _twin_label(runs: Mapping[str, Mapping[str, Any]], causes: set[str], plan: RunPlan) -> str | None:
    for label, run in runs.items():
        if set(run["causes"]) == causes:
            return label
    return None


# -- a seed, a corpus ------------------------------------------------------------------------------
def code_hash() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent, timeout=10
        )
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                               cwd=Path(__file__).parent, timeout=10)  # fmt: skip
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _with_retry(fn: Callable[[], dict[str, Any]], label: str, progress: Progress, attempts: int = 2) -> dict[str, Any]:
    """A run that failed to set up (a replica not ready in time on a loaded machine, a load generator
    that did not start) is run again once; a second failure fails the seed."""
    for i in range(attempts):
        try:
            return fn()
        except (InferSliceError, OSError, AssertionError) as err:
            if i + 1 == attempts:
                raise
            progress(f"  {label}: attempt {i + 1} failed ({err}); again")
    raise AssertionError("unreachable")


def generate_seed(
    seed: int, top: Topology, out: Path, state_dir: Path, settings: GenSettings, progress: Progress, code: str
) -> list[dict[str, Any]]:
    plan = draws.draw_run(seed, top, settings.real_tier)
    seed_dir = out / "seeds"
    seed_dir.mkdir(parents=True, exist_ok=True)
    topo_path = seed_dir / f"topology-{seed}.yaml"
    doc = draws.run_topology(top, plan)
    topology_from_dict(doc)  # a drawn placement the topology rejects is a bug in the draws, not a run to attempt
    topo_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    work = out / "work" / f"seed-{seed}"
    runs: dict[str, dict[str, Any]] = {}
    progress(
        f"seed {seed}: {len(plan.causes)} causes: "
        + (", ".join(f"{c.kind}@{c.tier} {c.onset_s:.0f}+{c.duration_s:.0f}s" for c in plan.causes) or "none")
    )
    clean_meas: dict[str, Any] | None = None
    for label, removed in draws.twins(plan):
        sub = plan.without(removed)
        applied = {c.name: applied_magnitude(top, plan, c, {"measured": clean_meas}, settings) for c in sub.causes} if sub.causes else {}
        attempt = functools.partial(execute_run, top, topo_path, sub, label, applied, work, state_dir, settings, progress)
        run = _with_retry(attempt, label, progress)
        load = f"{run['loadavg_start'][:1]} -> {run['loadavg_end'][:1]}"
        progress(f"  {label}: {run['wall_s']:.0f} s (setup {run.get('setup_s')} s, load {load}, late windows {run.get('late_windows')})")
        runs[label] = run
        if label == "clean":
            clean_meas = measure(plan, run)
            run["measured"] = clean_meas
    windows = seed_windows(top, plan, runs, code)
    bulky = ("snapshots", "records", "link_bytes")
    summary = {"seed": seed, "plan": plan.to_dict(), "code": code,
               "runs": {k: {x: v for x, v in r.items() if x not in bulky} for k, r in runs.items()}}  # fmt: skip
    (seed_dir / f"seed-{seed}.records.json").write_text(json.dumps({k: r["records"] for k, r in runs.items()}))
    (seed_dir / f"seed-{seed}.json").write_text(json.dumps(summary, indent=1, default=str))
    return windows


def generate(seeds: Sequence[int], out: Path, state_dir: Path, topology_path: str | None = None, settings: GenSettings | None = None,
             progress: Progress = print) -> dict[str, Any]:  # fmt: skip
    settings = settings or GenSettings()
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    top = load_topology(topology_path)
    code = code_hash()
    meta_path = out / "generate.json"
    meta: dict[str, Any] = json.loads(meta_path.read_text()) if meta_path.exists() else {"seeds": {}}
    recorded = asdict(settings)
    if recorded.get("vllm_venv"):
        recorded["vllm_venv"] = Path(recorded["vllm_venv"]).name  # its name, not this machine's path to it
    meta.update({"settings": recorded, "draw_version": draws.DRAW_VERSION, "topology": topology_path or "default"})
    if settings.real_tier is not None:
        meta["real_engine"] = {"tier": settings.real_tier, "engine": "vllm (CPU build, tiny random-weight Llama)"}
    t_all = time.time()
    for seed in seeds:
        if (out / "seeds" / f"seed-{seed}.json").exists():
            progress(f"seed {seed}: done already")
            continue
        t = time.time()
        try:
            windows = generate_seed(seed, top, out, state_dir, settings, progress, code)
        except (InferSliceError, OSError, AssertionError) as err:  # the next seed may run: this one is retried next time
            progress(f"seed {seed}: failed: {err}")
            meta.setdefault("failed", {})[str(seed)] = {"error": str(err)[:500], "date": time.strftime("%Y-%m-%d %H:%M:%S")}
            meta_path.write_text(json.dumps(meta, indent=1))
            continue
        with (out / WINDOWS_FILE).open("a") as fh:
            for w in windows:
                fh.write(json.dumps(w) + "\n")
        meta["seeds"][str(seed)] = {"code": code, "wall_s": round(time.time() - t, 1), "windows": len(windows),
                                    "date": time.strftime("%Y-%m-%d %H:%M:%S"), "loadavg": _loadavg()}  # fmt: skip
        meta_path.write_text(json.dumps(meta, indent=1))
    meta["last_wall_s"] = round(time.time() - t_all, 1)
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta
