"""The one builder of a controller (service/controller/build.py): backend, trail, source and tiers from settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferslice.control.actuators.testbed import TestbedActuator
from inferslice.errors import InputError
from inferslice.service.controller import Mode
from inferslice.service.controller.audit import AuditLog
from inferslice.service.controller.build import ControllerSettings, make_controller
from inferslice.service.controller.source import ApiSource

from .fake_backend import FileActuator
from .helpers import TOPOLOGY


def test_testbed_backend_with_its_sqlite_trail_and_the_api_source(tmp_path: Path) -> None:
    s = ControllerSettings(mode=Mode.APPROVE, audit_path=tmp_path / "a.db", state_dir=tmp_path, tiers=("premium",), interval_s=0.5)
    run = make_controller(s, TOPOLOGY)
    try:
        ctl = run.controller
        assert isinstance(ctl.actuator, TestbedActuator) and ctl.actuator.state_dir == tmp_path
        assert isinstance(ctl.audit, AuditLog) and run.trail == str(tmp_path / "a.db")
        assert isinstance(ctl.source, ApiSource) and ctl.source.api_url == "http://127.0.0.1:8080"
        assert ctl.mode is Mode.APPROVE and run.loop.interval_s == 0.5 and run.elector is None
        assert ctl.policies["premium"].controlled and not ctl.policies["free"].controlled  # observed, never acted on
    finally:
        run.close()


def test_given_parts_win_and_bad_settings_are_clear_errors(tmp_path: Path) -> None:
    fake = FileActuator(tmp_path / "backend.json", TOPOLOGY)
    run = make_controller(ControllerSettings(audit_path=tmp_path / "b.db"), TOPOLOGY, lambda: {}, actuator=fake)
    assert run.controller.actuator is fake and run.loop.interval_s == TOPOLOGY.timing.scrape_interval_s
    assert run.controller.policies["free"].controlled
    with pytest.raises(InputError, match="gold"):
        make_controller(ControllerSettings(tiers=("gold",)), TOPOLOGY)
    with pytest.raises(InputError, match="backend"):
        make_controller(ControllerSettings(backend="nomad"), TOPOLOGY)  # type: ignore[arg-type]
