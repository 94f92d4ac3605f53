"""The one real-Prometheus (and Alertmanager, VictoriaMetrics) launcher: Debian's binaries, private dirs, loopback only.

Both listen on 127.0.0.1, keep their data in a directory we own, and are stopped by PID.
Prometheus's first scrape lands ~5 s after start whatever the interval (CONTRACTS.md), so
callers that need data use ``wait_for_series``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from inferslice.common.ports import free_port
from inferslice.common.processes import Arg, ManagedProcess, absolute, find_binary
from inferslice.common.promtime import format_duration
from inferslice.errors import PermanentError, RetryableError

PROMETHEUS_BIN = "prometheus"
ALERTMANAGER_BIN = "prometheus-alertmanager"
VICTORIA_METRICS_BIN = "victoria-metrics"


@dataclass
class ScrapeJob:
    name: str
    targets: list[str]  # host:port
    metrics_path: str = "/metrics"
    labels: dict[str, str] = field(default_factory=dict)


def prometheus_config(
    jobs: list[ScrapeJob], scrape_interval_s: float, rule_files: list[str] | None = None, alertmanager: str | None = None
) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "global": {
            "scrape_interval": format_duration(scrape_interval_s),
            "evaluation_interval": format_duration(scrape_interval_s),
            "scrape_timeout": format_duration(max(0.5, scrape_interval_s * 0.8)),
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
        # Prometheus reads rule files relative to its config file; absolute paths cannot be misread.
        cfg["rule_files"] = [str(absolute(p)) for p in rule_files]
    if alertmanager:
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return cfg


class Prometheus(ManagedProcess):
    def __init__(
        self,
        workdir: str | os.PathLike[str],
        config: dict[str, Any] | str,
        port: int | None = None,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        retention: str = "1d",  # a run's data; tests that backfill old blocks pass a longer one
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        work = absolute(workdir)
        work.mkdir(parents=True, exist_ok=True)
        config_path = work / "prometheus.yml"
        config_path.write_text(config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False))
        argv: list[Arg] = [
            find_binary(PROMETHEUS_BIN),
            ("--config.file", config_path),
            ("--storage.tsdb.path", Path(data_dir) if data_dir is not None else work / "data"),
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
            f"--storage.tsdb.retention.time={retention}",
        ]
        super().__init__("prometheus", argv, work, f"{self.url}/-/ready")

    def query(self, promql: str, at_s: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": promql}
        if at_s is not None:
            params["time"] = f"{at_s:.3f}"
        try:
            resp = httpx.get(f"{self.url}/api/v1/query", params=params, timeout=5.0)
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
    def __init__(self, workdir: str | os.PathLike[str], config_yaml: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        work = absolute(workdir)
        work.mkdir(parents=True, exist_ok=True)
        config_path = work / "alertmanager.yml"
        config_path.write_text(config_yaml)
        argv: list[Arg] = [
            find_binary(ALERTMANAGER_BIN),
            ("--config.file", config_path),
            ("--storage.path", work / "am-data"),
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",  # no gossip: a single private instance
        ]
        super().__init__("alertmanager", argv, work, f"{self.url}/-/ready")


class VictoriaMetrics(ManagedProcess):
    """Single-node VictoriaMetrics (Debian ``victoria-metrics``): the query layer over Prometheus shards.

    It takes the shards' remote-write at ``/api/v1/write`` and answers PromQL at ``/api/v1/query``.
    ``-search.latencyOffset`` is 1 s instead of its 30 s default: instant queries at "now" otherwise
    ignore the last 30 s, which for a diagnosis round means answering with a window long gone."""

    def __init__(self, workdir: str | os.PathLike[str], port: int | None = None, *, extra: tuple[str, ...] = ()) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.write_url = f"{self.url}/api/v1/write"
        work = absolute(workdir)
        argv: list[Arg] = [
            find_binary(VICTORIA_METRICS_BIN),
            f"-storageDataPath={work / 'vm-data'}",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            "-retentionPeriod=1d",
            "-search.latencyOffset=1s",
            "-loggerLevel=WARN",
            *extra,
        ]
        super().__init__("victoria-metrics", argv, work, f"{self.url}/health")
