"""Start and stop a one-node Ray cluster with Serve, in the caller's network namespace.

Ray binds non-loopback addresses and, since 2.60, turns token auth on by default (CONTRACTS.md):
callers run this inside a private network namespace (a test's ``unshare --net``, or the testbed's
gateway PoP namespace), with ``RAY_AUTH_MODE=disabled`` and the dashboard (Serve's REST API) on
127.0.0.1. The node's metrics agent serves every Ray metric on ``metrics_port``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferslice.errors import ConfigError

DASHBOARD_PORT = 8265  # Ray's default; Serve's REST API lives there
START_TIMEOUT_S = 120.0  # ray start on 2 busy cores took 10-15 s here; leave room
REST_TIMEOUT_S = 10.0


def ray_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "RAY_AUTH_MODE": "disabled",  # token auth (2.60 default) off inside the private namespace
        "RAY_USAGE_STATS_ENABLED": "0",  # no phoning home (there is no network anyway)
        "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000",  # replica metrics pushed each second, not 10 s
    })
    return env


@dataclass
class RayCluster:
    temp_dir: Path  # Ray's session files; one per cluster so parallel runs never share /tmp/ray
    metrics_port: int
    node_ip: str = "127.0.0.1"
    dashboard_port: int = DASHBOARD_PORT
    num_cpus: int = 2
    process: subprocess.Popen[bytes] | None = None  # `ray start --block`: Ray's processes are its own

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}/api/serve/applications/"

    def _ray(self) -> str:
        exe = Path(sys.executable).with_name("ray")
        found = str(exe) if exe.exists() else shutil.which("ray")
        if not found:
            raise ConfigError("the ray CLI is missing: pip install 'inferslice[ray]'", field="serving")
        return found

    def start(self) -> None:
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            self._ray(), "start", "--head", f"--node-ip-address={self.node_ip}", f"--num-cpus={self.num_cpus}",
            "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}", f"--metrics-export-port={self.metrics_port}",
            f"--temp-dir={self.temp_dir}", "--disable-usage-stats", "--include-dashboard=true", "--block",
        ]
        # --block keeps `ray start` in the foreground as the parent of every Ray process, in a session of
        # its own: stop() ends exactly those (never `ray stop`, which kills every Ray on the machine).
        log = (self.temp_dir / "ray-start.log").open("wb")
        self.process = subprocess.Popen(cmd, env=ray_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_rest()
        except BaseException:
            self.stop()
            raise

    def _wait_rest(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"ray start exited with {self.process.returncode}: see {self.temp_dir / 'ray-start.log'}")
            try:
                self.get()
                return
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(0.5)
        raise TimeoutError("Ray's dashboard (Serve REST API) did not answer")

    def get(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.rest_url, timeout=REST_TIMEOUT_S) as r:
            obj = json.loads(r.read())
        if not isinstance(obj, dict):
            raise ValueError("serve applications: not an object")
        return obj

    def put(self, config: dict[str, Any]) -> None:
        req = urllib.request.Request(self.rest_url, data=json.dumps(config).encode(), method="PUT",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=REST_TIMEOUT_S) as r:
                r.read()
        except urllib.error.HTTPError as err:
            raise ConfigError(f"Serve refused the config ({err.code}): {err.read().decode(errors='replace')[-1500:]}",
                              field="serve_config") from None

    def wait_running(self, apps: list[str], timeout_s: float = START_TIMEOUT_S, replicas: dict[str, int] | None = None) -> dict[str, Any]:
        """Wait until every app is RUNNING (and, if given, has that many RUNNING replicas)."""
        deadline = time.monotonic() + timeout_s
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            last = self.get()
            got = last.get("applications") or {}
            if all(_app_running(got.get(a), (replicas or {}).get(a)) for a in apps):
                return last
            time.sleep(0.5)
        raise TimeoutError(f"serve applications not running in {timeout_s:.0f} s: {json.dumps(last)[:2000]}")

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM to `ray start --block` (it stops what it started), then, after ``grace_s``, SIGKILL to
        its session's group."""
        p = self.process
        if p is None:
            return
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # stragglers of that session only
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)
        self.process = None


def running_replicas(app: dict[str, Any] | None) -> int:
    if not app:
        return 0
    return sum(1 for d in (app.get("deployments") or {}).values() for r in d.get("replicas") or [] if r.get("state") == "RUNNING")


def _app_running(app: dict[str, Any] | None, replicas: int | None) -> bool:
    if not app or app.get("status") != "RUNNING":
        return False
    return replicas is None or running_replicas(app) == replicas
