"""The one ``Platform`` stack around a running system: exporter, Prometheus (+ rules), Alertmanager,
the diagnosis API with its loop, an optional controller, and load generators; all stopped by PID.

Used by ``inferslice demo``, ``inferslice bench diagnosis`` (exporter, Prometheus and loads only:
its loops run in-process), the integration tests, and through them ``inferslice api`` (the API is
started as that command). Every child is a ``common.processes.ManagedProcess``, so every path it
receives is absolute whatever the caller's working directory or ``--out``.

Mutations of the API need its bearer token: the platform writes a fresh one to
``<work>/api-token`` (mode 0600), hands the file to the API (``--token-file``) and to
Alertmanager's webhook (``credentials_file``), and uses it for its own writes.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx

from inferslice.common.ports import free_port
from inferslice.common.processes import Arg, ManagedProcess, absolute
from inferslice.common.prometheus import Alertmanager, Prometheus, ScrapeJob, prometheus_config
from inferslice.common.registry import Registry
from inferslice.dashboards import build as dashboards_build
from inferslice.dashboards.build import dump_yaml
from inferslice.errors import PermanentError, RetryableError
from inferslice.topology import Topology

PY: list[Arg] = [sys.executable, "-m", "inferslice.cli"]
TOKEN_FILE = "api-token"


class Stoppable(Protocol):
    def stop(self) -> None: ...


# A controller hook: called once the API is up, returns what to stop at teardown.
ControllerFactory = Callable[["Platform"], Stoppable]


@dataclass(frozen=True)
class PlatformSettings:
    scrape_interval_s: float  # Prometheus's scrape and rule-evaluation interval (also the API loop's default)
    hold_scale: float = 1.0  # alert holds and Alertmanager grouping scaled for compressed runs (1: production)
    alertmanager: bool = True  # route the generated alerts to the API's webhook
    api: bool = True  # run `inferslice api` with its diagnosis loop over Prometheus
    perspective: Literal["engine", "client"] = "client"  # client TTFT/TPOT: a bandwidth cap shows only at the client
    api_interval_s: float | None = None  # None: one verdict per scrape
    api_window_s: float | None = None  # None: the API's default window
    reuse_exporter: bool = False  # scrape the exporter the testbed registry lists instead of starting one
    load_keys: Sequence[str] = ()  # load generators' names, known up front so Prometheus scrapes them (default: the tiers)
    goodput: str = "ttft:500"  # the load generators' goodput criterion (vllm bench's --goodput)
    db_path: Path | None = None  # the API's SQLite history (None: <work>/inferslice.db)
    controller: ControllerFactory | None = None  # the control loop, started after the API (None: diagnosis only)
    control_db: Path | None = None  # the controller's audit log: the API serves its actions (approve/reject) from it
    control_port: int | None = None  # the controller's /metrics, scraped as job inferslice-control
    control_mode: str | None = None  # run the controller inside the API in this mode (verdicts in process); None: no controller there


@dataclass
class LoadRun:
    """One ``inferslice load`` process in the client namespace."""

    key: str
    tier: str
    process: ManagedProcess
    result_path: Path | None
    records_path: Path | None
    started_s: float

    @property
    def proc(self) -> Any:
        return self.process.proc

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def wait(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout_s)
        except Exception as err:  # subprocess.TimeoutExpired: stop it and say so
            self.stop()
            raise AssertionError(f"load on {self.tier} still running after {timeout_s:.0f} s: {self.log_tail()}") from err

    def stop(self) -> None:
        self.process.stop(timeout_s=5)

    def log_tail(self, n: int = 1500) -> str:
        return self.process.log_tail(n)

    def records(self) -> list[dict[str, Any]]:
        if self.records_path is None:
            return []
        try:
            return [json.loads(line) for line in self.records_path.read_text().splitlines() if line.strip()]
        except OSError:
            return []

    def result(self) -> dict[str, Any]:
        if self.result_path is None:
            return {}
        try:
            body: dict[str, Any] = json.loads(self.result_path.read_text())
            return body
        except (OSError, ValueError):
            return {}


def write_token(path: Path) -> str:
    """A fresh random token in ``path``, readable by this user only."""
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


@dataclass
class Platform:
    registry: Registry
    topology: Topology
    state_dir: Path
    work: Path
    settings: PlatformSettings
    exporter_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    load_ports: dict[str, int] = field(default_factory=dict)
    procs: list[ManagedProcess] = field(default_factory=list)
    loads: dict[str, LoadRun] = field(default_factory=dict)  # the running (or last) load generator per key
    prometheus: Prometheus | None = None
    alertmanager: Alertmanager | None = None
    artefacts: dashboards_build.Artefacts | None = None
    controller: Stoppable | None = None
    exporter_url: str = ""
    token: str = ""
    _runs: int = 0

    def __post_init__(self) -> None:
        self.work = absolute(self.work)  # children and reports must not depend on the caller's cwd
        self.state_dir = absolute(self.state_dir)
        for key in self.settings.load_keys or self.topology.tier_names:
            self.load_ports.setdefault(key, free_port())
        self.token_file = self.work / TOKEN_FILE

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def prom(self) -> Prometheus:
        if self.prometheus is None:
            raise PermanentError("the platform is not started")
        return self.prometheus

    @property
    def targets(self) -> list[str]:
        """Every /metrics URL Prometheus scrapes (the embedded source scrapes the same)."""
        return [f"{self.exporter_url}/metrics", *(f"http://127.0.0.1:{p}/metrics" for p in self.load_ports.values())]

    # -- start / stop ------------------------------------------------------------------------------
    def start(self) -> None:
        s = self.settings
        self.work.mkdir(parents=True, exist_ok=True)
        self.token = write_token(self.token_file)
        self.artefacts = art = dashboards_build.generate(
            self.topology, api_url=self.api_url, hold_scale=s.hold_scale, token_file=str(self.token_file)
        )
        listed = self.registry.services.get("exporter") if s.reuse_exporter else None
        if listed is not None:
            self.exporter_url = listed.rstrip("/")
        else:
            self._start(
                ManagedProcess(
                    "exporter",
                    [*PY, "exporter", "--registry", self.state_dir, "--port", str(self.exporter_port), "--host", "127.0.0.1"],
                    self.work,
                    f"http://127.0.0.1:{self.exporter_port}/healthz",
                )
            )
            self.exporter_url = f"http://127.0.0.1:{self.exporter_port}"
        if s.alertmanager:
            self.alertmanager = Alertmanager(self.work / "alertmanager", dump_yaml(art.alertmanager))
            self._start(self.alertmanager)
        rules = self.work / "rules.yml"
        rules.write_text(dump_yaml(art.rule_file))
        jobs = [
            ScrapeJob("inferslice-exporter", [self.exporter_url.removeprefix("http://")]),
            ScrapeJob("inferslice-load", [f"127.0.0.1:{p}" for p in self.load_ports.values()]),
        ]
        if s.api:
            jobs.append(ScrapeJob("inferslice-api", [f"127.0.0.1:{self.api_port}"]))
        if s.control_port is not None:
            jobs.append(ScrapeJob("inferslice-control", [f"127.0.0.1:{s.control_port}"]))
        am = f"127.0.0.1:{self.alertmanager.port}" if self.alertmanager else None
        self.prometheus = Prometheus(self.work / "prometheus", prometheus_config(jobs, s.scrape_interval_s, [str(rules)], am))
        self._start(self.prometheus)
        if s.api:
            self._start(ManagedProcess("api", self._api_argv(), self.work, f"{self.api_url}/healthz"))
        if s.controller is not None:
            self.controller = s.controller(self)

    def _api_argv(self) -> list[Arg]:
        s = self.settings
        argv: list[Arg] = [
            *PY, "api", "--port", str(self.api_port), "--db", s.db_path or self.work / "inferslice.db",
            "--topology", Path(self.registry.topology_path), "--token-file", self.token_file,
            "--source", "prometheus", "--prometheus-url", self.prom.url, "--perspective", s.perspective,
            "--interval-s", str(s.api_interval_s or s.scrape_interval_s), "--log-level", "warning",
        ]  # fmt: skip
        if s.api_window_s is not None:
            argv += ["--window-s", str(s.api_window_s)]
        if s.control_db is not None:
            argv += ["--control-db", absolute(s.control_db)]
        if s.control_mode is not None:
            argv += ["--control", s.control_mode, "--state-dir", self.state_dir]
            if s.control_port is not None:
                argv += ["--control-listen", f"127.0.0.1:{s.control_port}"]
        return argv

    def _start(self, proc: ManagedProcess) -> None:
        proc.start()
        self.procs.append(proc)

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None
        for run in self.loads.values():
            run.stop()
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()

    # -- load --------------------------------------------------------------------------------------
    def client_netns(self) -> str:
        return self.registry.client_netns()

    def start_load(
        self,
        key: str,
        tier: str,
        concurrency: int,
        duration_s: float,
        seed: int = 0,
        *,
        drain_timeout_s: float = 3.0,
        result_path: Path | None = None,
        records: bool = False,
        rate_schedule: Sequence[tuple[float, float]] = (),
        peak_rps: float | None = None,
        burstiness: float = 1.0,
        mix: str | None = None,
    ) -> LoadRun:
        """Start load generator ``key`` (its metrics port was fixed at construction) on ``tier``.

        A generator already running under ``key`` is stopped first. ``result_path`` defaults to
        one file per run in the work directory; ``records`` also keeps every request's record.
        A ``rate_schedule`` ((t_s, req/s), ...) makes it open loop at that rate (``concurrency`` unused),
        its arrivals thinned from a process at ``peak_rps`` (default: the schedule's peak; give the same
        peak to two runs and the one with the lower schedule gets a subset of the other's arrivals), with
        gamma gaps of shape ``burstiness`` (1: Poisson). ``mix`` names a workload mix (``inferslice load --mix``).
        """
        if key not in self.load_ports:
            raise PermanentError(f"no metrics port for load {key!r}: name it in PlatformSettings.load_keys")
        self.stop_load(key)
        stem = self.work / f"load-{key}-{self._runs}"
        self._runs += 1
        result = result_path if result_path is not None else Path(f"{stem}.result.json")
        records_path = Path(f"{stem}.records.jsonl") if records else None
        front = self.registry.front(tier)
        # The registry's client URL: a Ray Serve tier's (port 8001, /<tier>) is not the address plan's front.
        where: list[Arg] = ["--url", front.url, "--slice", tier] if front is not None else ["--tier", tier]
        argv: list[Arg] = [
            *PY, "load", *where, "--topology", Path(self.registry.topology_path), "--netns", self.client_netns(),
            "--concurrency", str(concurrency), "--duration-s", f"{duration_s:g}", "--drain-timeout-s", f"{drain_timeout_s:g}",
            "--seed", str(seed), "--goodput", self.settings.goodput, "--otel-port", str(self.load_ports[key]),
            "--save-result", result, "--quiet",
        ]  # fmt: skip
        if records_path is not None:
            argv[-1:-1] = ["--save-records", records_path]
        if rate_schedule:
            k = argv.index("--concurrency")
            peak = peak_rps if peak_rps is not None else max(r for _, r in rate_schedule)
            argv[k : k + 2] = ["--request-rate", f"{peak:g}", "--rate-schedule", ",".join(f"{t:g}:{r:g}" for t, r in rate_schedule)]
            if burstiness != 1.0:
                argv[-1:-1] = ["--burstiness", f"{burstiness:g}"]
        if mix is not None:
            argv[-1:-1] = ["--mix", mix]
        proc = ManagedProcess(f"load-{key}", argv, self.work, log_path=Path(f"{stem}.log"))
        started_s = time.time()
        proc.spawn()
        run = LoadRun(key, tier, proc, absolute(result), records_path, started_s)
        self.loads[key] = run
        return run

    def wait_load(self, key: str, timeout_s: float = 30.0) -> float:
        """Block until load ``key`` serves its metrics (it sends requests right after); return that instant."""
        url = f"http://127.0.0.1:{self.load_ports[key]}/metrics"
        deadline = time.monotonic() + timeout_s
        run = self.loads[key]
        while time.monotonic() < deadline:
            if run.process.poll() is not None:
                raise PermanentError(f"load generator {key} exited ({run.process.poll()}); see {run.log_path}")
            try:
                if httpx.get(url, timeout=0.5).status_code == 200:
                    return time.time()
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RetryableError(f"load generator {key} did not serve {url} within {timeout_s:g} s")

    def stop_load(self, key: str) -> float:
        """Stop load ``key`` if it runs (in-flight requests are cut); return the instant the signal went out."""
        at = time.time()
        run = self.loads.get(key)
        if run is not None:
            run.stop()
        return at

    # -- Prometheus reads ----------------------------------------------------------------------------
    def query(self, promql: str, at_s: float | None = None) -> list[dict[str, Any]]:
        return self.prom.query(promql, at_s)

    def raw_samples(self, selector: str, last_s: int) -> list[tuple[float, float]]:
        """The stored samples (scrape timestamp, value) of the single series ``selector`` over the last ``last_s`` seconds."""
        result = self.query(f"{selector}[{last_s}s]")
        if len(result) != 1:
            raise AssertionError(f"expected one series for {selector}, got {len(result)}: {[r['metric'] for r in result]}")
        return [(float(t), float(v)) for t, v in result[0]["values"]]

    def wait_for(self, promql: str, timeout_s: float, predicate: Callable[[list[dict[str, Any]]], object] = bool) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(promql)
            if predicate(result):
                return result
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout_s:.0f} s waiting on {promql!r}; last result: {result}\n{self.diagnostics()}")

    # -- API reads and writes --------------------------------------------------------------------------
    def api_get(self, path: str, **params: Any) -> Any:
        """GET ``path`` from the API; None when it cannot answer (a live view must not die of one miss)."""
        try:
            resp = httpx.get(f"{self.api_url}{path}", params=params or None, timeout=5.0)
            return resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    def api_write(self, method: str, path: str, body: Any) -> httpx.Response:
        """A mutating call with the platform's token."""
        return httpx.request(method, f"{self.api_url}{path}", json=body, headers={"Authorization": f"Bearer {self.token}"}, timeout=5.0)

    def slice_view(self, tier: str) -> dict[str, Any]:
        body = self.api_get(f"/v1/slices/{tier}")
        return body if isinstance(body, dict) else {}

    def diagnoses(self, tier: str) -> list[dict[str, Any]]:
        body = self.api_get(f"/v1/slices/{tier}/diagnoses", limit=10000)
        return list(body) if isinstance(body, list) else []

    def alerts(self) -> list[dict[str, Any]]:
        body = self.api_get("/v1/alerts")
        return list(body) if isinstance(body, list) else list(body.get("alerts", [])) if isinstance(body, dict) else []

    # -- failure context -----------------------------------------------------------------------------
    def diagnostics(self) -> str:
        parts = [f"--- {proc.name} (pid {proc.pid}) log tail:\n{proc.log_tail(1200)}" for proc in self.procs]
        for run in list(self.loads.values())[-4:]:
            parts.append(f"--- load {run.key} (pid {run.process.pid}, rc {run.process.poll()}) log tail:\n{run.log_tail(800)}")
        try:
            targets = httpx.get(f"{self.prom.url}/api/v1/targets", timeout=5.0).json()["data"]["activeTargets"]
            parts.append("--- scrape targets: " + "; ".join(f"{t['scrapeUrl']}={t['health']} {t.get('lastError', '')}" for t in targets))
        except (httpx.HTTPError, ValueError, KeyError, PermanentError) as err:
            parts.append(f"--- scrape targets unavailable: {err}")
        return "\n".join(parts)
