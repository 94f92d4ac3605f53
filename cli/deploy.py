"""``inferslice deploy``: Kubernetes manifests from the tiers file, and the exporter's two sidecars.

inferslice deploy render --tiers FILE --out DIR     the Kustomize tree (base + overlays)
inferslice deploy check DIR                         validate a rendered tree offline (schemas, policy)
inferslice deploy pods-sync --node N --out FILE     (in-cluster) keep this node's pods in a file
inferslice deploy ovsdb-proxy --listen S --upstream S   (on a node) read-only OVSDB for the non-root exporter
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from inferslice.errors import ConfigError
from inferslice.topology import default_topology_path, topology_from_yaml

HELP = "Kubernetes: render the Kustomize tree from the tiers file, check it, the exporter's sidecars"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="deploy_command", metavar="SUBCOMMAND", required=True)
    r = sub.add_parser("render", help="write base/ and overlays/ for a tiers file")
    r.add_argument("--tiers", default=None, help="tiers file (default: testbed/topology.yaml)")
    r.add_argument("--out", required=True, type=Path, help="output directory (its base/ and overlays/ are replaced)")
    c = sub.add_parser("check", help="validate every object of a rendered tree (CRD schemas, built-in kinds, policy)")
    c.add_argument("dir", type=Path)
    p = sub.add_parser("pods-sync", help="write this node's pods (kubectl get pods -o json) for the exporter")
    p.add_argument("--node", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--interval-s", type=float, default=5.0)
    o = sub.add_parser("ovsdb-proxy", help="serve OVSDB read-only (selects) on a socket the non-root exporter can open")
    o.add_argument("--listen", required=True, type=Path, help="the socket to create (in a volume shared with the exporter)")
    o.add_argument("--upstream", type=Path, default=Path("/var/run/openvswitch/db.sock"), help="OVSDB's own socket")


def _render(args: argparse.Namespace) -> int:
    from inferslice.deploy import render

    path = Path(args.tiers) if args.tiers else default_topology_path()
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"cannot read tiers file {path}: {err.strerror}") from None
    written = render.write(render.render(topology_from_yaml(text), text), args.out)
    print(f"wrote {len(written)} files under {args.out} (kubectl kustomize {args.out}/overlays/production)")
    return 0


def _check(args: argparse.Namespace) -> int:
    from inferslice.deploy import validate

    problems = validate.check_tree(args.dir)
    for line in problems:
        print(line)
    print(f"{len(problems)} problems" if problems else "ok")
    return 1 if problems else 0


def _pods_sync(args: argparse.Namespace) -> int:
    from inferslice.deploy import podsync

    logging.basicConfig(level=logging.INFO)
    podsync.run(podsync.kubernetes_lister(), args.node, args.out, args.interval_s)
    return 0


def _ovsdb_proxy(args: argparse.Namespace) -> int:
    import signal
    import threading

    from inferslice.deploy.ovsdb_proxy import OvsdbProxy

    logging.basicConfig(level=logging.INFO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    OvsdbProxy(args.listen, args.upstream).serve_forever(stop)
    return 0


def run(args: argparse.Namespace) -> int:
    handlers = {"render": _render, "check": _check, "pods-sync": _pods_sync, "ovsdb-proxy": _ovsdb_proxy}
    return handlers[args.deploy_command](args)
