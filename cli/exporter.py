"""``inferslice exporter``: serve every configured exporter on one /metrics (and /healthz)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from http.server import ThreadingHTTPServer
from types import FrameType

from prometheus_client import CollectorRegistry

from inferslice.errors import ConfigError
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.config import build_collector, default_config, load_config
from inferslice.exporters.http import metrics_handler
from inferslice.exporters.text import render_registry

HELP = "serve the exporters' /metrics (or print one exposition with --once)"
DEFAULT_PORT = 9470  # clear of Prometheus (9090), node-exporter (9100) and OTel's 9464


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="exporter config YAML (sections: topology, registry, network, gpu, engine, requests)")
    parser.add_argument("--registry", help="testbed registry directory; without --config, export everything it lists")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to serve /metrics on (default {DEFAULT_PORT})")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--once", action="store_true", help="print one exposition to stdout and exit")


def _close(collector: GuardedCollector) -> None:
    for source in collector.sources:
        close = getattr(source, "close", None)
        if callable(close):
            close()


def run(args: argparse.Namespace) -> int:
    if args.config:
        cfg = load_config(args.config)
        if args.registry:
            cfg = type(cfg)(topology_path=cfg.topology_path, registry_path=args.registry, sections=cfg.sections)
    elif args.registry:
        cfg = default_config(args.registry)
    else:
        raise ConfigError("give --config FILE or --registry DIR")
    collector = build_collector(cfg)
    registry = CollectorRegistry()
    registry.register(collector)
    try:
        if args.once:
            sys.stdout.write(render_registry(registry).decode("utf-8"))
            sys.stdout.flush()
            return 0
        server = ThreadingHTTPServer((args.host, args.port), metrics_handler(registry))
        server.daemon_threads = True

        def stop(signum: int, frame: FrameType | None) -> None:
            threading.Thread(target=server.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop)
        print(f"inferslice exporter: http://{args.host}:{server.server_address[1]}/metrics", file=sys.stderr, flush=True)
        try:
            server.serve_forever()
        finally:
            server.server_close()
        return 0
    finally:
        _close(collector)
