"""Run a scenario on the testbed and write ``summary.json``, PNG plots and the fidelity report.

Each step: set the tier's client-edge cap, run the load generator as its own process inside the
client namespace (so its traffic crosses the capped edge link and its event loop competes with
nothing of ours), read the kernel's HTB byte counters of the tier's edge classes in the steady
part of the step, and record one summary row. The testbed is started if it is not up, and then
also stopped at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from inferslice.common.registry import DEFAULT_STATE_DIR, read_registry
from inferslice.errors import PermanentError, RetryableError, SourceUnavailable
from inferslice.testbed.net import lifecycle
from inferslice.testbed.net.plan import net_plan
from inferslice.testbed.scenarios import fidelity, plots, window
from inferslice.testbed.scenarios.definitions import ScenarioSettings, Step, steps_for
from inferslice.topology import Topology, load_topology

Progress = Callable[[str], None]
SUMMARY_KEYS = (
    "scenario", "tier", "concurrency", "cap", "cap_bps", "p50_ttft_s", "p99_ttft_s", "p50_tpot_s", "p99_tpot_s",
    "output_tokens_per_s", "goodput_rps", "link_rx_bps", "link_tx_bps", "completed", "failed",
)  # fmt: skip


class LinkSampler:
    """Reads a tier's edge counters at two instants inside the step (kernel HTB class bytes)."""

    def __init__(self, state_dir: Path, tier: str) -> None:
        self.state_dir = state_dir
        self.tier = tier
        self.samples: list[tuple[float, int, int]] = []

    def sample(self) -> None:
        c = lifecycle.edge_counters(self.state_dir)[self.tier]
        self.samples.append((time.monotonic(), c.receive_bytes, c.transmit_bytes))

    def rates_bps(self) -> tuple[float | None, float | None]:
        if len(self.samples) < 2:
            return None, None
        (t0, rx0, tx0), (t1, rx1, tx1) = self.samples[0], self.samples[-1]
        dt = t1 - t0
        if dt <= 0:
            return None, None
        return 8 * (rx1 - rx0) / dt, 8 * (tx1 - tx0) / dt


def _load_argv(top_path: str, netns: str, step: Step, settings: ScenarioSettings, result: Path, index: int) -> list[str]:
    records = result.with_suffix(".records.jsonl")
    return [
        sys.executable, "-m", "inferslice.cli", "load",
        "--topology", top_path, "--tier", step.tier, "--netns", netns,
        "--concurrency", str(step.concurrency),
        "--duration-s", str(settings.step_duration_s),
        "--seed", str(settings.seed + index),
        "--goodput", "ttft:500",
        "--drain-timeout-s", str(settings.drain_timeout_s),
        "--save-result", str(result), "--save-records", str(records), "--quiet",
    ]  # fmt: skip


def _row(
    step: Step, cap_bps: float | None, stats: dict[str, Any], result: dict[str, Any], rx: float | None, tx: float | None
) -> dict[str, Any]:
    return {
        "scenario": step.scenario,
        "tier": step.tier,
        "concurrency": step.concurrency,
        "cap": step.cap,
        "cap_bps": cap_bps,
        **{k: stats[k] for k in ("p50_ttft_s", "p99_ttft_s", "p50_tpot_s", "p99_tpot_s", "output_tokens_per_s", "goodput_rps")},
        "link_rx_bps": rx,
        "link_tx_bps": tx,
        "completed": stats["completed"],
        "failed": stats["failed"],
        "mean_ttft_s": stats["mean_ttft_s"],
        "mean_tpot_s": stats["mean_tpot_s"],
        "request_throughput": stats["request_throughput"],
        "window_s": stats["window_s"],
        # the load generator's whole-run summary (vllm bench keys), for reference
        "run_completed": result.get("completed", 0),
        "run_failed": result.get("failed", 0),
        "run_output_throughput": result.get("output_throughput"),
    }


def run_step(
    top_path: str,
    state_dir: Path,
    step: Step,
    cap_bps: float | None,
    settings: ScenarioSettings,
    index: int,
    client_ns: str,
    slo_ttft_s: float = 0.5,
) -> dict[str, Any]:
    lifecycle.set_cap(step.tier, cap_bps, "receive", state_dir)
    sampler = LinkSampler(state_dir, step.tier)
    with tempfile.TemporaryDirectory(prefix="isl-step-") as tmp:
        result_path = Path(tmp) / "result.json"
        log_path = Path(tmp) / "load.log"
        with log_path.open("w") as log:
            argv = _load_argv(top_path, client_ns, step, settings, result_path, index)
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            # Sample the link in the steady part: after the warm-up, until just before new requests stop.
            start = time.monotonic()
            first_at = start + settings.warmup_s
            last_at = start + max(settings.warmup_s + 1.0, settings.step_duration_s)
            while proc.poll() is None:
                now = time.monotonic()
                due = first_at if not sampler.samples else last_at
                if len(sampler.samples) < 2 and now >= due:
                    sampler.sample()
                time.sleep(0.05)
            if len(sampler.samples) < 2:  # the load ended early (errors): measure what there was
                sampler.sample()
        if proc.returncode not in (0, 1) or not result_path.exists():
            raise PermanentError(f"load generator failed ({proc.returncode}): {log_path.read_text()[-800:]}")
        result = json.loads(result_path.read_text())
        records = window.load_records(result_path.with_suffix(".records.jsonl"))
    rx, tx = sampler.rates_bps()
    t_load = min((float(r["start_s"]) for r in records), default=0.0)
    stats = window.window_stats(records, t_load + settings.warmup_s, t_load + settings.step_duration_s, slo_ttft_s)
    return _row(step, cap_bps, stats, result, rx, tx)


def wait_ready(top: Topology, state_dir: Path, timeout_s: float = 120.0, progress: Progress = print) -> None:
    """Block until every tier's front has at least its floor of replicas ready (cold starts done)."""
    from inferslice.testbed.ops import front_state

    deadline = time.monotonic() + timeout_s
    waiting = list(top.tier_names)
    while waiting:
        still = []
        for tier in waiting:
            try:
                state = front_state(tier, state_dir)
            except (PermanentError, SourceUnavailable, RetryableError):
                still.append(tier)
                continue
            ready = sum(1 for r in state.get("replicas", []) if r.get("state") == "ready")
            if ready < max(1, top.tier(tier).replicas_min):
                still.append(tier)
        waiting = still
        if waiting:
            if time.monotonic() > deadline:
                raise PermanentError(f"tiers {waiting} have no ready replica after {timeout_s:.0f} s")
            time.sleep(0.5)
    progress("every tier has a ready replica")


def pin_replicas_at_ceiling(top: Topology, state_dir: Path, tiers: list[str], timeout_s: float = 120.0, progress: Progress = print) -> None:
    """Fix each tier at its replica ceiling and wait for the cold starts: a step measuring the link
    must not also measure an autoscaler warming up (the paper's bandwidth runs had settled tiers)."""
    from inferslice.testbed.ops import front_state, set_replicas

    for tier in tiers:
        set_replicas(tier, top.tier(tier).replicas_max, state_dir)
    deadline = time.monotonic() + timeout_s
    for tier in tiers:
        want = top.tier(tier).replicas_max
        while sum(1 for r in front_state(tier, state_dir).get("replicas", []) if r.get("state") == "ready") < want:
            if time.monotonic() > deadline:
                raise PermanentError(f"{tier}: {want} replicas not ready after {timeout_s:.0f} s")
            time.sleep(0.5)
    progress(f"replicas fixed at the ceiling: {', '.join(f'{t} {top.tier(t).replicas_max}' for t in tiers)}")


def _set_autoscale(top: Topology, state_dir: Path) -> None:
    """Every tier autoscales between its floor and ceiling, as the paper's tiers did."""
    try:
        reg = read_registry(state_dir)
    except SourceUnavailable:
        return
    for front in reg.fronts:
        try:
            httpx.put(f"{front.admin_url}/admin/autoscale", json={"enabled": True}, timeout=5.0)
        except httpx.HTTPError:
            pass  # a front that does not answer shows up as failed requests in its steps


def run_scenario(
    scenario: str,
    out_dir: Path,
    topology_path: str | None = None,
    state_dir: Path = DEFAULT_STATE_DIR,
    settings: ScenarioSettings | None = None,
    progress: Progress = print,
) -> list[dict[str, Any]]:
    settings = settings or ScenarioSettings()
    out_dir.mkdir(parents=True, exist_ok=True)
    started_here = False
    try:
        reg = read_registry(state_dir)
        top_path = reg.topology_path
    except SourceUnavailable:
        progress("testbed is not up: starting it")
        reg = lifecycle.up(topology_path, state_dir, services=True)
        top_path = reg.topology_path
        started_here = True
    top = load_topology(top_path)
    steps = steps_for(scenario, top.tier_names, settings)
    client_ns = net_plan(top, _prefix(state_dir)).client_netns
    rows: list[dict[str, Any]] = []
    demand: dict[tuple[str, int], float] = {}
    try:
        _set_autoscale(top, state_dir)
        wait_ready(top, state_dir, progress=progress)
        if settings.pin_replicas or (settings.pin_replicas is None and scenario == "client-bandwidth"):
            pin_replicas_at_ceiling(top, state_dir, sorted({s.tier for s in steps}), progress=progress)
        for i, step in enumerate(steps):
            cap_bps = step.cap_bps
            if step.cap == "demand":
                measured = demand.get((step.tier, step.concurrency))
                cap_bps = settings.demand_headroom * measured if measured else None
            progress(f"[{i + 1}/{len(steps)}] {step.tier} c={step.concurrency} cap={_fmt(cap_bps)}")
            row = run_step(top_path, state_dir, step, cap_bps, settings, i, client_ns, top.tier(step.tier).slo_ttft_p99_s)
            if step.cap == "none" and row["link_rx_bps"]:
                demand[(step.tier, step.concurrency)] = row["link_rx_bps"]
            rows.append(row)
            progress(
                f"    p99 TTFT {_fmt_s(row['p99_ttft_s'])}  p50 TPOT {_fmt_s(row['p50_tpot_s'])}  p99 TPOT {_fmt_s(row['p99_tpot_s'])}  "
                f"{row['output_tokens_per_s'] or 0:.0f} tok/s  goodput {row['goodput_rps'] or 0:.2f} rps  rx {_fmt(row['link_rx_bps'])}"
            )
            write_outputs(rows, out_dir)
            time.sleep(settings.settle_s)
    finally:
        for tier in top.tier_names:
            try:
                lifecycle.set_cap(tier, None, "receive", state_dir)
            except (PermanentError, OSError):
                pass
        _set_autoscale(top, state_dir)
        if started_here:
            lifecycle.down(state_dir)
    write_outputs(rows, out_dir, final=True)
    return rows


def _prefix(state_dir: Path) -> str:
    state = json.loads((state_dir / lifecycle.STATE_FILE).read_text())
    return str(state["prefix"])


def write_outputs(rows: list[dict[str, Any]], out_dir: Path, final: bool = False) -> None:
    (out_dir / "summary.json").write_text(json.dumps(rows, indent=1))
    if not final:
        return
    checks = fidelity.evaluate(rows)
    (out_dir / "fidelity.json").write_text(json.dumps(fidelity.checks_to_json(checks), indent=1))
    plots.plot_all(rows, out_dir)
    table = fidelity.checks_to_markdown(checks)
    (out_dir / "report.md").write_text(
        "# Testbed fidelity report\n\n"
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S')} from {len(rows)} steps.\n\n"
        + table
        + "\n## Steps\n\n"
        + _rows_markdown(rows)
    )


def _rows_markdown(rows: list[dict[str, Any]]) -> str:
    head = "| scenario | tier | conc | cap | p50 TTFT | p99 TTFT | p50 TPOT | p99 TPOT | tok/s | goodput | rx | tx | ok/failed |"
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['tier']} | {r['concurrency']} | {_fmt(r['cap_bps'])} | {_fmt_s(r['p50_ttft_s'])} | "
            f"{_fmt_s(r['p99_ttft_s'])} | {_fmt_s(r['p50_tpot_s'])} | {_fmt_s(r['p99_tpot_s'])} | {r['output_tokens_per_s'] or 0:.0f} | "
            f"{r['goodput_rps'] or 0:.2f} | {_fmt(r['link_rx_bps'])} | {_fmt(r['link_tx_bps'])} | {r['completed']}/{r['failed']} |"
        )
    return "\n".join(lines) + "\n"


def _fmt(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e6:.3g} Mbit/s"


def _fmt_s(s: float | None) -> str:
    return "-" if s is None else (f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s")


