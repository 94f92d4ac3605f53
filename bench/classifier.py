"""Benchmarks of the diagnosis path, reported as ratios against a baseline run in the same process.

1. Classifier throughput on one core: ``json.loads`` + ``snapshot_from_dict`` + ``classify`` +
   ``json.dumps`` (the ``inferslice diagnose`` path) against a baseline of just ``json.loads`` +
   ``snapshot_from_dict`` on the same lines.
2. API latency (optional, ``api=True``): an open-loop client (``httpload``) sends a fixed rate (half
   ``POST /v1/snapshots``, half ``GET /v1/slices/{slice}``, with the bearer token) to a uvicorn
   server on 127.0.0.1 in a child process (``python -m inferslice.bench.classifier --serve PORT
   --db FILE``), and reports p50/p99/max latency and the rate achieved; then each route alone at
   half the rate, for the server's CPU per request by route (from /proc). Any answer but a 2xx
   fails the benchmark (``BenchmarkFailed``): latencies of refusals say nothing about the API.

Numbers depend on the machine and its load; nothing asserts them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inferslice.bottleneck import classify
from inferslice.common.ports import free_port
from inferslice.errors import PermanentError
from inferslice.snapshot import snapshot_from_dict

from . import httpload

SLICES = ("free", "standard", "premium")


def make_lines(n: int, seed: int = 7) -> list[str]:
    """Snapshots spread over the regimes of the brief, with fields randomly dropped."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        kind = rng.choice(("healthy", "queue", "network", "compute"))
        doc: dict[str, Any] = {"id": i, "slice": rng.choice(SLICES), "slo_ttft_p99_s": 0.5, "ref_tpot_p50_s": 0.025, "ref_ttft_p50_s": 0.05}
        doc["link_cap_bps"] = 5e5 if kind == "network" else 1e7
        doc["link_rx_bps"] = doc["link_cap_bps"] * (rng.uniform(0.9, 1.0) if kind == "network" else rng.uniform(0.01, 0.5))
        doc["ttft_p99_s"] = rng.uniform(2, 13) if kind in ("queue", "network") else rng.uniform(0.05, 0.3)
        doc["ttft_p50_s"] = doc["ttft_p99_s"] / 3
        doc["tpot_p50_s"] = rng.uniform(0.1, 0.2) if kind == "network" else (0.06 if kind == "compute" else rng.uniform(0.024, 0.027))
        doc["tpot_p99_s"] = doc["tpot_p50_s"] * 1.3
        doc["output_tokens_per_s"] = rng.uniform(200, 400)
        doc["ref_output_tokens_per_s"] = 370.0
        doc["requests_waiting"] = rng.randint(1, 8) if kind == "queue" else 0
        doc["gpu_share"] = 0.4 if kind == "compute" else 1.0
        doc["gpu_utilization"] = rng.uniform(0.3, 1.0)
        for key in list(doc):
            if key not in ("id", "slice") and rng.random() < 0.15:
                del doc[key]
        lines.append(json.dumps(doc))
    return lines


def _best_of(repeats: int, fn: Any) -> float:
    """Best CPU time of this process over ``repeats`` runs: the classifier is single-threaded, and CPU
    time leaves out what other processes on a shared machine take from it (wall time does not)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def bench_classifier(n: int, repeats: int = 5) -> dict[str, float]:
    lines = make_lines(n)

    def parse_only() -> None:
        for line in lines:
            snapshot_from_dict(json.loads(line))

    def full() -> None:
        for line in lines:
            json.dumps(classify(snapshot_from_dict(json.loads(line))).to_dict())

    snaps = [snapshot_from_dict(json.loads(line)) for line in lines]

    def classify_only() -> None:
        for s in snaps:
            classify(s)

    # Interleaved, best of each: on a shared machine the load moves between consecutive runs, and a
    # ratio of two minima taken minutes apart would measure the load, not the classifier.
    t_parse = t_full = t_classify = float("inf")
    for _ in range(repeats):
        t_parse = min(t_parse, _best_of(1, parse_only))
        t_classify = min(t_classify, _best_of(1, classify_only))
        t_full = min(t_full, _best_of(1, full))
    return {
        "snapshots": float(n),
        "parse_per_s": n / t_parse,
        "classify_only_per_s": n / t_classify,
        "diagnose_line_per_s": n / t_full,
        "classify_over_parse_cost": t_classify / t_parse,
        "diagnose_line_over_parse_cost": t_full / t_parse,
    }


# -- API latency -----------------------------------------------------------------------------------

TOKEN_ENV = "INFERSLICE_API_TOKEN"  # how the child server gets the bench's token (service.http reads the same)
ROUTES = ("POST /v1/snapshots", "GET /v1/slices/{slice}")


class BenchmarkFailed(PermanentError):
    """The API answered a request with something other than 2xx: the latencies would measure refusals."""


GC_OUT_ENV = "INFERSLICE_BENCH_GC_OUT"  # the child writes its cyclic collector's pauses there on exit


class GcPauses:
    """Per generation: collections, total and longest pause (``gc.callbacks``: wall time of each run).

    A stall that reaches both routes alike with the p50 unchanged is what a full (generation 2)
    collection of a heap of long-lived objects looks like: the bench reports them beside the p99."""

    def __init__(self) -> None:
        self.stats: dict[int, dict[str, float]] = {g: {"collections": 0, "total_ms": 0.0, "max_ms": 0.0} for g in range(3)}
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        ms = 1000 * (time.perf_counter() - self._start)
        st = self.stats[info["generation"]]
        st["collections"] += 1
        st["total_ms"] += ms
        st["max_ms"] = max(st["max_ms"], ms)

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {f"gen{g}": {k: round(v, 3) for k, v in st.items()} for g, st in self.stats.items()}


def serve(port: int, db: str) -> None:
    """Child process: the real app on uvicorn, as ``inferslice api`` runs it (token from the environment)."""
    import gc

    import uvicorn

    from inferslice.service.app import create_app
    from inferslice.service.http import load_token
    from inferslice.service.store import Store
    from inferslice.topology import load_topology

    pauses = GcPauses()
    gc.callbacks.append(pauses)
    store = Store(db)
    app = create_app(store, load_topology(), token=load_token(None))
    out = os.environ.get(GC_OUT_ENV)

    def write_pauses() -> None:  # at lifespan shutdown: uvicorn re-raises SIGTERM once it has shut down
        if out:
            Path(out).write_text(json.dumps({"pauses": pauses.as_dict(), "objects_tracked": len(gc.get_objects())}))

    app.router.on_shutdown.append(write_pauses)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _requests(port: int, token: str, lines: list[str], routes: tuple[str, ...]) -> Callable[[int], httpload.Request]:
    """Request ``i`` of a phase: the routes in turn, snapshots from ``lines``, slices in turn."""
    host = f"127.0.0.1:{port}"
    auth = {"authorization": f"Bearer {token}"}
    posts = [httpload.encode("POST", "/v1/snapshots", host, {**auth, "content-type": "application/json"}, line.encode()) for line in lines]
    gets = [httpload.encode("GET", f"/v1/slices/{name}", host, auth) for name in SLICES]

    def request(i: int) -> httpload.Request:
        route = routes[i % len(routes)]
        return route, posts[i % len(posts)] if route == ROUTES[0] else gets[i % len(gets)]

    return request


def _load(port: int, token: str, rate: float, duration_s: float, lines: list[str], routes: tuple[str, ...]) -> httpload.Outcome:
    return asyncio.run(httpload.run("127.0.0.1", port, rate, duration_s, _requests(port, token, lines, routes)))


def _cpu_s(pid: int) -> float:
    """User+system CPU seconds of a process (Linux /proc), to tell our cost from the machine's contention."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_ready(base: str, timeout_s: float = 20.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("API did not become ready")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _refusals(name: str, phase: httpload.Outcome) -> list[str]:
    return [f"{name}: {route} answered {status} x{n}" for route, counts in phase.statuses.items() for status, n in counts.items()
            if not status.startswith("2")]  # fmt: skip


def bench_api(rate: float, duration_s: float) -> dict[str, Any]:
    """The half-write mix at ``rate``, then each route alone at its share of it (server CPU per request by
    route). ``BenchmarkFailed`` if any request got anything but a 2xx."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    token = secrets.token_hex(16)
    lines = [line.replace('"id": ', '"window_end_s": null, "id": ', 1) for line in make_lines(2000, seed=11)]
    load_before = os.getloadavg()
    phases: dict[str, tuple[httpload.Outcome, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        gc_out = Path(tmp) / "gc.json"
        env = {**os.environ, TOKEN_ENV: token, GC_OUT_ENV: str(gc_out)}
        proc = subprocess.Popen([sys.executable, "-m", __name__, "--serve", str(port), "--db", str(Path(tmp) / "bench.db")], env=env)
        try:
            _wait_ready(base)
            # A short warm-up: the first requests pay for imports, the route table and SQLite's cache.
            _load(port, token, rate, 1.0, lines, ROUTES)
            for name, phase_rate, routes in (("mix", rate, ROUTES), (ROUTES[0], rate / 2, ROUTES[:1]), (ROUTES[1], rate / 2, ROUTES[1:])):
                cpu0 = _cpu_s(proc.pid)
                phase = _load(port, token, phase_rate, duration_s, lines, routes)
                phases[name] = (phase, _cpu_s(proc.pid) - cpu0)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        server_gc = json.loads(gc_out.read_text()) if gc_out.exists() else None
    refused = [msg for name, (phase, _) in phases.items() for msg in _refusals(name, phase)]
    if refused:
        raise BenchmarkFailed("the API refused requests, so its latencies are not the API's: " + "; ".join(refused))
    mix, mix_cpu = phases["mix"]
    every = [x for values in mix.latencies.values() for x in values]
    per_route = {}
    for route in ROUTES:
        alone, cpu = phases[route]
        n = len(alone.latencies[route])
        per_route[route] = {
            "p50_ms": _pct(mix.latencies[route], 0.5),
            "p99_ms": _pct(mix.latencies[route], 0.99),
            "server_cpu_ms_per_request": 1000 * cpu / n,
            "alone_p99_ms": _pct(alone.latencies[route], 0.99),
            "alone_rate_per_s": alone.achieved_per_s,
        }
    return {
        "target_rate_per_s": rate,
        "achieved_rate_per_s": mix.achieved_per_s,
        "duration_s": duration_s,
        "requests": len(every),
        "non_2xx": 0,
        "p50_ms": _pct(every, 0.5),
        "p99_ms": _pct(every, 0.99),
        "max_ms": 1000 * max(every),
        "server_cpu_ms_per_request": 1000 * mix_cpu / len(every),
        "server_cpu_share_of_one_core": mix_cpu / duration_s,
        "routes": per_route,
        "client_send_lag_p99_ms": _pct(mix.send_lags, 0.99),  # the client's own lag behind its schedule
        "client_send_lag_max_ms": 1000 * max(mix.send_lags, default=0.0),
        "server_gc": server_gc,  # the cyclic collector's pauses over the whole run (warm-up and the three phases)
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def run(n: int = 20000, api: bool = False, rate: float = 200.0, duration_s: float = 10.0) -> dict[str, Any]:
    result: dict[str, Any] = {"benchmark": "classifier", "baseline": "parse_only", "classifier": bench_classifier(n)}
    if api:
        result["api"] = bench_api(rate, duration_s)
    return result


def markdown(result: dict[str, Any]) -> str:
    c = result["classifier"]
    lines = [
        f"Classifier, {c['snapshots']:.0f} snapshots, one core, best of 3 (baseline: json.loads + snapshot_from_dict):",
        "",
        "| path | lines/s | cost vs baseline |",
        "|---|---:|---:|",
        f"| parse only (baseline) | {c['parse_per_s']:,.0f} | 1.00 |",
        f"| classify only | {c['classify_only_per_s']:,.0f} | {c['classify_over_parse_cost']:.2f} |",
        f"| diagnose line (parse + classify + dumps) | {c['diagnose_line_per_s']:,.0f} | {c['diagnose_line_over_parse_cost']:.2f} |",
    ]
    api = result.get("api")
    if api:
        la, lb = api["load_average_before"], api["load_average_after"]
        lines += [
            "",
            f"API on uvicorn (child process; the open-loop client in this one), {api['target_rate_per_s']:.0f} req/s for "
            f"{api['duration_s']:.0f} s, half POST /v1/snapshots, half GET /v1/slices/{{slice}}, every answer 2xx; "
            f"load average {la[0]:.2f} before, {lb[0]:.2f} after:",
            "",
            "| route | p50 | p99 | server CPU per request (route alone at half the rate) |",
            "|---|---:|---:|---:|",
            f"| both | {api['p50_ms']:.1f} ms | **{api['p99_ms']:.1f} ms** | {api['server_cpu_ms_per_request']:.2f} ms (the mix) |",
        ]
        for route, r in api["routes"].items():
            lines.append(f"| {route} | {r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms | {r['server_cpu_ms_per_request']:.2f} ms |")
        lines += [
            "",
            f"Achieved {api['achieved_rate_per_s']:.0f} req/s; max {api['max_ms']:.0f} ms; "
            f"server CPU {api['server_cpu_share_of_one_core']:.2f} of one core.",
        ]
        if "client_send_lag_p99_ms" in api:
            lines.append(f"Client lag behind its schedule (not the server's): p99 {api['client_send_lag_p99_ms']:.1f} ms, "
                         f"max {api['client_send_lag_max_ms']:.0f} ms.")  # fmt: skip
        gcs = (api.get("server_gc") or {}).get("pauses")
        if gcs:
            lines.append("Server cyclic GC over the run: " + "; ".join(
                f"{g} {st['collections']:.0f} runs, longest {st['max_ms']:.1f} ms" for g, st in gcs.items()) + ".")  # fmt: skip
    return "\n".join(lines) + "\n"


def _serve_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="API benchmark server (child process)")
    parser.add_argument("--serve", type=int, required=True)
    parser.add_argument("--db", required=True)
    args = parser.parse_args(argv)
    serve(args.serve, args.db)
    return 0


if __name__ == "__main__":
    sys.exit(_serve_main())
