"""The controller's shell pieces: verdicts read back from the API's JSON, /metrics and /healthz."""

from __future__ import annotations

from pathlib import Path

import httpx

from inferslice.control.settings import tier_policies
from inferslice.diagnosis import Attribution, Diagnosis, LatencyShare, Regime, SloState
from inferslice.service.controller import Controller, Mode
from inferslice.service.controller.audit import AuditLog
from inferslice.service.controller.loop import ControlLoop
from inferslice.service.controller.source import diagnosis_from_dict
from inferslice.snapshot import SliceSnapshot

from .fake_backend import FileActuator
from .helpers import TOPOLOGY


def test_diagnosis_round_trips_through_the_api_json() -> None:
    att = Attribution((LatencyShare("ttft_p99", 2.0, 0.2, queue_s=1.5, network_s=0.2, base_s=0.3),), (("queue", 0.8), ("network", 0.2)))
    d = Diagnosis(
        "premium", Regime.NETWORK_LIMITED, (Regime.QUEUE_LIMITED,), 0.8, SloState.BREACHED, attribution=att, slo_signal="ttft_p99_s"
    )
    back = diagnosis_from_dict(d.to_dict())
    assert (back.regime, back.secondary, back.slo, back.attribution) == (d.regime, d.secondary, d.slo, d.attribution)


def test_metrics_and_health(tmp_path: Path) -> None:
    clock = {"t": 100.0}

    def source() -> dict[str, tuple[Diagnosis, SliceSnapshot]]:
        snap = SliceSnapshot("premium", request_rate=2.0, requests_waiting=30.0, queue_time_p99_s=4.0)
        return {"premium": (Diagnosis("premium", Regime.QUEUE_LIMITED, confidence=0.9), snap)}

    act = FileActuator(tmp_path / "b.json", TOPOLOGY)
    ctl = Controller(TOPOLOGY, tier_policies(TOPOLOGY), act, AuditLog(tmp_path / "a.db"), source, clock=lambda: clock["t"], mode=Mode.AUTO)
    loop = ControlLoop(ctl, 2.0)
    port = loop.serve("127.0.0.1", 0)
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 503  # no step yet
        loop.step()
        h = httpx.get(f"http://127.0.0.1:{port}/healthz")
        assert h.status_code == 200 and h.json()["mode"] == "auto"
        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        # 1 replica serving 2 req/s with 30 waiting: (2 + 30/8) / (2 x 0.8) = 3.6 -> 4
        assert 'inferslice_control_desired{kind="set_replicas",slice="premium"} 4.0' in text
        assert 'inferslice_control_applied{kind="set_replicas",slice="premium"} 4.0' in text
        assert 'inferslice_control_actions_total{kind="set_replicas",outcome="applied",slice="premium"} 1.0' in text
        clock["t"] = 200.0  # steps stopped: unhealthy after three intervals
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 503
    finally:
        loop.close()
