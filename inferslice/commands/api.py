"""``inferslice api``: serve the diagnosis API with uvicorn, history in SQLite.

With ``--source`` the API also runs the diagnosis loop itself: every ``--interval-s`` it reads
one window per slice from Prometheus (``--source prometheus``) or by scraping the exporters
directly (``--source embedded``, no Prometheus needed) and classifies it.
"""

from __future__ import annotations

import argparse
import time

from inferslice.errors import InputError

HELP = "run the diagnosis API (FastAPI)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback: the API has no auth)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--db", default="inferslice.db", help="SQLite file for history, references, episodes, alerts")
    parser.add_argument("--topology", default=None, help="topology file (default: the testbed's)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    loop = parser.add_argument_group("diagnosis loop")
    loop.add_argument("--source", choices=["none", "prometheus", "embedded"], default="none",
                      help="where windows come from (none: only POSTed snapshots)")
    loop.add_argument("--prometheus-url", default="http://127.0.0.1:9090")
    loop.add_argument("--targets", default="", help="embedded source: comma-separated /metrics URLs (exporter, load generator)")
    loop.add_argument("--perspective", choices=["engine", "client"], default="engine",
                      help="TTFT/TPOT from the engines' histograms or the clients' (network limits show only at the client)")
    loop.add_argument("--interval-s", type=float, default=2.0)
    loop.add_argument("--window-s", type=float, default=8.0)


def run(args: argparse.Namespace) -> int:
    import uvicorn  # imported here: the rest of the CLI must not pay for it

    from inferslice.api.app import create_app
    from inferslice.api.loop import DiagnosisLoop, LoopSettings
    from inferslice.api.store import Store
    from inferslice.collectors import (
        EmbeddedSettings,
        EmbeddedSource,
        FieldSettings,
        MetricSource,
        PrometheusSettings,
        PrometheusSource,
        slices_from_topology,
    )
    from inferslice.topology import load_topology

    topology = load_topology(args.topology)
    store = Store(args.db)
    loop: DiagnosisLoop | None = None
    try:
        app = create_app(store, topology, clock=time.time)
        if args.source != "none":
            fields = FieldSettings(perspective=args.perspective)
            slices = slices_from_topology(topology)
            source: MetricSource
            if args.source == "prometheus":
                source = PrometheusSource(slices, PrometheusSettings(base_url=args.prometheus_url, window_s=args.window_s), fields)
            else:
                targets = [t.strip() for t in args.targets.split(",") if t.strip()]
                if not targets:
                    raise InputError("the embedded source needs --targets", "--targets")
                source = EmbeddedSource(targets, slices, EmbeddedSettings(window_s=args.window_s), fields)
            loop = DiagnosisLoop(source, app.state.service.ingest, LoopSettings(args.interval_s, args.window_s))
            app.state.loop = loop
            loop.start()
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    finally:
        if loop is not None:
            loop.stop()
        store.close()
    return 0
