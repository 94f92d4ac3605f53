"""The one Platform, started as ``inferslice demo`` starts it, from a temporary working directory
with a relative ``--out``: every child (Prometheus, Alertmanager, the API) must get absolute paths.

The demo once failed exactly here: Alertmanager was handed ``demo-out/platform/alertmanager/...``
while its own working directory was that folder. No testbed is needed: the registry names an
exporter (as the testbed's does), so the platform starts Prometheus + rules, Alertmanager with
the bearer credential, and the API with its loop. Skipped without the Debian binaries.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from inferslice.cli.demo import demo_platform
from inferslice.common.ports import free_port
from inferslice.common.registry import Registry
from inferslice.service.platform import Platform
from inferslice.topology import default_topology_path, load_topology

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("prometheus-alertmanager") is None,
    reason="needs the Debian prometheus and prometheus-alertmanager binaries",
)


@pytest.fixture
def started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Platform, Path]]:
    top = load_topology()
    cwd = tmp_path / "somewhere-else"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    state_dir = Path("state")  # relative too: the platform must not care
    state_dir.mkdir()
    # Nothing listens there: Prometheus scrapes a dead target, which the platform must survive.
    reg = Registry(topology_path=str(default_topology_path()), state_dir=str(state_dir), services={"exporter": f"http://127.0.0.1:{free_port()}"})
    plat = demo_platform(top, reg, Path("rel-out"), state_dir)
    try:
        plat.start()
        yield plat, cwd
    finally:
        plat.stop()


def test_every_child_gets_absolute_paths_and_the_platform_runs(started: tuple[Platform, Path]) -> None:
    plat, cwd = started
    out = cwd / "rel-out"
    assert plat.work == out / "platform" and (out / "dashboards").is_dir()
    for proc in plat.procs:
        assert proc.workdir.is_absolute() and proc.log_path.is_absolute(), proc.name
        for arg in proc.argv:
            value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
            if "/" in value and not value.startswith("http"):
                assert os.path.isabs(value), f"{proc.name} got a relative path: {arg}"
    names = {p.name for p in plat.procs}
    assert {"alertmanager", "prometheus", "api"} <= names
    assert httpx.get(f"{plat.api_url}/healthz", timeout=5).status_code == 200
    assert plat.alertmanager is not None and httpx.get(f"{plat.alertmanager.url}/-/ready", timeout=5).status_code == 200
    # Prometheus loaded the generated rules from their absolute path.
    groups = httpx.get(f"{plat.prom.url}/api/v1/rules", timeout=5).json()["data"]["groups"]
    assert groups and all(os.path.isabs(g["file"]) for g in groups)


def test_alertmanager_reaches_the_webhook_with_the_generated_token(started: tuple[Platform, Path]) -> None:
    plat, _ = started
    assert plat.alertmanager is not None
    config = yaml.safe_load((plat.work / "alertmanager" / "alertmanager.yml").read_text())
    auth = config["receivers"][0]["webhook_configs"][0]["http_config"]["authorization"]
    assert auth == {"type": "Bearer", "credentials_file": str(plat.token_file)}
    assert plat.token not in (plat.work / "alertmanager" / "alertmanager.yml").read_text()
    assert plat.token_file.stat().st_mode & 0o077 == 0  # readable by its owner only
    # Without the token the webhook refuses; Alertmanager, holding the file, gets through.
    assert httpx.post(f"{plat.api_url}/v1/alerts", json={}, timeout=5).status_code == 401
    alert = {"labels": {"alertname": "InferSlicePlatformTest", "slice": "premium", "severity": "page"}, "annotations": {}}
    assert httpx.post(f"{plat.alertmanager.url}/api/v2/alerts", json=[alert], timeout=5).status_code == 200
    deadline = time.monotonic() + 30  # the demo's compressed page group_wait (10 s x 0.2) plus delivery
    got: list[dict[str, object]] = []
    while time.monotonic() < deadline and not got:
        got = [a for a in plat.alerts() if a.get("alertname") == "InferSlicePlatformTest"]
        time.sleep(0.3)
    assert got, f"Alertmanager never delivered the alert:\n{plat.diagnostics()}"
