"""The control benchmark's bandwidth squeeze on the real netns testbed (a smaller, real run beside the model).

    python -m inferslice.bench.control_testbed --out DIR [--policies static,ttft_threshold,inferslice]

Standard runs 10 closed-loop clients (the brief's ~0.9 Mbit/s of demand); after a healthy baseline
its client-edge cap is cut to 0.5 Mbit/s and held. Per policy, on the same testbed, in sequence:

- static: Standard fixed at its ceiling (3 replicas), nothing acts;
- ttft_threshold: +1 replica when the API's P99 TTFT of Standard exceeds the SLO (at most every 30 s x
  time scale), the peers' reactive latency scaler;
- inferslice: ``inferslice control --mode auto`` (the Platform's controller child).

The diagnosis API (Prometheus source, client perspective) feeds both the TTFT scaler and the
controller. Reported from the load generator's own per-request records: goodput (requests/s whose
TTFT met 0.5 s) and SLO attainment over the squeeze, replica-seconds, scale-outs and cap changes.
Needs root and the testbed lock.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from inferslice.bench.control_policies import PAPER_COLD_START_S

TIER = "standard"
CLIENTS = 10
SQUEEZE_BPS = 0.5e6
SLO_S = 0.5


def _ttft_scaler(stack: Any, state_dir: Path, f: float, stop: threading.Event, log: list[tuple[float, int]]) -> None:
    from inferslice.testbed.ops import front_state, set_replicas

    last_up = -1e9
    while not stop.wait(1.0):
        snap = (stack.slice_view(TIER) or {}).get("snapshot") or {}
        p99 = snap.get("ttft_p99_s")
        if p99 is not None and p99 > SLO_S and time.time() - last_up >= 30.0 * f:
            cur = int(front_state(TIER, state_dir)["target"])
            if cur < 3:
                set_replicas(TIER, cur + 1, state_dir)
                log.append((time.time(), cur + 1))
                last_up = time.time()


def _sample_replicas(state_dir: Path, stop: threading.Event, out: list[tuple[float, int]]) -> None:
    from inferslice.testbed.ops import front_state

    while not stop.wait(1.0):
        try:
            st = front_state(TIER, state_dir)
            out.append((time.time(), len(st.get("replicas", []))))
        except Exception:  # noqa: BLE001 - a sampling miss is not a result
            continue


def run_policy(stack: Any, top: Any, state_dir: Path, policy: str, baseline_s: float, squeeze_s: float, seed: int) -> dict[str, Any]:
    from inferslice.service.controller import Mode
    from inferslice.testbed.net import lifecycle
    from inferslice.testbed.ops import set_replicas
    from inferslice.testbed.scenarios.runner import wait_ready

    f = top.timing.cold_start_s / PAPER_COLD_START_S
    for t in top.tier_names:
        lifecycle.set_cap(t, None, "receive", state_dir)
    set_replicas(TIER, 3 if policy == "static" else 2, state_dir)
    wait_ready(top, state_dir, progress=lambda m: None)
    stack.controller.restart(Mode.AUTO if policy == "inferslice" else Mode.DRY_RUN)
    stop = threading.Event()
    reps: list[tuple[float, int]] = []
    scaler_log: list[tuple[float, int]] = []
    threads = [threading.Thread(target=_sample_replicas, args=(state_dir, stop, reps), daemon=True)]
    if policy == "ttft_threshold":
        threads.append(threading.Thread(target=_ttft_scaler, args=(stack, state_dir, f, stop, scaler_log), daemon=True))
    run = stack.start_load(TIER, TIER, CLIENTS, baseline_s + squeeze_s, seed=seed, records=True)
    stack.wait_load(TIER, timeout_s=30)
    for th in threads:
        th.start()
    time.sleep(baseline_s)
    lifecycle.set_cap(TIER, SQUEEZE_BPS, "receive", state_dir)
    t_on = time.time()
    time.sleep(squeeze_s)
    t_off = time.time()
    seen = (stack.slice_view(TIER) or {}).get("snapshot") or {}
    link_seen = seen.get("link_cap_bps") is not None and bool(seen.get("link_rx_bps"))
    stop.set()
    run.wait(timeout_s=60)
    records = run.records()
    inside = [r for r in records if t_on <= float(r["start_s"]) <= t_off]
    good = [r for r in inside if r.get("success") and r.get("ttft_s") is not None and float(r["ttft_s"]) <= SLO_S]
    actions = [
        a
        for a in (stack.api_get("/v1/actions", state="applied") or [])
        if a.get("tier") == TIER and a.get("applied_s") and t_on - baseline_s <= float(a["applied_s"]) <= t_off
    ]
    rs = sum(n for _, n in reps)  # one sample a second
    return {
        "policy": policy,
        "link_telemetry": link_seen,  # False: the diagnosis could not see the cap (the run says nothing about the network remedy)
        "goodput_rps": len(good) / (t_off - t_on),
        "slo_attainment": len(good) / len(inside) if inside else None,
        "requests": len(inside),
        "replica_seconds": rs,
        "scale_outs": len(scaler_log)
        + sum(1 for a in actions if a["kind"] == "set_replicas" and a["action"]["value"] > (a["action"].get("previous") or 0)),
        "cap_changes": sum(1 for a in actions if a["kind"] == "set_cap"),
        "actions": [{"kind": a["kind"], "value": a["action"]["value"], "cause": a["action"].get("regime")} for a in actions],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferslice.bench.control_testbed", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--policies", default="static,ttft_threshold,inferslice")
    ap.add_argument("--baseline-s", type=float, default=30.0)
    ap.add_argument("--squeeze-s", type=float, default=60.0)
    ap.add_argument("--state-dir", type=Path, default=None)
    args = ap.parse_args(argv)

    from inferslice.common.registry import DEFAULT_STATE_DIR
    from inferslice.service.control_platform import with_controller
    from inferslice.service.controller import Mode
    from inferslice.service.platform import Platform, PlatformSettings
    from inferslice.testbed.net import lifecycle
    from inferslice.topology import load_topology

    main_pid = os.getpid()

    def _interrupt(signum: int, frame: object) -> None:
        if os.getpid() != main_pid:  # a forked helper (pyroute2's netns workers) exits quietly
            os._exit(128 + signum)
        raise KeyboardInterrupt  # a timeout's SIGTERM must tear the platform and the testbed down too

    signal.signal(signal.SIGTERM, _interrupt)
    state_dir = args.state_dir or DEFAULT_STATE_DIR
    out = args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    reg = lifecycle.up(None, state_dir, services=True)
    stack = None
    try:
        top = load_topology(reg.topology_path)
        settings = PlatformSettings(
            scrape_interval_s=top.timing.scrape_interval_s,
            hold_scale=0.2,
            reuse_exporter=True,
            alertmanager=False,
            db_path=out / "inferslice.db",
        )
        stack = Platform(reg, top, state_dir, out / "platform", with_controller(settings, out / "platform", Mode.DRY_RUN))
        stack.start()
        results = []
        for i, pol in enumerate(p for p in args.policies.split(",") if p):
            r = run_policy(stack, top, state_dir, pol, args.baseline_s, args.squeeze_s, seed=i)
            print(json.dumps(r), flush=True)
            results.append(r)
        (out / "testbed-summary.json").write_text(
            json.dumps({"scenario": "bandwidth-squeeze (real testbed)", "tier": TIER, "results": results}, indent=1)
        )
    finally:
        if stack is not None:
            stack.stop()
        lifecycle.down(state_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
