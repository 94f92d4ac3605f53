"""``inferslice bench scale``: how far one exporter per node, one Prometheus and one diagnosis process go.

Synthetic deployment (``scale_targets``): 100 PoPs x 10 tiers = 1,000 slices, 3,000 replicas.

1. Exporter per node: our engine exporter scraping one PoP's 30 fake vLLM replicas (recorded
   exposition, advancing), plus the per-slice network and GPU series -> series per node, scrape
   wall time and CPU time (median).
2. One diagnosis round for all 1,000 slices (source evaluation + classify + store + episodes),
   for both sources, with the measured process pinned to one core and everything else (fake
   targets, Prometheus) on the other:
   - embedded: poll the 100 node exporters over HTTP, evaluate 1,000 snapshots, ingest them;
   - prometheus: a real Prometheus scrapes the same targets every 2 s; the round's PromQL (one
     query per field for all slices) and the ingest. PromQL work per round: queries, samples the
     engine touched (``stats=all``), series in the head block.
   Budget: the 2 s interval; reported as round time / interval (the share of one core it needs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from inferslice.collectors import EmbeddedSource
from inferslice.collectors.prometheus import PrometheusSettings, PrometheusSource
from inferslice.collectors.source import slices_from_topology
from inferslice.common.prometheus import Prometheus
from inferslice.errors import SourceUnavailable
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.engine import EngineSettings, EngineSource, StaticDiscovery, Target
from inferslice.exporters.text import render_registry
from inferslice.service.diagnosis import DiagnosisService
from inferslice.service.store import Store
from inferslice.topology import Topology

from .scale_targets import RECORDED, FakeTargets, network_and_gpu_lines, pop_name, relabel_node, synthetic_topology

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


def _pin_process(pid: int, cpu: int) -> None:
    """Every thread of ``pid`` onto ``cpu`` (Prometheus's Go threads exist right after start)."""
    if not hasattr(os, "sched_setaffinity") or cpu not in os.sched_getaffinity(0):
        return
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(task.name), {cpu})


@contextlib.contextmanager
def prometheus(urls: list[str], workdir: Path) -> Iterator[str]:
    """A real Prometheus (``common.prometheus``) scraping every node exporter, on the other core."""
    static = [{"targets": [u.split("/")[2]], "labels": {"__metrics_path__": "/" + u.split("/", 3)[3]}} for u in urls]
    config = {
        "global": {"scrape_interval": f"{INTERVAL_S:g}s", "scrape_timeout": f"{INTERVAL_S:g}s", "evaluation_interval": "1m"},
        # honor_labels: the exporters' slice and pop labels are the ones the queries select on
        "scrape_configs": [{"job_name": "nodes", "honor_labels": True, "static_configs": static}],
    }
    server = Prometheus(workdir / "prometheus", config)
    server.start()
    try:
        if server.pid is not None:
            _pin_process(server.pid, OTHER_CPU)
        yield server.url
    finally:
        server.stop()


def _promql_work(url: str, queries: dict[str, str], at_s: float) -> dict[str, Any]:
    samples = 0
    for q in queries.values():
        body = httpx.post(f"{url}/api/v1/query", data={"query": q, "time": f"{at_s:.3f}", "stats": "all"}, timeout=30).json()
        samples += int(body.get("data", {}).get("stats", {}).get("samples", {}).get("totalQueryableSamples", 0))
    own = httpx.get(f"{url}/metrics", timeout=10).text  # Prometheus's own metrics: it does not scrape itself here
    series = next((float(line.split()[-1]) for line in own.splitlines() if line.startswith("prometheus_tsdb_head_series ")), 0.0)
    query_chars = sum(len(q) for q in queries.values())
    return {
        "queries_per_round": len(queries),
        "samples_touched_per_round": samples,
        "head_series": series,
        "promql_chars_per_round": query_chars,
    }


def prometheus_rounds(topology: Topology, url: str, db: Path, instants: list[float]) -> dict[str, Any]:
    """Rounds evaluated at ``instants`` (already scraped into Prometheus; the fake targets are stopped
    by then, so Prometheus answers queries with the core it has in production, not busy scraping)."""
    slices = slices_from_topology(topology)
    source = PrometheusSource(slices, PrometheusSettings(base_url=url, timeout_s=INTERVAL_S * 5, window_s=WINDOW_S))
    service = DiagnosisService(Store(db), topology, time.time)
    rounds: list[dict[str, float]] = []
    failed: list[str] = []
    snaps: list[Any] = []
    for now in instants:
        before = source._queries
        try:
            snaps, eval_w, eval_c = _timed(lambda now=now: source.snapshots(now, WINDOW_S))  # type: ignore[misc]
        except SourceUnavailable as err:
            failed.append(str(err)[:300])
            continue
        _, ing_w, ing_c = _timed(lambda snaps=snaps: _ingest_all(service, snaps))  # type: ignore[misc]
        rounds.append({"evaluate_wall_s": eval_w, "ingest_wall_s": ing_w, "total_wall_s": eval_w + ing_w,
                       "evaluate_cpu_s": eval_c, "ingest_cpu_s": ing_c,
                       "total_cpu_s": eval_c + ing_c, "queries": float(source._queries - before)})  # fmt: skip
    try:
        work = _promql_work(url, source.queries([s.name for s in slices], WINDOW_S), instants[-1])
    except httpx.HTTPError as err:
        work = {"queries_per_round": len(source.specs), "promql_work_error": f"{type(err).__name__}: {err}"}
    filled = sum(1 for s in snaps if s.ttft_p99_s is not None)
    source.close()
    return {**_round_stats(rounds, failed), **work, "snapshots": len(snaps), "snapshots_with_ttft": filled}


def measure(
    pops: int = 100, tiers: int = 10, replicas: int = 3, measured: int = 5, sources: tuple[str, ...] = ("embedded", "prometheus")
) -> dict[str, Any]:
    topology = synthetic_topology(pops, tiers, replicas)
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    result: dict[str, Any] = {"benchmark": "scale", "pops": pops, "tiers_per_pop": tiers, "slices": len(topology.tiers),
                              "replicas": sum(t.replicas_max for t in topology.tiers), "interval_s": INTERVAL_S, "window_s": WINDOW_S,
                              "cores_available": len(allowed)}  # fmt: skip
    exporter, node_text = node_exporter(topology, scrapes=15)
    result["exporter"] = exporter
    nodes = {f"/node/{pop_name(i)}/metrics": relabel_node(node_text, i) for i in range(pops)}
    warm = int(WINDOW_S / INTERVAL_S) + 1  # fill one window first
    with tempfile.TemporaryDirectory(prefix="isx-scale-") as tmp:
        fake = FakeTargets(nodes, OTHER_CPU)
        try:
            urls = [fake.url(p) for p in nodes]
            _pin(MEASURED_CPU)
            if "embedded" in sources:
                result["embedded"] = embedded_rounds(topology, urls, Path(tmp) / "embedded.db", warm, measured)
                one = {f"/node/{pop_name(0)}/metrics": nodes[f"/node/{pop_name(0)}/metrics"]}
                shard = topology.model_copy(update={"tiers": [t for t in topology.tiers if t.name.endswith(pop_name(0))]})
                result["embedded_per_pop_shard"] = embedded_rounds(
                    shard, [fake.url(p) for p in one], Path(tmp) / "shard.db", warm, measured
                )
            if "prometheus" in sources:
                with prometheus(urls, Path(tmp)) as url:
                    time.sleep(6.0 + WINDOW_S + measured * INTERVAL_S)  # first scrape ~5 s after start, then the windows
                    fake.close()  # stop scraping load: the rounds query what is stored
                    end = time.time() - INTERVAL_S
                    instants = [end - (measured - 1 - k) * INTERVAL_S for k in range(measured)]
                    result["prometheus"] = prometheus_rounds(topology, url, Path(tmp) / "prometheus.db", instants)
        finally:
            fake.close()
    for name in ("embedded", "embedded_per_pop_shard", "prometheus"):
        if name in result and result[name]["median"]:
            result[name]["core_share_of_interval"] = result[name]["median"]["total_cpu_s"] / INTERVAL_S
    return result


def markdown(r: dict[str, Any]) -> str:
    e = r["exporter"]
    lines = [
        f"Synthetic deployment: {r['pops']} PoPs x {r['tiers_per_pop']} tiers = {r['slices']:,} slices, {r['replicas']:,} replicas; "
        f"diagnosis interval {r['interval_s']:g} s, window {r['window_s']:g} s, measured process pinned to one core.",
        "",
        "| per node exporter | value |",
        "|---|---:|",
        f"| replicas scraped (recorded vLLM exposition, {e['replica_exposition_series']} series each) | {e['replicas_per_node']} |",
        f"| series exported (engine + network + GPU) | {e['series_per_node']:,} |",
        f"| scrape wall time, median | {e['scrape_wall_s_median'] * 1e3:.1f} ms |",
        f"| scrape CPU time, median | {e['scrape_cpu_s_median'] * 1e3:.1f} ms |",
        "",
        "| diagnosis round | embedded, all slices | prometheus, all slices | embedded, one PoP's slices |",
        "|---|---:|---:|---:|",
    ]
    emb, prom, shard = r.get("embedded"), r.get("prometheus"), r.get("embedded_per_pop_shard")

    def cell(d: dict[str, Any] | None, key: str) -> str:
        if d is None or key not in d["median"]:
            return "-"
        return f"{d['median'][key] * 1e3:.0f} ms (max {d['max'][key] * 1e3:.0f})"

    rows = (
        ("poll (HTTP scrape + parse of the exporters), wall", "poll_wall_s"),
        ("poll, CPU", "poll_cpu_s"),
        ("evaluate snapshots (embedded: own PromQL; prometheus: the queries), wall", "evaluate_wall_s"),
        ("evaluate, CPU", "evaluate_cpu_s"),
        ("classify + store + episodes (one transaction), wall", "ingest_wall_s"),
        ("classify + store + episodes, CPU", "ingest_cpu_s"),
        ("round, wall", "total_wall_s"),
        ("round, CPU time of the diagnosis process", "total_cpu_s"),
    )
    lines += [f"| {label} | {cell(emb, k)} | {cell(prom, k)} | {cell(shard, k)} |" for label, k in rows]
    shares = [f"{d['core_share_of_interval']:.2f}" if d and "core_share_of_interval" in d else "-" for d in (emb, prom, shard)]
    lines.append(f"| CPU share of one core over the {r['interval_s']:g} s interval | {shares[0]} | {shares[1]} | {shares[2]} |")
    fails = [str(d.get("failed_rounds", 0)) if d else "-" for d in (emb, prom, shard)]
    lines.append(f"| failed rounds | {fails[0]} | {fails[1]} | {fails[2]} |")
    if prom is not None:
        lines += [
            "",
            "| PromQL work per round | value |",
            "|---|---:|",
            f"| queries (one per field, all slices in one regex matcher) | {prom['queries_per_round']} |",
            f"| samples touched (Prometheus query stats) | {prom.get('samples_touched_per_round', 0):,} |",
            f"| series in Prometheus's head block | {prom.get('head_series', 0):,.0f} |",
            f"| PromQL text sent | {prom.get('promql_chars_per_round', 0) / 1024:.0f} KiB |",
        ]
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pops", type=int, default=100, help="PoPs (default 100)")
    p.add_argument("--tiers", type=int, default=10, help="tiers per PoP (default 10: 1,000 slices)")
    p.add_argument("--replicas", type=int, default=3, help="replicas per slice (default 3)")
    p.add_argument("--rounds", type=int, default=4, help="measured diagnosis rounds per source, after one window of warm-up")
    p.add_argument("--sources", default="embedded,prometheus", help="comma-separated: embedded, prometheus")
    p.add_argument("--json", metavar="FILE", default=None, help="also write the raw result as JSON")


def run(args: argparse.Namespace) -> int:
    sources = tuple(s.strip() for s in args.sources.split(",") if s.strip())
    result = measure(args.pops, args.tiers, args.replicas, args.rounds, sources)
    print(markdown(result), end="")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0
