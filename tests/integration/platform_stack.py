"""The monitoring platform around the integration testbed, built from the same pieces as
``inferslice demo`` (testbed.monitoring, dashboards.build): the exporter on the registry, a real
Prometheus scraping it (and the load generators' client metrics and the API's /metrics) every
second with the generated rules, Alertmanager routing to the API's webhook, and the API running
its diagnosis loop from Prometheus. Every process is stopped by PID.

Alert holds and Alertmanager grouping are generated with ``hold_scale`` so that a 10 m ticket
fires in seconds; everything else is the production configuration.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from inferslice.common.ports import free_port
from inferslice.common.processes import ManagedProcess, terminate
from inferslice.common.prometheus import Alertmanager, Prometheus, ScrapeJob, prometheus_config
from inferslice.common.registry import Registry
from inferslice.dashboards import build as dashboards_build
from inferslice.dashboards.build import dump_yaml
from inferslice.topology import Topology

PY = [sys.executable, "-m", "inferslice.cli"]
SCRAPE_INTERVAL_S = 1.0  # the brief's "scrape interval 1 s": two scrapes bound the cap-follow check
HOLD_SCALE = 0.01  # 10 m -> 6 s, 1 m -> 1 s: the breach scenario fits in well under a minute
API_INTERVAL_S = 1.0  # one verdict per scrape
API_WINDOW_S = 8.0  # the API's default window: eight 1 s scrapes, enough for a P99


@dataclass
class LoadRun:
    """One ``inferslice load`` process in the client namespace."""

    tier: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    result_path: Path
    records_path: Path
    started_s: float

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"load on {self.tier} still running after {timeout_s:.0f} s: {self.log_tail()}") from None

    def stop(self) -> None:
        terminate(self.proc, timeout_s=5)

    def log_tail(self, n: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def records(self) -> list[dict[str, Any]]:
        try:
            return [json.loads(line) for line in self.records_path.read_text().splitlines() if line.strip()]
        except OSError:
            return []

    def result(self) -> dict[str, Any]:
        try:
            body: dict[str, Any] = json.loads(self.result_path.read_text())
            return body
        except (OSError, ValueError):
            return {}


@dataclass
class Platform:
    registry: Registry
    topology: Topology
    state_dir: Path
    work: Path
    exporter_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    load_ports: dict[str, int] = field(default_factory=dict)
    procs: list[ManagedProcess] = field(default_factory=list)
    loads: list[LoadRun] = field(default_factory=list)
    prometheus: Prometheus | None = None
    alertmanager: Alertmanager | None = None
    artefacts: dashboards_build.Artefacts | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def prom(self) -> Prometheus:
        assert self.prometheus is not None, "the platform is not started"
        return self.prometheus

    # -- start / stop ------------------------------------------------------------------------------
    def start(self) -> None:
        for tier in self.topology.tier_names:
            self.load_ports[tier] = free_port()
        self.artefacts = art = dashboards_build.generate(self.topology, api_url=self.api_url, hold_scale=HOLD_SCALE)
        exporter = ManagedProcess(
            "exporter",
            [*PY, "exporter", "--registry", str(self.state_dir), "--port", str(self.exporter_port), "--host", "127.0.0.1"],
            self.work,
            f"http://127.0.0.1:{self.exporter_port}/healthz",
        )
        self._start(exporter)
        self.alertmanager = Alertmanager(self.work / "alertmanager", dump_yaml(art.alertmanager))
        self._start(self.alertmanager)
        rules = self.work / "rules.yml"
        rules.write_text(dump_yaml(art.rule_file))
        jobs = [
            ScrapeJob("inferslice-exporter", [f"127.0.0.1:{self.exporter_port}"]),
            ScrapeJob("inferslice-load", [f"127.0.0.1:{p}" for p in self.load_ports.values()]),
            ScrapeJob("inferslice-api", [f"127.0.0.1:{self.api_port}"]),
        ]
        cfg = prometheus_config(jobs, SCRAPE_INTERVAL_S, [str(rules)], f"127.0.0.1:{self.alertmanager.port}")
        self.prometheus = Prometheus(self.work / "prometheus", cfg)
        self._start(self.prometheus)
        api = ManagedProcess(
            "api",
            [
                *PY, "api", "--port", str(self.api_port), "--db", str(self.work / "inferslice.db"),
                "--topology", self.registry.topology_path, "--source", "prometheus", "--prometheus-url", self.prometheus.url,
                "--perspective", "client", "--interval-s", str(API_INTERVAL_S), "--window-s", str(API_WINDOW_S),
                "--log-level", "warning",
            ],
            self.work,
            f"{self.api_url}/healthz",
        )  # fmt: skip
        self._start(api)

    def _start(self, proc: ManagedProcess) -> None:
        proc.start()
        self.procs.append(proc)

    def stop(self) -> None:
        for run in self.loads:
            run.stop()
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()

    # -- load --------------------------------------------------------------------------------------
    def start_load(self, tier: str, concurrency: int, duration_s: float, client_netns: str, seed: int = 0) -> LoadRun:
        stem = self.work / f"load-{tier}-{len(self.loads)}"
        log_path, result_path, records_path = Path(f"{stem}.log"), Path(f"{stem}.result.json"), Path(f"{stem}.records.jsonl")
        argv = [
            *PY, "load", "--tier", tier, "--topology", self.registry.topology_path, "--netns", client_netns,
            "--concurrency", str(concurrency), "--duration-s", str(duration_s), "--drain-timeout-s", "3",
            "--seed", str(seed), "--goodput", "ttft:500", "--otel-port", str(self.load_ports[tier]),
            "--save-result", str(result_path), "--save-records", str(records_path), "--quiet",
        ]  # fmt: skip
        started_s = time.time()
        with log_path.open("wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        run = LoadRun(tier, proc, log_path, result_path, records_path, started_s)
        self.loads.append(run)
        return run

    # -- Prometheus reads ----------------------------------------------------------------------------
    def query(self, promql: str, at_s: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": promql}
        if at_s is not None:
            params["time"] = f"{at_s:.3f}"
        body = httpx.get(f"{self.prom.url}/api/v1/query", params=params, timeout=5.0).json()
        assert body.get("status") == "success", f"Prometheus rejected {promql!r}: {body}"
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def raw_samples(self, selector: str, last_s: int) -> list[tuple[float, float]]:
        """The stored samples (scrape timestamp, value) of the single series ``selector`` over the last ``last_s`` seconds."""
        result = self.query(f"{selector}[{last_s}s]")
        assert len(result) == 1, f"expected one series for {selector}, got {len(result)}: {[r['metric'] for r in result]}"
        return [(float(t), float(v)) for t, v in result[0]["values"]]

    def wait_for(self, promql: str, timeout_s: float, predicate: Any = bool) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(promql)
            if predicate(result):
                return result
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout_s:.0f} s waiting on {promql!r}; last result: {result}\n{self.diagnostics()}")

    # -- API reads -----------------------------------------------------------------------------------
    def api_alerts(self) -> list[dict[str, Any]]:
        body = httpx.get(f"{self.api_url}/v1/alerts", timeout=5.0).json()
        return list(body) if isinstance(body, list) else list(body.get("alerts", []))

    def api_get(self, path: str) -> Any:
        try:
            return httpx.get(f"{self.api_url}{path}", timeout=5.0).json()
        except (httpx.HTTPError, ValueError) as err:
            return f"<{err}>"

    # -- failure context -----------------------------------------------------------------------------
    def diagnostics(self) -> str:
        parts = []
        for proc in self.procs:
            parts.append(f"--- {proc.name} (pid {proc.pid}) log tail:\n{proc.log_tail(1200)}")
        for run in self.loads[-4:]:
            parts.append(f"--- load {run.tier} (pid {run.proc.pid}, rc {run.proc.poll()}) log tail:\n{run.log_tail(800)}")
        try:
            targets = httpx.get(f"{self.prom.url}/api/v1/targets", timeout=5.0).json()["data"]["activeTargets"]
            parts.append("--- scrape targets: " + "; ".join(f"{t['scrapeUrl']}={t['health']} {t.get('lastError', '')}" for t in targets))
        except (httpx.HTTPError, ValueError, KeyError, AssertionError) as err:
            parts.append(f"--- scrape targets unavailable: {err}")
        return "\n".join(parts)
