"""``inferslice api``: serve the diagnosis API with uvicorn, history in SQLite."""

from __future__ import annotations

import argparse
import time

HELP = "run the diagnosis API (FastAPI)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback: the API has no auth)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--db", default="inferslice.db", help="SQLite file for history, references, episodes, alerts")
    parser.add_argument("--topology", default=None, help="topology file (default: the testbed's)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def run(args: argparse.Namespace) -> int:
    import uvicorn  # imported here: the rest of the CLI must not pay for it

    from inferslice.api.app import create_app
    from inferslice.api.store import Store
    from inferslice.topology import load_topology

    topology = load_topology(args.topology)
    store = Store(args.db)
    try:
        app = create_app(store, topology, clock=time.time)
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    finally:
        store.close()
    return 0
