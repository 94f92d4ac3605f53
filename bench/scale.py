"""``inferslice bench scale``: one exporter per node, Prometheus (one, or sharded with VictoriaMetrics
over the shards), the snapshot recording rules and the diagnosis rounds, from 100 to 10,000 slices.

Synthetic deployment (``scale_targets``): P PoPs x 10 tiers (each tier has its own slice at each
PoP), three 0.5-GPU replicas each.

1. Exporter per node: our engine exporter scraping one PoP's 30 fake vLLM replicas (recorded
   exposition, advancing), plus the per-slice network and GPU series -> series per node, scrape
   wall time and CPU time (median).
2. The 2 s fleet (``--pops 100``: 1,000 slices): one Prometheus scraping the 100 node exporters
   every 2 s with the snapshot rules, the measured process pinned to one core and everything else
   on the other; the recorded round (three queries + ingest) every 2 s *while the scrapes run*,
   the loop's CPU, Prometheus's CPU over the rounds minus its scrape-only CPU measured just before
   in the same run (its query work); the raw round (one query per field) for comparison.
3. The embedded source (scrapes and evaluates in the loop's process) at 10 and 100 PoPs: the
   small-site default and its limit.
4. The cost curve (``--sizes``): the sharded form (``--shards`` Prometheus hashing the PoPs as
   Prometheus Operator's ``spec.shards`` does, remote-writing the recorded series to one
   VictoriaMetrics; one diagnosis group per shard, each reading its PoPs through VictoriaMetrics)
   at 100, 1,000 and 10,000 slices, at the scrape interval ``--fleet-interval-s`` these two cores
   can ingest for 1.5 M series. Round time per group, CPU of the loop, of Prometheus's query work
   and of VictoriaMetrics, per slice; plotted into ``cost-curve.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from inferslice.collectors import EmbeddedSource
from inferslice.collectors.source import slices_from_topology
from inferslice.errors import SourceUnavailable
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.engine import EngineSettings, EngineSource, StaticDiscovery, Target
from inferslice.exporters.text import render_registry
from inferslice.service.diagnosis import DiagnosisService
from inferslice.service.store import Store
from inferslice.topology import Topology

from .scale_fleet import FleetSettings, run_fleet
from .scale_targets import RECORDED, FakeTargets, network_and_gpu_lines, pop_name, synthetic_topology

INTERVAL_S = 2.0  # the diagnosis interval the round must fit in
WINDOW_S = 8.0  # the loop's default window (four scrapes)
MEASURED_CPU, OTHER_CPU = 0, 1


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and cpu in os.sched_getaffinity(0):
        os.sched_setaffinity(0, {cpu})


def _series(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def node_exporter(topology: Topology, scrapes: int) -> tuple[dict[str, Any], str]:
    """Phase 1: one PoP's exporter; returns its figures and the exposition it renders."""
    pop = pop_name(0)
    tiers = [t for t in topology.tiers if t.name.endswith(pop)]
    recorded = RECORDED.read_text()
    paths = {f"/r/{t.name}-{r}/metrics": recorded for t in tiers for r in range(t.replicas_max)}
    fake = FakeTargets(paths, OTHER_CPU, step_s=0.001)  # a new body every scrape, as a serving vLLM's
    try:
        targets = tuple(
            Target(fake.url(f"/r/{t.name}-{r}/metrics"), t.name, pop, f"{t.name}-{r}") for t in tiers for r in range(t.replicas_max)
        )
        # One exporter per node: only its own slices' series (the tiers file names 1,000).
        source = EngineSource([StaticDiscovery(targets)], topology, EngineSettings(all_tiers=False))
        registry = CollectorRegistry()
        registry.register(GuardedCollector([source]))
        render_registry(registry)  # warm: connections, parsed-exposition cache
        wall, cpu = [], []
        for _ in range(scrapes):
            w0, c0 = time.perf_counter(), time.process_time()
            body = render_registry(registry)
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
            time.sleep(0.05)
        source.close()
    finally:
        fake.close()
    text = body.decode() + network_and_gpu_lines(topology, pop)
    result = {
        "replicas_per_node": len(targets),
        "slices_per_node": len(tiers),
        "series_per_node": _series(text),
        "series_engine": _series(body.decode()),
        "scrape_wall_s_median": statistics.median(wall),
        "scrape_cpu_s_median": statistics.median(cpu),
        "replica_exposition_series": _series(recorded),
    }
    return result, text


def _wait_tick(t0: float, k: int) -> float:
    target = t0 + k * INTERVAL_S
    time.sleep(max(0.0, target - time.time()))
    return time.time()


def _round_stats(rounds: list[dict[str, float]], failed: list[str]) -> dict[str, Any]:
    if not rounds:
        return {"rounds": 0, "failed_rounds": len(failed), "errors": failed[:3], "median": {}, "max": {}}
    keys = rounds[0].keys()
    return {
        "rounds": len(rounds),
        "failed_rounds": len(failed),
        "errors": failed[:3],
        "median": {k: statistics.median(r[k] for r in rounds) for k in keys},
        "max": {k: max(r[k] for r in rounds) for k in keys},
    }


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def _ingest_all(service: DiagnosisService, snaps: list[Any]) -> int:
    with service.store.batch():  # one transaction per round, not two or three per slice
        for snap in snaps:
            service.ingest(snap)
    return len(snaps)


def embedded_rounds(topology: Topology, urls: list[str], db: Path, warm: int, measured: int) -> dict[str, Any]:
    source = EmbeddedSource(urls, slices_from_topology(topology))
    service = DiagnosisService(Store(db), topology, time.time)
    rounds: list[dict[str, float]] = []
    failed: list[str] = []
    snaps: list[Any] = []
    t0 = time.time()
    for k in range(warm + measured):
        now = _wait_tick(t0, k)
        try:
            _, poll_w, poll_c = _timed(lambda now=now: source.poll(now))  # type: ignore[misc]
            snaps, eval_w, eval_c = _timed(lambda now=now: source.snapshots(now, WINDOW_S))  # type: ignore[misc]
        except SourceUnavailable as err:
            failed.append(str(err)[:300])
            continue
        _, ing_w, ing_c = _timed(lambda snaps=snaps: _ingest_all(service, snaps))  # type: ignore[misc]
        if k >= warm:
            rounds.append({"poll_wall_s": poll_w, "evaluate_wall_s": eval_w, "ingest_wall_s": ing_w,
                           "poll_cpu_s": poll_c, "evaluate_cpu_s": eval_c, "ingest_cpu_s": ing_c,
                           "total_wall_s": poll_w + eval_w + ing_w, "total_cpu_s": poll_c + eval_c + ing_c})  # fmt: skip
    up = sum(1 for t in source.targets.values() if t.up)
    filled = sum(1 for s in snaps if s.ttft_p99_s is not None)
    return {**_round_stats(rounds, failed), "targets_up": up, "snapshots": len(snaps), "snapshots_with_ttft": filled}


def embedded(topology: Topology, node_text: str, pops: int, workdir: Path, measured: int) -> dict[str, Any]:
    """Embedded rounds over the first ``pops`` PoPs (their slices only)."""
    shard = topology.model_copy(update={"tiers": [t for t in topology.tiers if int(t.name.rsplit("-p", 1)[1]) < pops]})
    nodes = {f"/node/{pop_name(i)}/metrics": pop_name(i) for i in range(pops)}
    fake = FakeTargets({"template": node_text}, OTHER_CPU, pops=nodes)
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    try:
        _pin(MEASURED_CPU)
        warm = int(WINDOW_S / INTERVAL_S) + 1  # fill one window first
        out = embedded_rounds(shard, [fake.url(p) for p in nodes], workdir / f"embedded{pops}.db", warm, measured)
    finally:
        fake.close()
        if allowed is not None:
            os.sched_setaffinity(0, allowed)
    out["slices"] = len(shard.tiers)
    if out["median"]:
        out["core_share_of_interval"] = out["median"]["total_cpu_s"] / INTERVAL_S
    return out


PARTS = ("fleet", "embedded", "curve", "floor")


def measure(
    pops: int = 100,
    tiers: int = 10,
    replicas: int = 3,
    measured: int = 5,
    sizes: tuple[int, ...] = (100, 1000, 10000),
    shards: int = 4,
    fleet_interval_s: float = 10.0,
    parts: tuple[str, ...] = ("fleet", "embedded", "curve"),
) -> dict[str, Any]:
    topology = synthetic_topology(pops, tiers, replicas)
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    result: dict[str, Any] = {"benchmark": "scale", "pops": pops, "tiers_per_pop": tiers, "slices": len(topology.tiers),
                              "replicas": sum(t.replicas_max for t in topology.tiers), "interval_s": INTERVAL_S, "window_s": WINDOW_S,
                              "cores_available": len(allowed), "load_average_before": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    exporter, node_text = node_exporter(topology, scrapes=15)
    result["exporter"] = exporter
    with tempfile.TemporaryDirectory(prefix="isx-scale-") as tmp:
        work = Path(tmp)
        fleet_2s = FleetSettings(pops=pops, tiers=tiers, replicas=replicas, shards=0, scrape_interval_s=INTERVAL_S, rounds=measured,
                                 raw_rounds=3, pin=True)  # fmt: skip
        if "fleet" in parts:
            result["fleet"] = run_fleet(fleet_2s, topology, node_text, work / "fleet")
        if "floor" in parts:  # the same fleet, its snapshot group without the quantile terms
            floor = dataclasses.replace(fleet_2s, raw_rounds=0, quantile_terms=False)
            result["fleet_floor"] = run_fleet(floor, topology, node_text, work / "floor")
        if "embedded" in parts:
            result["embedded"] = {str(n): embedded(topology, node_text, n, work, measured) for n in (max(1, pops // 10), pops)}
        if "curve" in parts:
            curve = {}
            for n in sizes:
                n_pops = max(1, n // tiers)
                topo = synthetic_topology(n_pops, tiers, replicas)
                fleet = FleetSettings(
                    pops=n_pops, tiers=tiers, replicas=replicas, shards=shards, scrape_interval_s=fleet_interval_s, rounds=4
                )
                print(f"inferslice bench scale: {n_pops * tiers:,} slices over {shards} shards ...", file=sys.stderr, flush=True)
                point = run_fleet(fleet, topo, node_text, work / f"curve{n}")
                point["per_slice_round_cpu_s"] = per_slice_round(point)
                curve[str(n_pops * tiers)] = point
            result["curve"] = curve
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def _ms(x: float) -> str:
    return f"{x * 1e3:,.0f} ms" if x == x else "-"


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %" if x == x else "-"


def markdown(r: dict[str, Any]) -> str:
    e = r["exporter"]
    la, lb = r["load_average_before"], r["load_average_after"]
    lines = [
        f"Synthetic deployment: PoPs x {r['tiers_per_pop']} tiers, {r['replicas'] // max(1, r['slices'])} replicas per slice; "
        f"{r['cores_available']} cores, load average {la[0]:.2f} before and {lb[0]:.2f} after (other work on the machine).",
        "",
        "| per node exporter | value |",
        "|---|---:|",
        f"| replicas scraped (recorded vLLM exposition, {e['replica_exposition_series']} series each) | {e['replicas_per_node']} |",
        f"| series exported (engine + network + GPU) | {e['series_per_node']:,} |",
        f"| scrape wall time, median | {e['scrape_wall_s_median'] * 1e3:.1f} ms |",
        f"| scrape CPU time, median | {e['scrape_cpu_s_median'] * 1e3:.1f} ms |",
    ]
    f = r.get("fleet")
    if f is not None:
        lines += ["", *_fleet_lines(f)]
    floor = r.get("fleet_floor")
    if floor is not None:
        c = floor["cpu_share"]
        lines += ["", f"**The same fleet without the quantile terms** (the snapshot group less its bucket-rate helpers and the "
                      f"quantiles over them: {floor['rules']} rules): Prometheus query work **{_pct(c['prometheus_query_work'])}** "
                      f"of a core (scrapes only {_pct(c['prometheus_scrape_only'])}), group evaluation "
                      f"{floor['rule_group_last_duration_s'] * 1e3:,.0f} ms, {floor['rule_group_iterations_missed']:.0f} evaluations "
                      f"missed, loop {_pct(c['loop'])}: what every other term costs."]  # fmt: skip
    emb = r.get("embedded")
    if emb:
        lines += ["", "Embedded source (the loop scrapes and evaluates the exporters itself; 2 s interval, loop pinned to one core):", "",
                  "| slices | poll (scrape + parse), CPU | evaluate, CPU | ingest, CPU | round, wall | share of one core |",
                  "|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for d in emb.values():
            m = d["median"]
            if m:
                lines.append(f"| {d['slices']:,} | {_ms(m['poll_cpu_s'])} | {_ms(m['evaluate_cpu_s'])} | {_ms(m['ingest_cpu_s'])} "
                             f"| {_ms(m['total_wall_s'])} | {_pct(d['core_share_of_interval'])} |")  # fmt: skip
    curve = r.get("curve")
    if curve:
        first = next(iter(curve.values()))
        lines += [
            "",
            f"**Sharded: {first['shards']} Prometheus shards (hashmod of the PoP) remote-writing the recorded series to VictoriaMetrics, "
            f"one diagnosis group per shard reading its PoPs from VictoriaMetrics; scrape/rule/diagnosis interval "
            f"{first['scrape_interval_s']:g} s, window {first['window_s']:g} s, scrapes running:**",
            "",
            "| slices | series (all shards) | round wall per group, median (max) | loop CPU | Prometheus scrapes "
            "| Prometheus query work | VictoriaMetrics | Prometheus + VM RSS | rule evaluations missed | load average before, after |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]  # fmt: skip
        for d in curve.values():
            c = d["cpu_share"]
            walls = [g["total_wall_s_median"] for g in d["rounds"]["groups"] if g["rounds"]]
            wmax = max((g["total_wall_s_max"] for g in d["rounds"]["groups"] if g["rounds"]), default=float("nan"))
            lines.append(
                f"| {d['slices']:,} | {d['head_series']:,.0f} | {_ms(statistics.median(walls) if walls else float('nan'))} ({_ms(wmax)}) "
                f"| {_pct(c['loop'])} | {_pct(c['prometheus_scrape_only'])} | {_pct(c['prometheus_query_work'])} "
                f"| {_pct(c['vm_with_rounds'])} | {(d['prometheus_rss_bytes'] + d['vm_rss_bytes']) / 2**30:.1f} GiB "
                f"| {d.get('rule_group_iterations_missed', float('nan')):.0f} "
                f"| {d['load_average_before'][0]:.2f}, {d['load_average_after'][0]:.2f} |"
            )
        lines += [
            "",
            "CPU per slice (the curve: flat is linear); the loop per round, Prometheus and VictoriaMetrics per interval:",
            "",
            "| slices | loop | Prometheus query work | VictoriaMetrics |",
            "|---:|---:|---:|---:|",
        ]
        for d in curve.values():
            per = per_slice_round(d)
            lines.append(
                f"| {d['slices']:,} | {per['loop'] * 1e6:,.0f} µs | {per['prometheus_query_work'] * 1e6:,.0f} µs "
                f"| {per['vm'] * 1e6:,.0f} µs |"
            )
    return "\n".join(lines) + "\n"


def _fleet_lines(f: dict[str, Any]) -> list[str]:
    g = f["rounds"]["groups"][0]
    c = f["cpu_share"]
    raw = f.get("raw", {})
    nan = float("nan")
    title = (
        f"**{f['slices']:,} slices, one Prometheus, {f['scrape_interval_s']:g} s scrape/rule/diagnosis interval, "
        f"{f['window_s']:g} s window, scrapes running** ({f['head_series']:,.0f} series in the head block, "
        f"{f['targets_up']} targets up, {f['rules']} snapshot rules, group evaluation {f['rule_group_last_duration_s'] * 1e3:,.0f} ms, "
        f"{f.get('rule_group_iterations_missed', nan):.0f} evaluations missed; loop on one core, Prometheus and the targets on the "
        f"other; load average {f['load_average_before'][0]:.2f} before, {f['load_average_after'][0]:.2f} after):"
    )
    rows = [
        ("read the window (queries + assembly), wall", _ms(g["evaluate_wall_s_median"]), _ms(raw.get("evaluate_wall_s_median", nan))),
        ("read the window, CPU of the loop", _ms(g["evaluate_cpu_s_median"]), _ms(raw.get("evaluate_cpu_s_median", nan))),
        ("classify + store + episodes, wall", _ms(g["ingest_wall_s_median"]), ""),
        ("classify + store + episodes, CPU", _ms(g["ingest_cpu_s_median"]), ""),
        ("**round, wall** (median; max)", f"**{_ms(g['total_wall_s_median'])}**; {_ms(g['total_wall_s_max'])}",
         _ms(raw.get("total_wall_s_median", nan))),
        ("**loop CPU, share of one core**", f"**{_pct(c['loop'])}**", _pct(c.get("loop_raw", nan))),
        ("Prometheus CPU, scrapes only (measured first)", _pct(c["prometheus_scrape_only"]), ""),
        ("Prometheus CPU during the rounds", _pct(c["prometheus_with_rounds"]), ""),
        ("**Prometheus query work** (rules + queries: the difference)", f"**{_pct(c['prometheus_query_work'])}**",
         _pct(c.get("prometheus_query_work_raw", nan))),
        ("failed rounds; slices with a P99 TTFT in the last round",
         f"{f['rounds']['failed_rounds']}; {f['rounds']['slices_with_ttft_last_round']:,}", ""),
    ]  # fmt: skip
    table = ["| one round, all slices | recorded (3 queries) | raw (one query per field) |", "|---|---:|---:|"]
    return [title, "", *table, *(f"| {a} | {b} | {c_} |" for a, b, c_ in rows)]


def per_slice_round(d: dict[str, Any]) -> dict[str, float]:
    """CPU seconds per slice of each part: the loop per round (every group's), Prometheus's query work
    and VictoriaMetrics per interval (their rules and remote writes run every interval)."""
    c, interval, n = d["cpu_share"], d["scrape_interval_s"], d["slices"]
    return {"loop": d["loop_round_cpu_s"] / n, "prometheus_query_work": c["prometheus_query_work"] * interval / n,
            "vm": c["vm_with_rounds"] * interval / n}  # fmt: skip


def plot(r: dict[str, Any], path: Path) -> None:
    """The cost curve: CPU per round of each part against slices (log-log), with linear guides."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = r.get("curve") or {}
    if not curve:
        return
    xs = [d["slices"] for d in curve.values()]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    parts = (
        ("loop", "diagnosis loop (all groups)"),
        ("prometheus_query_work", "Prometheus query work (rules, remote write)"),
        ("vm", "VictoriaMetrics (ingest + queries)"),
    )
    for key, label in parts:
        ys = [per_slice_round(d)[key] * d["slices"] for d in curve.values()]
        ax.plot(xs, ys, marker="o", label=label)
    base = next(per_slice_round(d)["loop"] * d["slices"] for d in curve.values())
    ax.plot(xs, [base * x / xs[0] for x in xs], linestyle=":", color="grey", label="linear from the smallest loop point")
    first = next(iter(curve.values()))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("slices")
    ax.set_ylabel("CPU seconds per round")
    ax.set_title(f"Cost of a diagnosis round: {first['shards']} shards + VictoriaMetrics, {first['scrape_interval_s']:g} s interval")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated slice counts, got {text!r}") from None
    if not sizes or any(n < 10 for n in sizes):
        raise argparse.ArgumentTypeError("slice counts of at least 10 (one PoP of 10 tiers)")
    return sizes


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pops", type=int, default=100, help="PoPs of the 2 s fleet (default 100: 1,000 slices)")
    p.add_argument("--tiers", type=int, default=10, help="tiers per PoP (default 10)")
    p.add_argument("--replicas", type=int, default=3, help="replicas per slice (default 3)")
    p.add_argument("--rounds", type=int, default=5, help="measured diagnosis rounds of the 2 s fleet and of the embedded source")
    p.add_argument(
        "--sizes", type=_sizes, default=(100, 1000, 10000), help="slice counts of the sharded cost curve (default 100,1000,10000)"
    )
    p.add_argument("--shards", type=int, default=4, help="Prometheus shards and diagnosis groups of the curve (default 4)")
    p.add_argument("--fleet-interval-s", type=float, default=10.0, help="scrape/rule/diagnosis interval of the curve (default 10 s)")
    p.add_argument(
        "--parts",
        default="fleet,embedded,curve",
        help="comma-separated subset of fleet, embedded, curve, floor (the 2 s fleet without its quantile terms; not by default)",
    )
    p.add_argument("--out", default=None, metavar="DIR", help="write scale.json, scale.md and cost-curve.png there")
    p.add_argument("--json", metavar="FILE", default=None, help="also write the raw result as JSON")


def run(args: argparse.Namespace) -> int:
    parts = tuple(x.strip() for x in args.parts.split(",") if x.strip())
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        given = ", ".join(unknown) or "(none given)"
        print(f"inferslice bench scale: --parts: unknown {given}; choose from {', '.join(PARTS)}", file=sys.stderr)
        return 2
    result = measure(args.pops, args.tiers, args.replicas, args.rounds, args.sizes, args.shards, args.fleet_interval_s, parts)
    text = markdown(result)
    print(text, end="")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "scale.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
        (out / "scale.md").write_text(text)
        plot(result, out / "cost-curve.png")
    return 0
