"""Child process of the kill -9 test: a controller in auto mode on a virtual clock.

    python crash_child.py DIR TICKS [queue|move]

The clock is a counter in DIR/clock (2 s a step, persisted before each step) so a restarted child
continues the same timeline. Verdicts are scripted: ``queue`` (the default), Premium queues hard (it
scales out step by step), Standard is network-limited (its cap is raised); ``move``, Premium's two
replicas share bristol/gpu1 with a co-tenant and read compute-limited while any of them runs there
(both move, make-before-break, in one batch). Exits 0 after TICKS steps."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_backend import FileActuator

from inferslice.common.files import atomic_write_text
from inferslice.control.settings import tier_policies
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.service.controller import Controller, Mode
from inferslice.service.controller.audit import AuditLog
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import load_topology


def main() -> int:
    d = Path(sys.argv[1])
    ticks = int(sys.argv[2])
    scenario = sys.argv[3] if len(sys.argv) > 3 else "queue"
    top = load_topology()
    clock_file = d / "clock"
    now = {"t": float(clock_file.read_text()) if clock_file.exists() else 1000.0}

    def moving() -> dict[str, tuple[Diagnosis, SliceSnapshot]]:
        contended = any(r.gpu_share < 0.9 for r in act.observe()["premium"].replicas if r.state == "ready")
        regime = Regime.COMPUTE_LIMITED if contended else Regime.HEALTHY
        return {
            "premium": (
                Diagnosis("premium", regime, confidence=0.9),
                SliceSnapshot("premium", request_rate=1.0, gpu_share=0.35 if contended else 1.0),
            ),
            "standard": (Diagnosis("standard", Regime.HEALTHY, confidence=0.9), SliceSnapshot("standard", request_rate=0.5)),
            "free": (Diagnosis("free", Regime.HEALTHY, confidence=0.9), SliceSnapshot("free", request_rate=0.5)),
        }

    def source() -> dict[str, tuple[Diagnosis, SliceSnapshot]]:
        if scenario == "move":
            return moving()
        return {
            "premium": (
                Diagnosis("premium", Regime.QUEUE_LIMITED, confidence=0.9),
                SliceSnapshot("premium", request_rate=2.0, requests_waiting=30.0, queue_time_p99_s=4.0),
            ),
            "standard": (
                Diagnosis("standard", Regime.NETWORK_LIMITED, confidence=0.9),
                SliceSnapshot("standard", request_rate=2.0, link_rx_bps=0.46e6, output_tokens_per_s=220, ref_output_tokens_per_s=370),
            ),
            "free": (Diagnosis("free", Regime.HEALTHY, confidence=0.9), SliceSnapshot("free", request_rate=0.5)),
        }

    act = FileActuator(d / "backend.json", top, apply_delay_s=0.15)
    if not (d / "capped").exists():
        data = act._read()
        data["tiers"]["standard"]["cap_bps"] = 0.5e6
        if scenario == "move":  # Premium's two replicas on bristol/gpu1, which a co-tenant slows to 0.35
            data["tiers"]["premium"]["replicas"] = 2
            data["shares"] = {"bristol/gpu1": 0.35}
        act._write(data)
        (d / "capped").write_text("1")
    ctl = Controller(top, tier_policies(top), act, AuditLog(d / "audit.db"), source, clock=lambda: now["t"], mode=Mode.AUTO)
    ctl.drive()  # recover what a killed predecessor left
    done = int((d / "ticks").read_text()) if (d / "ticks").exists() else 0
    while done < ticks:
        now["t"] = 1000.0 + 2.0 * done
        atomic_write_text(clock_file, str(now["t"]))  # a kill mid-write must not leave an empty file
        ctl.tick()
        time.sleep(0.05)  # the loop's interval, compressed: room for a kill between steps too
        done += 1
        atomic_write_text(d / "ticks", str(done))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
