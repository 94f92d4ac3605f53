"""``inferslice api``: serve the diagnosis API with uvicorn, history in SQLite.

With ``--source`` the API also runs the diagnosis loop itself: every ``--interval-s`` it reads
one window per slice from Prometheus (``--source prometheus``) or by scraping the exporters
directly (``--source embedded``, no Prometheus needed) and classifies it.

Mutating endpoints need a bearer token, read from ``--token-file FILE`` or else the environment
variable ``INFERSLICE_API_TOKEN``; without either the API starts read-only (mutations answer 401).
The token is never logged. The operator console is at ``/console`` (docs/console.md).

With ``--control MODE`` the controller runs here too (co-located: it reads the loop's verdicts in
process, the API serves its actions, ``PUT /v1/control/mode`` switches its mode); ``inferslice
control`` runs it in a process of its own that reads the verdicts over HTTP.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

HELP = "run the diagnosis API (FastAPI)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--db", default="inferslice.db", help="SQLite file for history, references, episodes, alerts")
    parser.add_argument("--topology", default=None, help="topology file (default: the testbed's)")
    parser.add_argument("--token-file", default=None, metavar="FILE",
                        help="bearer token for the mutating endpoints (default: env INFERSLICE_API_TOKEN; neither: read-only)")
    parser.add_argument("--control-db", default=None, metavar="FILE",
                        help="the controller's audit log: serve GET /v1/actions?state=... and POST /v1/actions/{id}/approve|reject")
    ctl = parser.add_argument_group("controller in this process (co-located: verdicts in process, not over HTTP)")
    ctl.add_argument("--control", choices=["off", "dry-run", "approve", "auto"], default="off",
                     help="run the control loop here in this mode (needs --control-db; PUT /v1/control/mode switches it)")
    ctl.add_argument("--control-listen", default="127.0.0.1:0", metavar="HOST:PORT", help="the controller's /metrics and /healthz")
    ctl.add_argument("--control-tiers", default="", help="comma-separated tiers under control (default: all)")
    ctl.add_argument("--state-dir", default=None, help="the testbed state directory the controller acts on (default /run/inferslice)")
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
    loop.add_argument("--recorded", action="store_true",
                      help="prometheus: read the snapshot recording rules (three queries a round; the generated rule file has them)")
    shard = parser.add_argument_group("sharded diagnosis (one Kubernetes Lease per PoP group)")
    shard.add_argument("--shard-groups", type=int, default=1, help="PoP groups; >1: only the groups whose Lease this replica holds")
    shard.add_argument("--shard-identity", default=None, help="this replica's name in the Leases (default: $POD_NAME, else the host name)")
    shard.add_argument("--lease-namespace", default="inferslice-system", help="where the groups' Leases live (in-cluster credentials)")
    shard.add_argument("--shard-peer-url", default=None, metavar="TEMPLATE",
                       help="where another replica answers, e.g. http://{identity}.inferslice-api:8080: its slices redirect there")


def run(args: argparse.Namespace) -> int:
    import uvicorn  # imported here: the rest of the CLI must not pay for it
    from fastapi import Depends

    from inferslice.errors import InputError
    from inferslice.service.app import api_app
    from inferslice.service.console.links import PrometheusLinks, PrometheusLinkSettings
    from inferslice.service.controller.api import mount_control, mount_controller
    from inferslice.service.controller.audit import AuditLog
    from inferslice.service.controller.build import ControllerRun
    from inferslice.service.diagnosis import DiagnosisService
    from inferslice.service.http import BearerAuth, load_token
    from inferslice.service.loop import DiagnosisLoop, LoopSettings
    from inferslice.service.sources import SourceSettings, make_source
    from inferslice.service.store import Store
    from inferslice.topology import load_topology

    token = load_token(args.token_file)
    if args.control != "off" and not args.control_db:
        raise InputError("a controller in the API needs its audit trail", "--control-db")
    control_audit = AuditLog(args.control_db) if args.control_db else None
    if token is None:
        print("inferslice api: no --token-file and no INFERSLICE_API_TOKEN: mutating endpoints answer 401", file=sys.stderr)
    topology = load_topology(args.topology)
    store = Store(args.db)
    loop: DiagnosisLoop | None = None
    shards: Any = None  # service.shards.ShardedDiagnosis with --shard-groups > 1
    controller: ControllerRun | None = None
    try:
        service = DiagnosisService(store, topology, clock=time.time)
        # The console's WAN rates and RTTs come from Prometheus whenever the API reads it anyway.
        links = PrometheusLinks(PrometheusLinkSettings(base_url=args.prometheus_url)) if args.source == "prometheus" else None
        app = api_app(service, token=token, console_links=links)
        if control_audit is not None:  # the controller's actions, approvals and rejections
            mount_control(app, control_audit, [Depends(BearerAuth(token))], time.time)
            app.state.control_audit = control_audit  # the console's pending actions and timeline read it
        if args.control != "off" and control_audit is not None:  # co-located: the loop's verdicts in process
            controller = _colocated_controller(args, service, topology, control_audit)
            mount_controller(app, controller.controller, [Depends(BearerAuth(token))])
        if args.source != "none":
            targets = tuple(t.strip() for t in args.targets.split(",") if t.strip())
            settings = SourceSettings(args.source, args.prometheus_url, targets, args.perspective, args.window_s, recorded=args.recorded)
            if args.shard_groups > 1:
                shards = _sharded_loop(args, settings, service, topology)
                app.state.shards = shards
                if args.shard_peer_url:
                    app.state.slice_owner = _owner_url(shards, args.shard_peer_url)
                shards.start()
            else:
                loop = DiagnosisLoop(
                    make_source(settings, topology), service.ingest, LoopSettings(args.interval_s, args.window_s), batch=service.store.batch
                )
                app.state.loop = loop
                loop.start()
        if controller is not None:
            controller.start()
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    finally:
        if controller is not None:
            controller.close()
        if loop is not None:
            loop.stop()
        if shards is not None:
            shards.stop()
        store.close()
    return 0


def _sharded_loop(args: argparse.Namespace, settings: Any, service: Any, topology: Any) -> Any:
    """The diagnosis rounds of the PoP groups whose Lease this replica holds (``service.shards``)."""
    import os
    import socket

    from kubernetes import client, config

    from inferslice.service.lease import KubernetesLeaseClient, LeaseElector, LeaseSettings
    from inferslice.service.loop import LoopSettings
    from inferslice.service.shards import ShardedDiagnosis, ShardSettings, describe, groups_of, lease_name, ordinal
    from inferslice.service.sources import make_source

    identity = args.shard_identity or os.environ.get("POD_NAME") or socket.gethostname()
    config.load_incluster_config()  # type: ignore[no-untyped-call]
    api = client.ApiClient()
    api.configuration.retries = False  # a request timeout is the whole wait (the elector's rule)
    lease_settings = LeaseSettings()
    groups = groups_of(topology, args.shard_groups)
    mine = ordinal(identity)
    shard_settings = ShardSettings(args.shard_groups, None if mine is None else mine % args.shard_groups, lease_settings.lease_duration_s)
    print(f"inferslice api: {identity}: diagnosis groups {describe(groups)}; competing for "
          f"{'all' if mine is None else mine % args.shard_groups} first", file=sys.stderr, flush=True)  # fmt: skip
    return ShardedDiagnosis(
        groups,
        lambda g: make_source(settings, topology, only=g.slices, pops=g.pops),
        service.ingest,
        lambda k: LeaseElector(KubernetesLeaseClient(api, args.lease_namespace, lease_name(k)), identity, lease_settings),
        shard_settings,
        LoopSettings(args.interval_s, args.window_s),
        batch=service.store.batch,
    )


def _owner_url(shards: Any, template: str) -> Any:
    """slice -> the base URL of the replica diagnosing it, when that is another one (None: this one, or unknown)."""

    def owner(slice_name: str) -> str | None:
        group = shards.group_of_slice(slice_name)
        if group is None or group.index in shards.held():
            return None
        holder = shards.holder_of(group.index)
        return template.format(identity=holder).rstrip("/") if holder else None

    return owner


def _colocated_controller(args: argparse.Namespace, service: Any, topology: Any, audit: Any) -> Any:
    """The controller next to the diagnosis loop: its verdicts are the service's latest, as objects."""
    from pathlib import Path

    from inferslice.common.registry import DEFAULT_STATE_DIR
    from inferslice.service.controller import Mode
    from inferslice.service.controller.build import ControllerSettings, make_controller
    from inferslice.service.controller.source import InProcessSource

    tiers = tuple(t.strip() for t in args.control_tiers.split(",") if t.strip())
    settings = ControllerSettings(
        mode=Mode(args.control),
        audit_path=Path(args.control_db),
        state_dir=Path(args.state_dir) if args.state_dir else DEFAULT_STATE_DIR,
        tiers=tiers,
        interval_s=args.interval_s,
    )
    run = make_controller(settings, topology, InProcessSource(service, tiers or topology.tier_names), audit=audit)
    host, _, port = args.control_listen.rpartition(":")
    bound = run.serve(host or "127.0.0.1", int(port or 0))
    print(f"inferslice api: controller in {args.control} mode, audit {args.control_db}, /metrics on {host or '127.0.0.1'}:{bound}",
          file=sys.stderr, flush=True)  # fmt: skip
    return run
