"""``inferslice control``: the control loop against the running testbed, acting on the diagnosis API's verdicts.

    inferslice control --mode auto|approve|dry-run [--api URL] [--audit FILE] [--state-dir DIR]
                       [--interval-s 2] [--listen 127.0.0.1:9480] [--topology FILE] [--tiers a,b]

auto applies what the guardrails allow; approve records actions as pending until an operator
approves them (``POST /v1/actions/{id}/approve`` on an API started with ``--control-db`` naming the
same audit file); dry-run computes and records, applies nothing. The audit log (SQLite) is
crash-safe: a restarted controller finishes what it had recorded and never applies an action twice.
With ``--backend kubernetes`` the audit trail is the SliceAction objects instead (no volume needed;
approve with ``kubectl patch``), see docs/kubernetes.md.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from pathlib import Path
from typing import Any

HELP = "the control loop: scale replicas, raise caps within each tier's guarantees (auto | approve | dry-run)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=["auto", "approve", "dry-run"], default="dry-run", help="default dry-run: nothing is applied")
    parser.add_argument("--api", default="http://127.0.0.1:8080", help="the diagnosis API the verdicts come from")
    parser.add_argument(
        "--audit", type=Path, default=Path("inferslice-control.db"), help="SQLite audit log (actions, why, approvals, outcomes)"
    )
    parser.add_argument("--state-dir", type=Path, default=None, help="testbed state directory (default /run/inferslice)")
    parser.add_argument("--topology", default=None, help="tiers file (default: the testbed's)")
    parser.add_argument("--tiers", default="", help="comma-separated tiers under control (default: all)")
    parser.add_argument("--interval-s", type=float, default=None, help="seconds between steps (default: the topology's scrape interval)")
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT for /metrics and /healthz (port 0: any free port)")
    parser.add_argument("--steps", type=int, default=0, help="stop after N steps (0: run until SIGINT/SIGTERM)")
    parser.add_argument(
        "--backend",
        choices=["testbed", "kubernetes"],
        default="testbed",
        help="what the actions change: the local testbed, or KubeRay/Kube-OVN objects (in-cluster ServiceAccount)",
    )
    parser.add_argument(
        "--lease-namespace",
        default=None,
        help="kubernetes: act only while holding the Lease inferslice-controller in this namespace (leader election)",
    )
    parser.add_argument(
        "--actions-namespace",
        default=None,
        help="kubernetes: the namespace of the SliceAction objects, the audit trail (default: --lease-namespace, else $POD_NAMESPACE);"
        " --audit is not used then",
    )


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from inferslice.common.registry import DEFAULT_STATE_DIR
    from inferslice.control.actuators.testbed import TestbedActuator
    from inferslice.control.settings import tier_policies
    from inferslice.errors import InputError
    from inferslice.service.control_audit import AuditLog
    from inferslice.service.control_loop import ControlLoop
    from inferslice.service.control_source import ApiSource
    from inferslice.service.controller import Controller, Mode
    from inferslice.topology import load_topology

    top = load_topology(args.topology)
    policies = tier_policies(top)
    chosen = [t for t in args.tiers.split(",") if t.strip()]
    unknown = [t for t in chosen if t not in policies]
    if unknown:
        raise InputError(f"unknown tiers {unknown}", "--tiers")
    if chosen:
        policies = {t: p if t in chosen else dataclasses.replace(p, controlled=False) for t, p in policies.items()}
    host, _, port = args.listen.rpartition(":")
    elector = None
    audit: Any
    trail = str(args.audit)
    if args.backend == "kubernetes":
        import os
        import socket

        from kubernetes import client, config

        from inferslice.control.actuators.kubernetes import KubernetesActuator
        from inferslice.control.actuators.kubernetes_audit import SliceActionStore
        from inferslice.control.actuators.kubernetes_lease import KubernetesLeaseClient, LeaseElector
        from inferslice.service.control_audit_cr import SliceActionAuditLog

        actions_ns = args.actions_namespace or args.lease_namespace or os.environ.get("POD_NAMESPACE")
        if not actions_ns:
            raise InputError("the SliceAction audit trail needs a namespace", "--actions-namespace")
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        cfg = client.Configuration.get_default_copy()
        cfg.retries = False  # urllib3 would retry a timed-out read 3 times: a request timeout must be the whole wait
        api_client = client.ApiClient(cfg)
        identity = os.environ.get("POD_NAME") or socket.gethostname()
        if args.lease_namespace:
            elector = LeaseElector(KubernetesLeaseClient(api_client, args.lease_namespace, "inferslice-controller"), identity)
        # With a Lease, every write of the actuator and the trail re-checks it and carries the term's fencing token.
        actuator: Any = KubernetesActuator(top, api_client, leadership=elector)
        audit = SliceActionAuditLog(SliceActionStore(api_client, actions_ns), identity, leadership=elector)
        trail = f"sliceactions in {actions_ns}"
    else:
        actuator = TestbedActuator(args.state_dir or DEFAULT_STATE_DIR)
        audit = AuditLog(args.audit)
    ctl = Controller(
        top,
        policies,
        actuator,
        audit,
        ApiSource(args.api, list(policies)),
        clock=time.time,
        mode=Mode(args.mode),
        leadership=elector,
    )
    loop = ControlLoop(ctl, args.interval_s or top.timing.scrape_interval_s)
    bound = loop.serve(host or "127.0.0.1", int(port or 0))
    print(f"inferslice control: mode {args.mode}, audit {trail}, /metrics and /healthz on {host or '127.0.0.1'}:{bound}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if args.steps:
            ctl.drive()
            for _ in range(args.steps):
                loop.step()
        elif elector is not None:
            _run_as_leader(loop, elector, stop)
        else:
            loop.run_forever(stop)
    finally:
        loop.close()
    return 0


def _run_as_leader(loop: Any, elector: Any, stop: threading.Event) -> None:
    """Step only while holding the Lease. The elector renews in its own thread (a slow step never
    delays a renew); each step starts from ``elector.token()`` and every write inside it re-checks
    (the controller and actuator hold the elector). A new term first takes over what was recorded
    (``resume``: the states the other replica left in the trail, then what it left to apply). On
    exit the Lease is released, so the other replica takes over at its next round."""
    from inferslice.errors import InferSliceError

    lease_stop = threading.Event()
    renewer = threading.Thread(target=elector.run, args=(lease_stop,), name="lease-elector", daemon=True)
    renewer.start()
    term = None
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            token = elector.token()
            if token is None:
                term = None
            else:
                try:
                    if token != term:
                        loop.controller.resume()
                        term = token
                    loop.step()
                except InferSliceError as err:  # NotLeader mid-step, a backend failure: the next step decides again
                    loop.controller.last_error = str(err)
            stop.wait(max(0.0, min(loop.interval_s, elector.settings.retry_period_s) - (time.monotonic() - t0)))
    finally:
        lease_stop.set()
        renewer.join(timeout=elector.settings.timeout_s * 2 + 1)
