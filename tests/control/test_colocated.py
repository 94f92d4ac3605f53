"""The controller co-located with the API: verdicts in process (the service's objects, no JSON round
trip), the mode switched through ``PUT /v1/control/mode`` with the token and recorded in the trail."""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from pathlib import Path

import pytest
from fastapi import Depends

from inferslice.diagnosis import Regime
from inferslice.errors import InputError
from inferslice.service.app import api_app
from inferslice.service.controller import Mode
from inferslice.service.controller.api import mount_control, mount_controller
from inferslice.service.controller.audit import AuditLog
from inferslice.service.controller.build import ControllerSettings, make_controller
from inferslice.service.controller.source import InProcessSource
from inferslice.service.diagnosis import DiagnosisService
from inferslice.service.http import BearerAuth
from inferslice.service.store import Store
from inferslice.snapshot import Reference, SliceSnapshot

from .fake_backend import FileActuator
from .helpers import TOPOLOGY

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "t0ken"
QUEUED = SliceSnapshot(
    "premium", window_end_s=100.0, window_s=8.0, request_rate=2.0, requests_waiting=30.0, requests_running=12.0,
    queue_time_p99_s=4.0, ttft_p99_s=4.3, ttft_p50_s=2.0, tpot_p50_s=0.03, output_tokens_per_s=300.0, replicas=1.0,
    replicas_max=6.0, gpu_share=1.0,
)  # fmt: skip


def test_the_source_hands_over_the_services_objects(tmp_path: Path) -> None:
    service = DiagnosisService(Store(":memory:"), TOPOLOGY, clock=lambda: 100.0)
    source = InProcessSource(service, ["premium", "free"])
    assert source() == {}  # nothing judged yet: no verdict, not a stale one
    service.set_reference("premium", Reference(ttft_p50_s=0.1, tpot_p50_s=0.025, output_tokens_per_s=400.0))
    result = service.ingest(QUEUED)
    got = source()
    assert list(got) == ["premium"]
    diagnosis, snapshot = got["premium"]
    assert diagnosis is result.diagnosis and diagnosis.regime is Regime.QUEUE_LIMITED  # the object, not a copy rebuilt from JSON
    assert snapshot is not None and snapshot.ref_tpot_p50_s == 0.025 and snapshot.slo_ttft_p99_s == 0.5  # reference and SLO filled in


def test_mode_switch_through_the_api_is_authenticated_and_recorded(tmp_path: Path) -> None:
    service = DiagnosisService(Store(":memory:"), TOPOLOGY, clock=lambda: 100.0)
    audit = AuditLog(tmp_path / "audit.db")
    run = make_controller(
        ControllerSettings(mode=Mode.DRY_RUN, audit_path=tmp_path / "audit.db"),
        TOPOLOGY,
        InProcessSource(service, TOPOLOGY.tier_names),
        clock=lambda: 100.0,
        actuator=FileActuator(tmp_path / "backend.json", TOPOLOGY),
        audit=audit,
    )
    app = api_app(service, token=TOKEN)
    mount_control(app, audit, [Depends(BearerAuth(TOKEN))], lambda: 100.0)
    mount_controller(app, run.controller, [Depends(BearerAuth(TOKEN))])
    client = TestClient(app)
    for end in (100.0, 102.0):  # a queue verdict under 0.75 confidence acts on its second window
        service.ingest(dataclasses.replace(QUEUED, window_end_s=end))
        run.loop.step()
    assert [r["state"] for r in client.get("/v1/actions").json()] == ["dry_run"]  # decided from the in-process verdict
    assert client.get("/v1/control").json()["mode"] == "dry-run"
    assert client.put("/v1/control/mode", json={"mode": "auto"}).status_code == 401
    r = client.put("/v1/control/mode", json={"mode": "auto", "by": "alice"}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200 and r.json() == {"mode": "auto", "previous": "dry-run"}
    assert run.controller.mode is Mode.AUTO and client.get("/v1/control").json()["mode"] == "auto"
    [event] = [e for e in client.get("/v1/control/events").json() if e["kind"] == "mode"]
    assert event["message"] == "alice: mode dry-run -> auto"
    bad = client.put("/v1/control/mode", json={"mode": "yolo"}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert bad.status_code == 422
    run.close()


def test_a_controller_in_the_api_needs_its_trail() -> None:
    from inferslice.cli import api as api_cli

    parser = argparse.ArgumentParser()
    api_cli.add_arguments(parser)
    with pytest.raises(InputError, match="--control-db"):
        api_cli.run(parser.parse_args(["--control", "auto"]))
