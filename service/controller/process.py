"""The controller inside the one ``Platform`` stack: ``inferslice control`` as a managed child next to
the API (which serves its actions from the same audit file), scraped by Prometheus.

    settings = PlatformSettings(..., **control_settings(work))     # audit file + metrics port
    settings = replace(settings, controller=ControllerProcess.factory(Mode.AUTO, settings))

``ControllerProcess.restart(mode)`` switches mode between story phases: the audit log and the
controller's state persist across the restart (that is what they are for).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from inferslice.common.ports import free_port
from inferslice.common.processes import ManagedProcess
from inferslice.errors import ConfigError
from inferslice.service.controller.core import Mode

if TYPE_CHECKING:
    from inferslice.service.platform import ControllerFactory, Platform, PlatformSettings


def control_settings(work: Path) -> dict[str, Any]:
    """The PlatformSettings fields a controller needs: its audit file and its /metrics port."""
    return {"control_db": Path(work).absolute() / "control.db", "control_port": free_port()}


class ControllerProcess:
    def __init__(self, platform: Platform, mode: Mode) -> None:
        s = platform.settings
        if s.control_db is None or s.control_port is None:
            raise ConfigError("the platform settings name no control_db / control_port (see control_settings)")
        self.platform = platform
        self.audit = s.control_db
        self.port = s.control_port
        self.mode = mode
        self.proc: ManagedProcess | None = None
        self.start()

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def start(self) -> None:
        from inferslice.service.platform import PY

        p = self.platform
        argv = [
            *PY, "control", "--mode", self.mode.value, "--api", p.api_url, "--audit", self.audit, "--state-dir", p.state_dir,
            "--topology", Path(p.registry.topology_path), "--listen", f"127.0.0.1:{self.port}",
        ]  # fmt: skip
        self.proc = ManagedProcess(f"control-{self.mode.value}", argv, p.work, self.metrics_url)
        self.proc.start()

    def restart(self, mode: Mode) -> None:
        self.stop()
        self.mode = mode
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    @staticmethod
    def factory(mode: Mode) -> ControllerFactory:
        def make(platform: Platform) -> ControllerProcess:
            return ControllerProcess(platform, mode)

        return make


def with_controller(settings: PlatformSettings, work: Path, mode: Mode) -> PlatformSettings:
    """``settings`` with a controller in ``mode`` started after the API."""
    from dataclasses import replace

    return replace(settings, controller=ControllerProcess.factory(mode), **control_settings(work))
