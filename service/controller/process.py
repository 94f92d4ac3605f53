"""The controller inside the one ``Platform`` stack: co-located with the API (``inferslice api
--control MODE``), so it reads the diagnosis loop's verdicts in process, and the API serves its
actions from the same audit trail; its /metrics port is scraped by Prometheus.

    settings = with_controller(settings, work, Mode.DRY_RUN)   # audit file, metrics port, mode
    platform.controller.restart(Mode.AUTO)                      # PUT /v1/control/mode with the platform's token

Switching mode is the API's ``PUT /v1/control/mode`` (recorded in the trail); the audit log and the
controller's states carry on across it, as across a restart. A split deployment (the controller in
its own process, verdicts over HTTP) is ``inferslice control --api URL``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inferslice.common.ports import free_port
from inferslice.errors import ConfigError, RetryableError
from inferslice.service.controller.core import Mode

if TYPE_CHECKING:
    from inferslice.service.platform import ControllerFactory, Platform, PlatformSettings


def control_settings(work: Path) -> dict[str, Any]:
    """The PlatformSettings fields a controller needs: its audit file and its /metrics port."""
    return {"control_db": Path(work).absolute() / "control.db", "control_port": free_port()}


class ColocatedController:
    """The handle the platform keeps for the controller running inside its API process."""

    def __init__(self, platform: Platform, mode: Mode) -> None:
        s = platform.settings
        if s.control_db is None or s.control_port is None or s.control_mode is None:
            raise ConfigError("the platform settings name no control_db / control_port / control_mode (see with_controller)")
        self.platform = platform
        self.port = s.control_port
        self.mode = mode

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def restart(self, mode: Mode) -> None:
        """Switch the running controller to ``mode`` (the name kept from when a switch was a restart)."""
        r = self.platform.api_write("PUT", "/v1/control/mode", {"mode": mode.value, "by": "platform"})
        if r.status_code != 200:
            raise RetryableError(f"PUT /v1/control/mode {mode.value}: HTTP {r.status_code}: {r.text[:200]}")
        self.mode = mode

    def stop(self) -> None:
        return None  # it stops with the API process

    @staticmethod
    def factory(mode: Mode) -> ControllerFactory:
        def make(platform: Platform) -> ColocatedController:
            return ColocatedController(platform, mode)

        return make


def with_controller(settings: PlatformSettings, work: Path, mode: Mode) -> PlatformSettings:
    """``settings`` with a controller in ``mode`` inside the API."""
    return replace(settings, controller=ColocatedController.factory(mode), control_mode=mode.value, **control_settings(work))
