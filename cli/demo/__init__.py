"""``inferslice demo``: the main job on one machine.

Brings the testbed up with the three tiers, starts the platform around it (exporter, Prometheus
with the generated rules, Alertmanager, the diagnosis API and its loop), drives a short script of
load, cap and GPU-share changes that puts each tier in a different regime while a live view
shows what the platform diagnoses, writes a report, and tears everything down, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from inferslice.common.hostcpu import STARVED_SHARE

HELP = "the main job: testbed up, a scripted load/cap story with a live view, a report, teardown"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("demo-out"), help="report directory (default demo-out)")
    parser.add_argument("--topology", default=None, help="topology file (default: testbed/topology.yaml)")
    parser.add_argument("--state-dir", type=Path, default=None, help="testbed state directory (default /run/inferslice)")
    parser.add_argument("--speed", type=float, default=1.0, help="scale every phase's duration (e.g. 0.4 for a quick run)")
    parser.add_argument(
        "--phase-s",
        type=float,
        default=None,
        metavar="S",
        help="every phase lasts S seconds (a short story for CI; same code path); overrides --speed",
    )
    parser.add_argument(
        "--no-live",
        action="store_true",
        help="print one compact line per diagnosis window instead of the live table (also when stdout is not a terminal)",
    )
    parser.add_argument("--keep", action="store_true", help="leave the testbed up at the end (everything else stops)")


MAIN_PID = os.getpid()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    # Libraries fork helpers (pyroute2's netns workers) that inherit this handler and our stack:
    # a forked child must exit quietly, never unwind into the teardown below.
    if os.getpid() != MAIN_PID:
        os._exit(128 + signum)
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print(
            "inferslice demo: the testbed needs root (network namespaces, HTB qdiscs, TUN devices).\n"
            "Run it as root, e.g. `sudo make demo`. Nothing was built.",
            file=sys.stderr,
        )
        return 1
    from inferslice.common.registry import DEFAULT_STATE_DIR
    from inferslice.errors import InferSliceError

    state_dir: Path = args.state_dir or DEFAULT_STATE_DIR
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    global MAIN_PID
    MAIN_PID = os.getpid()
    signal.signal(signal.SIGTERM, _raise_interrupt)
    from inferslice.cli.demo.story import DEFAULT_STORY
    from inferslice.service.platform import Platform
    from inferslice.testbed.net import lifecycle
    from inferslice.testbed.scenarios.runner import wait_ready
    from inferslice.topology import load_topology

    story = DEFAULT_STORY.with_phase_s(args.phase_s) if args.phase_s is not None else DEFAULT_STORY.scaled(args.speed)
    stack: Platform | None = None
    try:
        print("bringing the testbed up (namespaces, WAN delay lines, VXLAN overlays, HTB edge, engines, fronts) ...")
        reg = lifecycle.up(args.topology, state_dir, services=True)
        top = load_topology(reg.topology_path)
        stack = demo_platform(top, reg, out, state_dir)
        print("starting the platform: exporter, Prometheus + rules, Alertmanager, diagnosis API ...")
        stack.start()
        _prepare(story.replicas, state_dir)
        wait_ready(top, state_dir, progress=lambda m: print(m))
        print(f"Prometheus {stack.prometheus.url if stack.prometheus else '-'}   API {stack.api_url}/docs   report -> {out}")
        print(f"operator console {stack.api_url}/console")
        timeline, judged_from, approval, steal = _play(stack, story, state_dir, out, live=not args.no_live)
        report = _report(stack, story, timeline, out, judged_from, approval, steal)
        print(report)
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted: tearing down", file=sys.stderr)
        return 130
    except InferSliceError as err:
        print(f"inferslice demo: {err}", file=sys.stderr)
        return 1
    finally:
        if os.getpid() != MAIN_PID:  # a forked helper that got here must not tear anything down
            os._exit(1)
        if stack is not None:
            stack.stop()
        if not args.keep:
            removed = lifecycle.down(state_dir)
            print(f"testbed down ({len(removed)} objects removed)")


HOLD_SCALE = 0.2  # a 1 min regime hold becomes 12 s, Alertmanager's group wait shrinks alike


def demo_platform(top: Any, reg: Any, out: Path, state_dir: Path) -> Any:
    """The demo's platform: the testbed's own exporter, alert holds compressed like the testbed's timing.

    The production dashboards and rules (uncompressed) go to ``out/dashboards`` for the report.
    """
    from inferslice.dashboards import build as dashboards_build
    from inferslice.service.platform import Platform, PlatformSettings

    out = out.absolute()
    from inferslice.service.controller import Mode
    from inferslice.service.controller.process import with_controller

    settings = PlatformSettings(
        scrape_interval_s=top.timing.scrape_interval_s, hold_scale=HOLD_SCALE, reuse_exporter=True, db_path=out / "inferslice.db"
    )
    # The controller starts in dry-run; each phase of the story sets its mode (auto for the remedies).
    settings = with_controller(settings, out / "platform", Mode.DRY_RUN)
    platform = Platform(reg, top, state_dir, out / "platform", settings)
    art = dashboards_build.generate(top, api_url=platform.api_url)
    dashboards_build.write(out / "dashboards", art, header="generated by inferslice demo")
    return platform


def _prepare(replicas: dict[str, int] | Any, state_dir: Path) -> None:
    """Fixed replica counts: the story is about diagnosis, so the autoscaler must not move the ground."""
    from inferslice.testbed.ops import set_replicas

    for tier, n in replicas.items():
        set_replicas(tier, n, state_dir)


def _apply(phase: Any, state_dir: Path) -> None:
    from inferslice.testbed.net import lifecycle
    from inferslice.testbed.ops import set_gpu_share

    for tier, load in phase.loads.items():
        if not load.keep_cap:
            lifecycle.set_cap(tier, load.cap_bps, "receive", state_dir)
        set_gpu_share(tier, load.gpu_share, state_dir)


def _control_mode(stack: Any, phase: Any) -> None:
    """Restart the controller in the phase's mode (its audit log and state carry over)."""
    from inferslice.service.controller import Mode

    ctl = stack.controller
    if ctl is not None and ctl.mode.value != phase.control:
        ctl.restart(Mode(phase.control))


Timeline = list[tuple[Any, float, float]]


def _operator_turn(stack: Any, phase: Any, awaited: Any, end: float, judged_from: dict[str, float], echo: bool) -> float:
    """The approve segment's operator polls the API; returns the phase's end, which moves to the
    awaited action's applied instant + the phase's duration (or to now if it gave up waiting)."""
    if awaited is None:
        return end
    was_done = awaited.done
    for line in awaited.step(stack, time.time()):
        if echo:
            print(line, flush=True)
    if awaited.done and not was_done and awaited.applied_s is not None:
        judged_from[phase.name] = awaited.applied_s
        return float(awaited.applied_s + phase.duration_s)
    if not awaited.done and awaited.gave_up(time.time()):
        return min(end, time.time())
    return end


def _play(
    stack: Any, story: Any, state_dir: Path, out: Path, live: bool
) -> tuple[Timeline, dict[str, float], dict[str, Any] | None, dict[str, float | None]]:
    """Play the story; returns the timeline, when each phase is judged from (where not its start), the
    approve segment's account, and the host's CPU steal over each phase (``common.hostcpu``)."""
    from rich.console import Console
    from rich.live import Live

    from inferslice.cli.demo.approval import WAIT_S, Approval
    from inferslice.cli.demo.view import render, window_key, window_line
    from inferslice.common import hostcpu

    timeline: Timeline = []
    judged_from: dict[str, float] = {}
    steal: dict[str, float | None] = {}
    approval: Approval | None = None
    console = Console()  # the terminal's width when there is one
    live = live and console.is_terminal  # a log or a pipe gets one line per window, never cursor moves
    total = len(story.phases)
    for i, phase in enumerate(story.phases, start=1):
        induced = time.time()  # the approve segment counts from its condition, before the controller's restart
        _apply(phase, state_dir)
        _control_mode(stack, phase)
        start = time.time()
        cpu = hostcpu.read()
        awaited = Approval(phase.approve_tier, induced) if phase.control == "approve" and phase.approve_tier else None
        approval = awaited or approval
        longest = phase.duration_s + (WAIT_S if awaited is not None else 0.0)
        for j, (tier, load) in enumerate(phase.loads.items()):
            result = out / f"load-{phase.name.replace(' ', '-')}-{tier}.json"
            stack.start_load(tier, tier, load.concurrency, longest + 5, seed=10 * i + j, result_path=result)
        # An approve segment runs its duration from the moment its action was applied (or it gave up waiting).
        end = start + phase.duration_s if awaited is None else start + longest

        def views(phase: Any = phase) -> dict[str, Any]:
            return {t: stack.slice_view(t) for t in phase.loads}

        if live:
            with Live(render(phase, i, total, phase.duration_s, views(), console.width), console=console, refresh_per_second=2) as view:
                while time.time() < end:
                    time.sleep(1.0)
                    end = _operator_turn(stack, phase, awaited, end, judged_from, echo=False)
                    view.update(render(phase, i, total, max(0.0, end - time.time()), views(), console.width))
        else:
            print(f"phase {i}/{total}: {phase.name} ({phase.duration_s:g} s): {phase.description}", flush=True)
            last: tuple[Any, ...] | None = None
            while time.time() < end:
                time.sleep(1.0)
                end = _operator_turn(stack, phase, awaited, end, judged_from, echo=True)
                now = views()
                key = window_key(now)
                if key != last:  # a new diagnosis window for some tier
                    last = key
                    print(window_line(phase, i, total, max(0.0, end - time.time()), now), flush=True)
        timeline.append((phase, start, time.time()))
        steal[phase.name] = hostcpu.steal_share(cpu, hostcpu.read())
    for tier in list(stack.loads):
        stack.stop_load(tier)
    return timeline, judged_from, approval.to_dict() if approval is not None else None, steal


def _steal_lines(steal: dict[str, float | None]) -> list[str]:
    """The host's CPU steal per phase, and which phases it starved (their verdicts say little)."""
    known = {name: share for name, share in steal.items() if share is not None}
    if not known:
        return []
    said = ", ".join(f"{name} {share:.0%}" for name, share in known.items())
    lines = ["", f"Host CPU steal (the hypervisor's share of this machine's CPU time) per phase: {said}."]
    starved = [name for name, share in known.items() if share >= STARVED_SHARE]
    if starved:
        lines.append(
            f"Starved: {', '.join(starved)} (steal >= {STARVED_SHARE:.0%}). Every process froze and woke together there:"
            " the emulated WAN and GPUs ran late, and their verdicts test the host, not inferslice."
        )
    return lines


def _report(
    stack: Any,
    story: Any,
    timeline: Timeline,
    out: Path,
    judged_from: dict[str, float],
    approval: dict[str, Any] | None,
    steal: dict[str, float | None],
) -> str:
    from inferslice.cli.demo.approval import report_lines
    from inferslice.cli.demo.story import judge

    history = {t: stack.diagnoses(t) for t in stack.topology.tier_names}
    verdicts = [v for phase, start, end in timeline for v in judge(phase, history, judged_from.get(phase.name, start), end)]
    alerts = stack.alerts()
    lines = [
        "# inferslice demo report",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S')}. Diagnoses from the API's loop over Prometheus "
        f"(client-perceived TTFT/TPOT, kernel link rates), one window every {stack.topology.timing.scrape_interval_s:g} s.",
        "",
        "| phase | tier | expected | diagnosed (settled majority) | share of settled windows | windows | ok | where P99 TTFT goes (mean) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        where = ", ".join(f"{r} {s:.2f} s" for r, s in v.attribution.items() if s >= 0.005) or "-"
        lines.append(
            f"| {v.phase} | {v.tier} | {v.expected} | {v.observed} | {v.share:.0%} | {v.windows} | {'yes' if v.ok else 'NO'} | {where} |"
        )
    lines += _steal_lines(steal)
    firing = sorted({(a.get("labels", {}).get("alertname", "?"), a.get("labels", {}).get("slice", "-")) for a in alerts})
    lines += ["", f"Alerts delivered by Alertmanager to the API webhook: {len(alerts)}"]
    lines += [f"- {name} ({tier})" for name, tier in firing]
    from inferslice.cli.demo.control_report import control_section

    actions = stack.api_get("/v1/actions") or []
    window_s = stack.settings.api_window_s or 8.0  # the API loop's default window (inferslice api --window-s)
    lines += control_section(actions, history, timeline, stack.api_get("/v1/control/events") or [], window_s)
    lines += report_lines(approval)
    lines += [
        "",
        "Dashboards and rules generated for this topology are in `dashboards/`; the SQLite history is `inferslice.db`;"
        " the controller's audit log is `platform/control.db`.",
    ]
    text = "\n".join(lines) + "\n"
    (out / "demo-report.md").write_text(text)
    (out / "demo-summary.json").write_text(
        json.dumps(
            {
                "verdicts": [v.__dict__ | {"ok": v.ok} for v in verdicts],
                "alerts": len(alerts),
                "actions": actions,
                "phases": [
                    {
                        "name": p.name,
                        "start_s": s,
                        "end_s": e,
                        "judged_from_s": judged_from.get(p.name, s),
                        "expect_actions": dict(p.expect_actions),
                        "host_steal_share": steal.get(p.name),
                        "control": p.control,  # the controller's mode (the approve segment is the "approve" phase's)
                    }
                    for p, s, e in timeline
                ],
                "approval": approval,
                "host_steal_starved_share": STARVED_SHARE,  # .ci/demo_verdicts.py: a phase above it tested the host
            },
            indent=1,
        )
    )
    return text
