"""Run a real Prometheus (and Alertmanager) for the testbed: Debian's binaries, private dirs.

Both listen on 127.0.0.1 only, keep their data in a directory we own, and are stopped by PID.
Prometheus's first scrape lands ~5 s after start whatever the interval (CONTRACTS.md), so
callers that need data use ``wait_for_series``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from inferslice.errors import PermanentError, RetryableError

PROMETHEUS_BIN = "prometheus"
ALERTMANAGER_BIN = "prometheus-alertmanager"
READY_TIMEOUT_S = 30.0  # Prometheus is ready in ~0.2 s; Alertmanager in ~1 s; allow a loaded machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_binary(name: str) -> str:
    path = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None)
    if path is None:
        raise PermanentError(f"{name} is not installed (Debian package {name if name != PROMETHEUS_BIN else 'prometheus'})")
    return path


@dataclass
class ScrapeJob:
    name: str
    targets: list[str]  # host:port
    metrics_path: str = "/metrics"
    labels: dict[str, str] = field(default_factory=dict)


def prom_duration(seconds: float) -> str:
    """Seconds as a Prometheus duration: Prometheus rejects fractions ("0.8s"), so sub-second parts go in ms."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def prometheus_config(
    jobs: list[ScrapeJob], scrape_interval_s: float, rule_files: list[str] | None = None, alertmanager: str | None = None
) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "global": {
            "scrape_interval": prom_duration(scrape_interval_s),
            "evaluation_interval": prom_duration(scrape_interval_s),
            "scrape_timeout": prom_duration(max(0.5, scrape_interval_s * 0.8)),
        },
        "scrape_configs": [
            {
                "job_name": j.name,
                "metrics_path": j.metrics_path,
                "static_configs": [{"targets": j.targets, "labels": j.labels}] if j.labels else [{"targets": j.targets}],
            }
            for j in jobs
        ],
    }
    if rule_files:
        cfg["rule_files"] = rule_files
    if alertmanager:
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return cfg


def terminate(proc: subprocess.Popen[bytes] | None, timeout_s: float = 10.0) -> None:
    """Stop a child: SIGTERM, then SIGKILL if it has not exited within ``timeout_s``."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


class ManagedProcess:
    """A child process with a log file, stopped by PID (TERM, then KILL)."""

    def __init__(self, name: str, argv: list[str], workdir: Path, ready_url: str) -> None:
        self.name = name
        self.argv = argv
        self.workdir = workdir
        self.ready_url = ready_url
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / f"{name}.log"

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PermanentError(f"{self.name} exited ({self.proc.returncode}): {self.log_tail()}")
            try:
                if httpx.get(self.ready_url, timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RetryableError(f"{self.name} not ready after {timeout_s:.0f} s: {self.log_tail()}")

    def log_tail(self, n: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def stop(self) -> None:
        terminate(self.proc)


class Prometheus(ManagedProcess):
    def __init__(self, workdir: Path, config: dict[str, Any], port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        argv = [
            find_binary(PROMETHEUS_BIN),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=1d",
        ]
        super().__init__("prometheus", argv, workdir, f"{self.url}/-/ready")

    def query(self, promql: str) -> list[dict[str, Any]]:
        try:
            resp = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5.0)
        except httpx.HTTPError as err:
            raise RetryableError(f"prometheus query failed: {err}") from None
        body = resp.json()
        if body.get("status") != "success":
            raise PermanentError(f"prometheus rejected {promql!r}: {body.get('error')}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for_series(self, promql: str, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.query(promql)
            if result:
                return result
            if time.monotonic() > deadline:
                raise RetryableError(f"no series for {promql!r} after {timeout_s:.0f} s")
            time.sleep(0.5)


class Alertmanager(ManagedProcess):
    def __init__(self, workdir: Path, config_yaml: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "alertmanager.yml").write_text(config_yaml)
        argv = [
            find_binary(ALERTMANAGER_BIN),
            f"--config.file={workdir / 'alertmanager.yml'}",
            f"--storage.path={workdir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",  # no gossip: a single private instance
        ]
        super().__init__("alertmanager", argv, workdir, f"{self.url}/-/ready")
