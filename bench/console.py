"""Console benchmark: page load and the API cost of one live update at 10 tiers x 20 PoPs.

A synthetic topology (10 tiers, 20 PoPs, 37 WAN links) and 15 minutes of windows per tier (450 at
2 s) go into a SQLite store; the API runs under uvicorn on loopback. Measured:

- the live update: ``GET /v1/console/state?since=<newest>`` after one new window per tier, the
  request every open page makes each scrape interval (median and P95 ms, bytes), against a same-run
  baseline, ``GET /healthz`` (the API's cheapest route: HTTP and routing alone);
- the first load's ``GET /v1/console/state`` (the whole history) and the console's static files;
- with a browser (Debian ``chromium``, headless): navigation to the load event, to the first full
  render (every tier's charts drawn) and one live update's render in the page.

Figures are from this machine; compare the ratios, not the milliseconds, across machines.

    inferslice bench console [--out DIR] [--no-browser] [--updates 60]
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from inferslice import metric_names as mn
from inferslice.actions import Action, ActionKind
from inferslice.service.console.links import StaticLinks
from inferslice.service.console.view import LinkSample
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology, topology_from_dict

REGIMES_PHASES = ("healthy", "queue", "network", "compute")


@dataclass(frozen=True)
class ConsoleBenchSettings:
    tiers: int = 10
    pops: int = 20
    gpus_per_pop: int = 4
    windows_per_tier: int = 450  # 15 min at the 2 s scrape: the console's whole history window
    updates: int = 60  # live updates timed (one new window per tier before each)
    baseline_requests: int = 200


def synthetic_topology(tiers: int, pops: int, gpus_per_pop: int) -> Topology:
    """A star from the gateway plus a ring between the other PoPs; six half-GPU replicas per tier."""
    names = [f"pop{i:02d}" for i in range(pops)]
    links = [{"a": names[0], "b": n, "rtt_ms": 2.0 + 1.0 * i, "capacity_bps": 1e9} for i, n in enumerate(names[1:])]
    links += [{"a": names[i], "b": names[i + 1], "rtt_ms": 4.0 + (i % 4) * 4.0, "capacity_bps": 1e9} for i in range(1, pops - 1)]
    out_tiers = []
    for t in range(tiers):
        slots = []
        for j in range(6):
            k = t * 6 + j
            slots.append(f"{names[k % pops]}/gpu{(k // pops) % gpus_per_pop}")
        out_tiers.append(
            {
                "name": f"tier{t}",
                "title": f"Tier {t}",
                "subnet": str(ipaddress.IPv4Network(f"10.{100 + t}.0.0/24")),
                "vni": 300 + t,
                "gpu_quota": 3.0,
                "cpu_quota": 8,
                "replicas_max": 6,
                "slo_ttft_p99_s": 0.5,
                "placement": slots,
                "client_cap_bps": 5e6 if t % 3 == 1 else None,
            }
        )
    return topology_from_dict(
        {
            "name": "synthetic-10x20",
            "client": {"gateway": names[0]},
            "pops": [{"name": n, "gpus": gpus_per_pop} for n in names],
            "links": links,
            "tiers": out_tiers,
        }
    )


def synthetic_window(tier: str, t: int, ts: float) -> SliceSnapshot:
    """A window whose regime changes every 60 windows, so the charts and verdicts are not flat."""
    phase = REGIMES_PHASES[(t // 60) % len(REGIMES_PHASES)]
    ttft = {"healthy": 0.08, "queue": 2.5, "network": 0.3, "compute": 0.25}[phase]
    tpot = {"healthy": 0.026, "queue": 0.027, "network": 0.2, "compute": 0.09}[phase]
    return SliceSnapshot(
        slice=tier,
        window_end_s=ts,
        window_s=8.0,
        ttft_p50_s=ttft * 0.6,
        ttft_p99_s=ttft,
        tpot_p50_s=tpot * 0.9,
        tpot_p99_s=tpot,
        output_tokens_per_s=400.0 if phase != "network" else 120.0,
        request_rate=4.0,
        link_rx_bps=4.9e6 if phase == "network" else 1.0e6,
        link_cap_bps=5e6 if phase == "network" else None,
        requests_waiting=12.0 if phase == "queue" else 0.0,
        requests_running=6.0,
        replicas=6.0 if phase == "queue" else 2.0,
        replicas_max=6.0,
        gpu_share=0.35 if phase == "compute" else 1.0,
        ref_ttft_p50_s=0.05,
        ref_tpot_p50_s=0.025,
        ref_output_tokens_per_s=400.0,
    )


def _timed(fn: Callable[[], int], n: int) -> tuple[list[float], int]:
    times, size = [], 0
    for _ in range(n):
        start = time.perf_counter()
        size = fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return times, size


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": statistics.median(ordered), "p95_ms": ordered[max(0, int(0.95 * len(ordered)) - 1)], "n": float(len(ordered))}


def run_console_bench(settings: ConsoleBenchSettings, db_path: Path, browser: bool = True) -> dict[str, Any]:
    # imported here: the bench package must not pay for the app at import time
    from inferslice.service.app import create_app
    from inferslice.service.console.server import serve
    from inferslice.service.store import Store

    from .console_browser import measure_page

    topology = synthetic_topology(settings.tiers, settings.pops, settings.gpus_per_pop)
    clock_t = [1_800_000_000.0]
    store = Store(db_path)
    service = create_app(store, topology, clock=lambda: clock_t[0]).state.service
    for t in range(settings.windows_per_tier):
        clock_t[0] += 2.0
        for tier in topology.tier_names:
            service.ingest(synthetic_window(tier, t, clock_t[0]))
    for i, tier in enumerate(topology.tier_names):
        store.put_action(
            Action(ActionKind.SET_REPLICAS, tier, 3, "synthetic", "queue_limited", id=f"bench-{i}"), clock_t[0] - 30, "pending"
        )
        store.put_action(
            Action(ActionKind.SET_CAP, tier, 6e6, "synthetic", "network_limited", id=f"bench-cap-{i}"), clock_t[0] - 90, "applied"
        )
    links = StaticLinks({frozenset((lk.a, lk.b)): LinkSample(rate_bps=1e8, rtt_s=lk.rtt_s) for lk in topology.links}, label="synthetic")

    next_window = [settings.windows_per_tier]

    def add_windows() -> None:
        clock_t[0] += 2.0
        for tier in topology.tier_names:
            service.ingest(synthetic_window(tier, next_window[0], clock_t[0]))
        next_window[0] += 1

    app = create_app(store, topology, clock=lambda: clock_t[0], console_links=links)
    result: dict[str, Any] = {"settings": settings.__dict__, "links": len(topology.links)}
    with serve(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        full = client.get("/v1/console/state")
        full.raise_for_status()
        state = full.json()
        first_times, _ = _timed(lambda: client.get("/v1/console/state").num_bytes_downloaded, 10)
        result["first_load_state"] = {"bytes": full.num_bytes_downloaded, "json_bytes": len(full.content), **_summary(first_times)}
        static = sum(len(client.get(f"/console/static/{p}").content) for p in _static_files())
        result["static_bytes"] = static + len(client.get("/console").content)

        def live() -> int:
            newest = min(max(p["ts"] for p in t["history"]) for t in state["tiers"] if t["history"])
            r = client.get("/v1/console/state", params={"since": newest})
            r.raise_for_status()
            body = r.json()
            for t, new in zip(state["tiers"], body["tiers"], strict=True):
                t["history"] = (t["history"] + new["history"])[-settings.windows_per_tier :]
            live_json[0] = len(r.content)
            return r.num_bytes_downloaded  # on the wire (gzip), as a browser receives it

        live_json = [0]
        served_before = _served(client)
        live_times: list[float] = []
        live_bytes = 0
        for _ in range(settings.updates):
            add_windows()
            times, live_bytes = _timed(live, 1)
            live_times += times
        served = _served(client)
        server_ms = 1000.0 * (served[0] - served_before[0]) / max(1.0, served[1] - served_before[1])
        base_times, _ = _timed(lambda: len(client.get("/healthz").content), settings.baseline_requests)
        result["live_update"] = {"bytes": live_bytes, "json_bytes": live_json[0], "server_mean_ms": server_ms, **_summary(live_times)}
        result["baseline_healthz"] = _summary(base_times)
        result["live_update_vs_healthz"] = result["live_update"]["median_ms"] / result["baseline_healthz"]["median_ms"]
        if browser:
            result["page"] = measure_page(url, add_windows)
    store.close()
    return result


def _served(client: httpx.Client) -> tuple[float, float]:
    """(seconds, requests) the API itself spent in ``GET /v1/console/state`` so far (its own histogram)."""
    total = count = 0.0
    for line in client.get("/metrics").text.splitlines():
        if 'route="/v1/console/state"' in line and line.startswith(mn.API_REQUEST_DURATION):
            if line.startswith(mn.API_REQUEST_DURATION + "_sum"):
                total = float(line.rsplit(" ", 1)[1])
            elif line.startswith(mn.API_REQUEST_DURATION + "_count"):
                count = float(line.rsplit(" ", 1)[1])
    return total, count


def _static_files() -> list[str]:
    from inferslice.service.console.routes import STATIC_DIR

    return [str(p.relative_to(STATIC_DIR)) for p in sorted(STATIC_DIR.rglob("*")) if p.suffix in (".js", ".css")]


def _row(what: str, m: dict[str, Any]) -> str:
    return f"| {what} | {m['median_ms']:.1f} ms | {m['p95_ms']:.1f} ms | {m['bytes']:,} ({m['json_bytes']:,}) |"


def format_report(result: dict[str, Any]) -> str:
    s = result["settings"]
    base = result["baseline_healthz"]
    lines = [
        "# Console benchmark",
        "",
        f"Synthetic topology: {s['tiers']} tiers x {s['pops']} PoPs ({result['links']} WAN links), "
        f"{s['windows_per_tier']} windows per tier (15 min at 2 s) in SQLite, the API under uvicorn on loopback.",
        "",
        "| measurement | median | P95 | bytes on the wire (JSON) |",
        "|---|---|---|---|",
        _row("live update `GET /v1/console/state?since=` (one new window per tier)", result["live_update"]),
        f"| baseline `GET /healthz` (same run) | {base['median_ms']:.2f} ms | {base['p95_ms']:.2f} ms | - |",
        _row("first load `GET /v1/console/state` (15 min of history)", result["first_load_state"]),
        f"| page and static files (HTML, ES modules, CSS, uPlot) | - | - | {result['static_bytes']:,} |",
        "",
        f"Live update / healthz: **{result['live_update_vs_healthz']:.1f}x**. Time the API itself spent per live update "
        f"(its request histogram: build, JSON, gzip): {result['live_update']['server_mean_ms']:.1f} ms mean.",
    ]
    page = result.get("page")
    if page:
        lines += [
            "",
            "In headless chromium (1440x1000):",
            "",
            f"- navigation to the load event: {page['load_event_ms']:.0f} ms",
            f"- to the first full render (topology, {s['tiers']} tier cards, {2 * s['tiers']} charts): {page['first_render_ms']:.0f} ms",
            f"- one live update in the page (fetch + merge + render), median of {page['updates']}: {page['live_update_ms']:.0f} ms",
        ]
    return "\n".join(lines) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=None, help="directory for console.json and console.md")
    parser.add_argument("--no-browser", action="store_true", help="API cost only (no chromium)")
    parser.add_argument("--updates", type=int, default=60, help="live updates timed (default 60)")


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        result = run_console_bench(ConsoleBenchSettings(updates=args.updates), Path(tmp) / "console.db", browser=not args.no_browser)
    report = format_report(result)
    print(report)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "console.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "console.md").write_text(report)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inferslice.bench.console", description=(__doc__ or "").splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
