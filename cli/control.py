"""``inferslice control``: the control loop against the running testbed, acting on the diagnosis API's verdicts.

    inferslice control --mode auto|approve|dry-run [--api URL] [--audit FILE] [--state-dir DIR]
                       [--interval-s 2] [--listen 127.0.0.1:9480] [--topology FILE] [--tiers a,b]

auto applies what the guardrails allow; approve records actions as pending until an operator
approves them (``POST /v1/actions/{id}/approve`` on an API started with ``--control-db`` naming the
same audit file); dry-run computes and records, applies nothing. The audit log (SQLite) is
crash-safe: a restarted controller finishes what it had recorded and never applies an action twice.
With ``--backend kubernetes`` the audit trail is the SliceAction objects instead (no volume needed;
approve with ``kubectl patch``), see docs/kubernetes.md. The controller is built by
``service.controller.build.make_controller``; co-located with the API it runs inside ``inferslice api``
(``--control MODE``) and reads its verdicts in process instead.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

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
    from inferslice.common.registry import DEFAULT_STATE_DIR
    from inferslice.service.controller import Mode
    from inferslice.service.controller.build import ControllerSettings, make_controller
    from inferslice.topology import load_topology

    top = load_topology(args.topology)
    settings = ControllerSettings(
        mode=Mode(args.mode),
        backend=args.backend,
        api_url=args.api,
        audit_path=args.audit,
        state_dir=args.state_dir or DEFAULT_STATE_DIR,
        tiers=tuple(t.strip() for t in args.tiers.split(",") if t.strip()),
        interval_s=args.interval_s,
        lease_namespace=args.lease_namespace,
        actions_namespace=args.actions_namespace,
    )
    built = make_controller(settings, top)
    host, _, port = args.listen.rpartition(":")
    bound = built.serve(host or "127.0.0.1", int(port or 0))
    print(f"inferslice control: mode {args.mode}, audit {built.trail}, /metrics and /healthz on {host or '127.0.0.1'}:{bound}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if args.steps:
            built.controller.drive()
            for _ in range(args.steps):
                built.loop.step()
        else:
            built.run_forever(stop)
    finally:
        built.close()
    return 0
