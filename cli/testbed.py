"""``inferslice testbed``: the local netns testbed (up | down | status | cap).

Sub-subcommands are a table of handlers so that more (``run SCENARIO``, ``replicas``, ``share``)
plug in beside these without touching the ones here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inferslice.cli.testbed_move import add_arguments as move_args
from inferslice.cli.testbed_move import run as move_run
from inferslice.cli.testbed_wan import add_arguments as wan_args
from inferslice.cli.testbed_wan import run as wan_run
from inferslice.common.registry import DEFAULT_STATE_DIR
from inferslice.errors import InputError

HELP = "local testbed: up | down | status | run SCENARIO | cap | replicas | share | move | wan"

Handler = Callable[[argparse.Namespace], int]
# name -> (help, add_arguments, run); the lead adds `run`, `replicas`, `share` here.
HANDLERS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


def _state_dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help=f"state directory (default {DEFAULT_STATE_DIR})")


def _up_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", default=None, help="topology YAML (default: testbed/topology.yaml)")
    _state_dir_arg(p)
    p.add_argument("--no-services", action="store_true", help="network only: no engine hosts, no serving fronts")
    p.add_argument("--engine", action="append", default=[], metavar="ENGINE|TIER=ENGINE",
                   help="emulator (default) or vllm, for every tier or one (repeatable): --engine free=vllm")
    p.add_argument("--vllm-venv", type=Path, default=None,
                   help="the vLLM venv of testbed/vllm/install_cpu.sh (default $INFERSLICE_VLLM_VENV or ./.venv-vllm)")
    p.add_argument("--vllm-max-num-seqs", type=int, default=4, help="real vLLM's --max-num-seqs (default 4)")
    p.add_argument("--serving", action="append", default=[], metavar="SERVING|TIER=SERVING",
                   help="front (default: a TierFront) or ray (a real Ray Serve application; the ray extra), "
                        "for every tier or one (repeatable): --serving premium=ray")


def _up(args: argparse.Namespace) -> int:
    from inferslice.testbed.net import up
    from inferslice.testbed.net.lifecycle import READY_TIMEOUT_S, ServiceFactory
    from inferslice.topology import load_topology

    factory: ServiceFactory | None = None
    ready_timeout_s = READY_TIMEOUT_S
    tiers = load_topology(args.topology).tier_names if args.engine or args.serving else []
    if args.engine:
        from inferslice.testbed.vllm.services import default_venv, engine_services, resolve_engines

        engines = resolve_engines(args.engine, tiers)
        factory = engine_services(engines, args.vllm_venv or default_venv(), max_num_seqs=args.vllm_max_num_seqs)
    if args.serving:
        from inferslice.testbed.rayserve.services import RAY_READY_TIMEOUT_S, ray_services, resolve_serving

        serving = resolve_serving(args.serving, tiers)
        if "ray" in serving.values():
            factory = ray_services(serving, factory)
            ready_timeout_s = RAY_READY_TIMEOUT_S
    reg = up(args.topology, args.state_dir, services=not args.no_services, service_factory=factory, ready_timeout_s=ready_timeout_s)
    print(f"testbed up: {len(reg.fronts)} fronts, {len(reg.links)} links, {len(reg.pids)} processes; registry in {args.state_dir}")
    for front in reg.fronts:
        print(f"  {front.tier:<10} {front.url}")
    return 0


def _down(args: argparse.Namespace) -> int:
    from inferslice.testbed.net import down

    removed = down(args.state_dir)
    print("\n".join(removed) if removed else "nothing to remove")
    return 0


def _status_args(p: argparse.ArgumentParser) -> None:
    _state_dir_arg(p)
    p.add_argument("--json", action="store_true", help="print the status as one JSON object")


def _fmt_cap(value: Any) -> str:
    return "uncapped" if value is None else f"{float(value) / 1e6:g} Mbit/s"


def _status(args: argparse.Namespace) -> int:
    from inferslice.testbed.net import status

    st = status(args.state_dir)
    if args.json:
        print(json.dumps(st, sort_keys=True))
        return 0 if st["up"] else 1
    print(f"testbed {'up' if st['up'] else 'down'} (state {st['state_dir']}, prefix {st['prefix']})")
    for ns in st["namespaces"]:
        print(f"  netns {ns}")
    for name, p in sorted(st["processes"].items()):
        print(f"  {name:<20} pid {p['pid']:<8} {'running' if p['running'] else 'DEAD'}  log {p['log']}")
    for tier, caps in sorted(st["caps_bps"].items()):
        print(f"  cap {tier:<10} receive {_fmt_cap(caps.get('receive'))}, transmit {_fmt_cap(caps.get('transmit'))}")
    return 0 if st["up"] else 1


def _cap_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("tier")
    p.add_argument("rate", help="e.g. 500k, 0.5M, 2Mbit, 1000000 (bit/s), or none")
    p.add_argument(
        "--direction",
        choices=("receive", "transmit"),
        default="receive",
        help="receive: towards the tier's clients (default); transmit: from them",
    )
    _state_dir_arg(p)


def _cap(args: argparse.Namespace) -> int:
    from inferslice.testbed.net import parse_rate, set_cap

    cap = parse_rate(args.rate)
    try:
        set_cap(args.tier, cap, args.direction, args.state_dir)
    except KeyError:
        raise InputError(f"unknown tier {args.tier!r}", "tier") from None
    print(f"{args.tier} {args.direction} cap: {_fmt_cap(cap)}")
    return 0


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", choices=("differentiation", "client-bandwidth", "smoke"))
    p.add_argument("--out", type=Path, required=True, help="directory for summary.json, plots and report.md")
    p.add_argument("--topology", default=None, help="topology YAML, used if the testbed must be started")
    p.add_argument("--step-duration-s", type=float, default=None, help="seconds of load per step (default 24)")
    p.add_argument("--warmup-s", type=float, default=None, help="seconds skipped before measuring the link (default 4)")
    p.add_argument("--tiers", default="", help="comma-separated subset of tiers")
    p.add_argument("--concurrency", default="", help="comma-separated concurrency levels (default: the scenario's)")
    p.add_argument("--seed", type=int, default=0)
    _state_dir_arg(p)


def _run(args: argparse.Namespace) -> int:
    from inferslice.testbed.scenarios.definitions import ScenarioSettings
    from inferslice.testbed.scenarios.runner import run_scenario

    defaults = ScenarioSettings()
    try:
        levels = tuple(int(c) for c in args.concurrency.split(",") if c.strip())
    except ValueError:
        raise InputError(f"not a list of integers: {args.concurrency!r}", "--concurrency") from None
    settings = ScenarioSettings(
        step_duration_s=args.step_duration_s or defaults.step_duration_s,
        warmup_s=args.warmup_s if args.warmup_s is not None else defaults.warmup_s,
        seed=args.seed,
        tiers=tuple(t.strip() for t in args.tiers.split(",") if t.strip()),
        concurrency=levels,
    )
    rows = run_scenario(args.scenario, args.out, args.topology, args.state_dir, settings)
    failed = [c for c in json.loads((args.out / "fidelity.json").read_text()) if not c["ok"]]
    print(f"{len(rows)} steps; report in {args.out / 'report.md'}; {len(failed)} fidelity checks not met")
    return 0


def _replicas_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("tier")
    p.add_argument("replicas", help="a replica count (fixed, under external control) or 'auto'")
    _state_dir_arg(p)


def _replicas(args: argparse.Namespace) -> int:
    from inferslice.testbed.ops import set_replicas

    if args.replicas == "auto":
        n = None
    else:
        try:
            n = int(args.replicas)
        except ValueError:
            raise InputError(f"not an integer or 'auto': {args.replicas!r}", "replicas") from None
    state = set_replicas(args.tier, n, args.state_dir)
    print(json.dumps(state, sort_keys=True))
    return 0


def _share_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("tier")
    p.add_argument("share", type=float, help="effective GPU share in (0, 1]; 1 = no co-tenant")
    p.add_argument("--replica", default=None, help="one replica id (default: all of the tier's)")
    _state_dir_arg(p)


def _share(args: argparse.Namespace) -> int:
    from inferslice.testbed.ops import set_gpu_share

    changed = set_gpu_share(args.tier, args.share, args.state_dir, args.replica)
    print(f"{args.tier}: GPU share {args.share:g} on {', '.join(changed) or 'no replicas'}")
    return 0


HANDLERS.update(
    {
        "run": ("run a scenario (differentiation | client-bandwidth | smoke) and write the report", _run_args, _run),
        "replicas": ("fix a tier's replica count (or 'auto' to autoscale)", _replicas_args, _replicas),
        "share": ("set the effective GPU share of a tier's replicas (inject a co-tenant)", _share_args, _share),
        "up": ("build the namespaces, WAN delay line, overlay and edge caps; start engine hosts and fronts", _up_args, _up),
        "down": ("remove everything the testbed created (works after a crash)", _state_dir_arg, _down),
        "status": ("what is up, which processes run, the current caps", _status_args, _status),
        "cap": ("change a tier's client-edge bandwidth cap live", _cap_args, _cap),
        "move": ("move a tier's replica to another PoP, make-before-break, and show its progress", move_args, move_run),
        "wan": ("WAN causes live: a link's physical rate, its delay, iperf3 cross-traffic (status | rate | delay | cross)",
                wan_args, wan_run),
    }
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="testbed_command", metavar="ACTION")
    for name, (help_text, add, _) in HANDLERS.items():
        add(sub.add_parser(name, help=help_text, description=help_text))


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "testbed_command", None)
    if action is None or action not in HANDLERS:
        print(f"inferslice testbed: choose one of {', '.join(HANDLERS)}", file=sys.stderr)
        return 2
    return HANDLERS[action][2](args)
