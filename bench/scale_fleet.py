"""One measured fleet for ``inferslice bench scale``: fake node exporters, Prometheus (one, or
``shards`` of them hashing the PoPs as Prometheus Operator's ``spec.shards`` does, each
remote-writing its recorded snapshot series to VictoriaMetrics), the snapshot recording rules,
and the diagnosis rounds of every PoP group read back through the query layer.

Phases, all in one run so that the scrape load is the same throughout:

1. *scrape only*: every Prometheus scrapes its targets, no snapshot rules loaded; its process CPU
   (``/proc/<pid>/stat``) over a few intervals is the scrape cost;
2. the rules are written and reloaded (``/-/reload``), the first window fills;
3. *rounds*: every interval, each PoP group's round (three instant queries + ingest) runs in this
   process while the scrapes go on; Prometheus's CPU over the rounds minus its scrape-only rate is
   its query work (rule evaluation, remote write, and the queries when it is the query layer);
   VictoriaMetrics's CPU is reported beside it.

``raw_rounds`` adds, for comparison, rounds of the raw source (one query per field over every
slice) against the single Prometheus, also with the scrapes running.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from inferslice.collectors import recorded
from inferslice.collectors.prometheus import PrometheusSettings, PrometheusSource
from inferslice.collectors.source import slices_from_topology
from inferslice.common.prometheus import Prometheus, VictoriaMetrics
from inferslice.common.promtime import format_duration
from inferslice.errors import SourceUnavailable
from inferslice.service.diagnosis import DiagnosisService
from inferslice.service.shards import Group, groups_of
from inferslice.service.store import Store
from inferslice.topology import Topology

from .scale_targets import FakeTargets, pop_name

TICKS_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a process and its threads so far (Linux /proc)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / TICKS_S


def rss_bytes(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float("nan")


@dataclass(frozen=True)
class FleetSettings:
    pops: int = 100
    tiers: int = 10
    replicas: int = 3
    shards: int = 0  # 0: one Prometheus, queried directly; N: N shards remote-writing to VictoriaMetrics
    scrape_interval_s: float = 2.0  # also the rule interval and the diagnosis interval
    window_scrapes: int = recorded.DEFAULT_WINDOW_SCRAPES
    rounds: int = 5
    scrape_only_intervals: int = 4
    raw_rounds: int = 0  # single Prometheus only: rounds of the raw source for comparison
    pin: bool = False  # the measured process on core 0, everything else on core 1 (the 2-core layout)
    # False: the snapshot group without its quantile terms and their bucket-rate helpers (the ``floor``
    # part: what every other term costs Prometheus; the round's quantile fields then come back empty)
    quantile_terms: bool = True

    @property
    def window_s(self) -> float:
        return self.window_scrapes * self.scrape_interval_s

    @property
    def slices(self) -> int:
        return self.pops * self.tiers


MEASURED_CPU, OTHER_CPU = 0, 1


def _pin_tree(pid: int | None, cpu: int) -> None:
    if pid is None or not hasattr(os, "sched_setaffinity") or cpu not in os.sched_getaffinity(0):
        return
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(task.name), {cpu})


def _pin_self(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and cpu in os.sched_getaffinity(0):
        os.sched_setaffinity(0, {cpu})


@contextlib.contextmanager
def _restored_affinity(cpus: set[int] | None) -> Iterator[None]:
    try:
        yield
    finally:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)


def shard_relabel(shards: int, index: int) -> list[dict[str, Any]]:
    """What a PodMonitor keyed on the PoP plus Prometheus Operator's ``spec.shards`` rules give shard
    ``index`` (prometheus-operator's promcfg.go, ``$(SHARD)`` substituted)."""
    return [
        {"source_labels": ["pop"], "target_label": "__tmp_hash"},
        {"source_labels": ["__address__", "__tmp_hash"], "target_label": "__tmp_hash", "regex": "(.+);", "replacement": "$1",
         "action": "replace"},
        {"source_labels": ["__tmp_hash"], "target_label": "__tmp_hash", "modulus": shards, "action": "hashmod"},
        {"source_labels": ["__tmp_hash", "__tmp_disable_sharding"], "regex": f"{index};|.+;.+", "action": "keep"},
    ]  # fmt: skip


def prometheus_config(s: FleetSettings, urls: dict[str, str], rules: Path, index: int, remote_write: str | None) -> dict[str, Any]:
    interval = format_duration(s.scrape_interval_s)
    static = [
        {"targets": [u.split("/")[2]], "labels": {"__metrics_path__": "/" + u.split("/", 3)[3], "pop": pop}} for pop, u in urls.items()
    ]
    job: dict[str, Any] = {"job_name": "nodes", "honor_labels": True, "static_configs": static}
    if s.shards:
        job["relabel_configs"] = shard_relabel(s.shards, index)
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
        "rule_files": [str(rules)],
        "scrape_configs": [job],
    }
    if remote_write is not None:
        config["remote_write"] = [
            {
                "url": remote_write,
                # Only the recorded snapshot: the raw series stay in the shard (the query layer's load is the fleet's terms).
                "write_relabel_configs": [{"source_labels": ["__name__"], "regex": "slice_pop:inferslice_snapshot:.+", "action": "keep"}],
                "queue_config": {"batch_send_deadline": "1s"},
            }
        ]
    return config


class _Fleet:
    def __init__(self, s: FleetSettings, topology: Topology, workdir: Path, node_text: str) -> None:
        self.s = s
        self.topology = topology
        self.workdir = workdir
        self.template = node_text  # PoP p000's exposition; every PoP serves it relabelled (scale_targets)
        self.paths = {f"/node/{pop_name(i)}/metrics": pop_name(i) for i in range(s.pops)}
        self.targets: FakeTargets | None = None
        self.proms: list[Prometheus] = []
        self.vm: VictoriaMetrics | None = None
        self.rules = workdir / "snapshot.rules.yml"

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        s = self.s
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.rules.write_text("groups: []\n")
        self.targets = FakeTargets({"template": self.template}, OTHER_CPU if s.pin else None, pops=self.paths)
        try:
            urls = {pop_name(i): self.targets.url(f"/node/{pop_name(i)}/metrics") for i in range(s.pops)}
            if s.shards:
                self.vm = VictoriaMetrics(self.workdir / "vm")
                self.vm.start(timeout_s=30)
            for k in range(max(1, s.shards)):
                config = prometheus_config(s, urls, self.rules, k, self.vm.write_url if self.vm else None)
                prom = Prometheus(self.workdir / f"prom{k}", config)
                prom.start(timeout_s=60)
                self.proms.append(prom)
                if s.pin:
                    _pin_tree(prom.pid, OTHER_CPU)
            if self.vm is not None and s.pin:
                _pin_tree(self.vm.pid, OTHER_CPU)
            yield
        finally:
            for prom in self.proms:
                prom.stop()
            if self.vm is not None:
                self.vm.stop()
            self.targets.close()

    @property
    def query_url(self) -> str:
        return self.vm.url if self.vm is not None else self.proms[0].url

    def prom_cpu(self) -> float:
        return sum(process_cpu_s(p.pid) for p in self.proms)

    def vm_cpu(self) -> float:
        return process_cpu_s(self.vm.pid) if self.vm is not None else 0.0

    def wait_scraped(self, timeout_s: float) -> int:
        """Until every target was scraped by its shard; the number of up targets."""
        deadline = time.monotonic() + timeout_s
        while True:
            up = 0
            for prom in self.proms:
                with contextlib.suppress(httpx.HTTPError, KeyError, ValueError):
                    result = httpx.get(f"{prom.url}/api/v1/query", params={"query": "count(up == 1)"}, timeout=10).json()["data"]["result"]
                    up += int(float(result[0]["value"][1])) if result else 0
            if up >= self.s.pops or time.monotonic() > deadline:
                return up
            time.sleep(1.0)

    def head_series(self) -> float:
        total = 0.0
        for prom in self.proms:
            with contextlib.suppress(httpx.HTTPError):
                own = httpx.get(f"{prom.url}/metrics", timeout=10).text
                total += next(
                    (float(line.split()[-1]) for line in own.splitlines() if line.startswith("prometheus_tsdb_head_series ")), 0.0
                )
        return total

    def missed_iterations(self) -> float:
        """Evaluations of the snapshot group Prometheus skipped because the previous one overran (all shards)."""
        total = 0.0
        for prom in self.proms:
            with contextlib.suppress(httpx.HTTPError):
                for line in httpx.get(f"{prom.url}/metrics", timeout=10).text.splitlines():
                    if line.startswith("prometheus_rule_group_iterations_missed_total{") and recorded.GROUP_NAME in line:
                        total += float(line.split()[-1])
        return total

    def rule_group_seconds(self) -> float:
        """The snapshot group's last evaluation wall time, summed over the shards (Prometheus's own metric)."""
        total = 0.0
        for prom in self.proms:
            with contextlib.suppress(httpx.HTTPError):
                for line in httpx.get(f"{prom.url}/metrics", timeout=10).text.splitlines():
                    if line.startswith("prometheus_rule_group_last_duration_seconds{") and recorded.GROUP_NAME in line:
                        total += float(line.split()[-1])
        return total

    def rule_seconds(self) -> list[dict[str, Any]]:
        """Each snapshot rule's last evaluation wall time (``/api/v1/rules`` ``evaluationTime``), summed
        over the shards, costliest first: which rules the group's time goes to."""
        per: dict[tuple[str, str], float] = {}
        for prom in self.proms:
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                groups = httpx.get(f"{prom.url}/api/v1/rules", timeout=10).json()["data"]["groups"]
                for g in groups:
                    if g.get("name") != recorded.GROUP_NAME:
                        continue
                    for r in g.get("rules", []):
                        key = (str(r.get("name", "")), str((r.get("labels") or {}).get(recorded.TERM_LABEL, "")))
                        per[key] = per.get(key, 0.0) + float(r.get("evaluationTime", 0.0))
        rows = [{"record": k[0], "term": k[1], "seconds": round(v, 6)} for k, v in per.items()]
        return sorted(rows, key=lambda r: -float(r["seconds"]))

    def load_rules(self) -> int:
        group = recorded.snapshot_rule_group(self.s.window_s, self.s.scrape_interval_s)
        if not self.s.quantile_terms:
            group["rules"] = [r for r in group["rules"] if not _is_quantile_rule(r)]
        self.rules.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False))
        for prom in self.proms:
            httpx.post(f"{prom.url}/-/reload", timeout=30).raise_for_status()
        return len(group["rules"])

    def wait_recorded(self, expect: int, timeout_s: float) -> int:
        """Until the query layer holds the recorded rates of (nearly) every slice."""
        name = recorded.family_name("sum", self.s.window_s)
        q = f'count({name}{{term="rate:inferslice_engine_generation_tokens_total"}})'
        deadline = time.monotonic() + timeout_s
        got = 0
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, KeyError, ValueError, IndexError):
                result = httpx.get(f"{self.query_url}/api/v1/query", params={"query": q}, timeout=10).json()["data"]["result"]
                got = int(float(result[0]["value"][1])) if result else 0
                if got >= expect:
                    return got
            time.sleep(1.0)
        return got


def _is_quantile_rule(rule: dict[str, Any]) -> bool:
    """A bucket-rate helper or a quantile term over one (the rules ``quantile_terms=False`` leaves out)."""
    term = str((rule.get("labels") or {}).get(recorded.TERM_LABEL, ""))
    return str(rule.get("record", "")).startswith("slice_pop_le:") or term.startswith("quantile:")


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows) if rows else float("nan")


def _wait_tick(t0: float, k: int, interval_s: float) -> float:
    target = t0 + k * interval_s
    time.sleep(max(0.0, target - time.time()))
    return time.time()


def _group_rounds(fleet: _Fleet, groups: list[Group], db_dir: Path) -> dict[str, Any]:
    s = fleet.s
    slices = {c.name: c for c in slices_from_topology(fleet.topology)}
    runs = []
    for g in groups:
        pops = None if len(groups) == 1 else tuple(g.pops)
        settings = PrometheusSettings(
            base_url=fleet.query_url, timeout_s=max(10.0, 3 * s.scrape_interval_s), window_s=s.window_s, recorded=True, pops=pops
        )
        source = PrometheusSource([slices[n] for n in g.slices], settings)
        runs.append((g, source, DiagnosisService(Store(db_dir / f"group{g.index}.db"), fleet.topology, time.time)))
    per_group: dict[int, list[dict[str, float]]] = {g.index: [] for g in groups}
    failed: list[str] = []
    filled = 0
    cpu0, prom0, vm0, t_start = time.process_time(), fleet.prom_cpu(), fleet.vm_cpu(), time.monotonic()
    t0 = time.time()
    for k in range(s.rounds):
        now = _wait_tick(t0, k, s.scrape_interval_s)
        filled = 0
        for g, source, service in runs:
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                snaps = source.snapshots(now, s.window_s)
            except SourceUnavailable as err:
                failed.append(f"group {g.index}: {err}"[:300])
                continue
            w1, c1 = time.perf_counter(), time.process_time()
            with service.store.batch():
                for snap in snaps:
                    service.ingest(snap)
            w2, c2 = time.perf_counter(), time.process_time()
            filled += sum(1 for x in snaps if x.ttft_p99_s is not None)
            row = {"evaluate_wall_s": w1 - w0, "evaluate_cpu_s": c1 - c0, "ingest_wall_s": w2 - w1, "ingest_cpu_s": c2 - c1}
            row |= {"total_wall_s": w2 - w0, "total_cpu_s": c2 - c0, "series": float(source.recorded_series)}
            per_group[g.index].append(row)
    elapsed = time.monotonic() - t_start
    loop_cpu, prom_cpu, vm_cpu = time.process_time() - cpu0, fleet.prom_cpu() - prom0, fleet.vm_cpu() - vm0
    for _g, source, service in runs:
        source.close()
        service.store.close()
    groups_out = []
    for g in groups:
        rows = per_group[g.index]
        groups_out.append({
            "group": g.index, "slices": len(g.slices), "pops": len(g.pops), "rounds": len(rows),
            **{f"{key}_median": _median(rows, key) for key in ("evaluate_wall_s", "evaluate_cpu_s", "ingest_wall_s", "ingest_cpu_s",
                                                                "total_wall_s", "total_cpu_s", "series")},
            "total_wall_s_max": max((r["total_wall_s"] for r in rows), default=float("nan")),
        })  # fmt: skip
    return {"groups": groups_out, "failed_rounds": len(failed), "errors": failed[:3], "elapsed_s": elapsed, "loop_cpu_s": loop_cpu,
            "prometheus_cpu_s": prom_cpu, "vm_cpu_s": vm_cpu, "slices_with_ttft_last_round": filled}  # fmt: skip


def _raw_rounds(fleet: _Fleet, db: Path) -> dict[str, Any]:
    s = fleet.s
    source = PrometheusSource(
        slices_from_topology(fleet.topology), PrometheusSettings(base_url=fleet.query_url, timeout_s=60, window_s=s.window_s)
    )
    service = DiagnosisService(Store(db), fleet.topology, time.time)
    rows: list[dict[str, float]] = []
    cpu0, prom0, t_start = time.process_time(), fleet.prom_cpu(), time.monotonic()
    t0 = time.time()
    for k in range(s.raw_rounds):
        now = _wait_tick(t0, k, s.scrape_interval_s)
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            snaps = source.snapshots(now, s.window_s)
        except SourceUnavailable:
            continue
        w1, c1 = time.perf_counter(), time.process_time()
        with service.store.batch():
            for snap in snaps:
                service.ingest(snap)
        rows.append(
            {
                "evaluate_wall_s": w1 - w0,
                "evaluate_cpu_s": c1 - c0,
                "total_wall_s": time.perf_counter() - w0,
                "total_cpu_s": time.process_time() - c0,
            }
        )
    elapsed = time.monotonic() - t_start
    out = {f"{key}_median": _median(rows, key) for key in ("evaluate_wall_s", "evaluate_cpu_s", "total_wall_s", "total_cpu_s")}
    source.close()
    service.store.close()
    loop_cpu = time.process_time() - cpu0
    return {**out, "rounds": len(rows), "queries_per_round": len(source.specs), "elapsed_s": elapsed, "loop_cpu_s": loop_cpu,
            "prometheus_cpu_s": fleet.prom_cpu() - prom0}  # fmt: skip


def run_fleet(s: FleetSettings, topology: Topology, node_text: str, workdir: Path) -> dict[str, Any]:
    """Every phase of one fleet; CPU shares are of one core over the run's interval."""
    fleet = _Fleet(s, topology, workdir, node_text)
    groups = groups_of(topology, max(1, s.shards))
    result: dict[str, Any] = {"pops": s.pops, "slices": s.slices, "shards": s.shards, "scrape_interval_s": s.scrape_interval_s,
                              "window_s": s.window_s, "query_layer": "victoria-metrics" if s.shards else "prometheus",
                              "load_average_before": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    with fleet.running(), _restored_affinity(affinity):
        if s.pin:
            _pin_self(MEASURED_CPU)
        result["targets_up"] = fleet.wait_scraped(timeout_s=60 + 3 * s.scrape_interval_s)
        time.sleep(s.window_s)
        result["head_series"] = fleet.head_series()
        p0, v0, t0 = fleet.prom_cpu(), fleet.vm_cpu(), time.monotonic()
        time.sleep(s.scrape_only_intervals * s.scrape_interval_s)
        dt = time.monotonic() - t0
        result["scrape_only"] = {"elapsed_s": dt, "prometheus_cpu_s": fleet.prom_cpu() - p0, "vm_cpu_s": fleet.vm_cpu() - v0}
        result["rules"] = fleet.load_rules()
        result["recorded_slices_ready"] = fleet.wait_recorded(int(0.95 * s.slices), timeout_s=60 + 3 * s.window_s)
        time.sleep(s.scrape_interval_s)
        result["rounds"] = _group_rounds(fleet, groups, workdir)
        if s.raw_rounds and not s.shards:
            result["raw"] = _raw_rounds(fleet, workdir / "raw.db")
        result["rule_group_last_duration_s"] = fleet.rule_group_seconds()
        result["rule_group_iterations_missed"] = fleet.missed_iterations()
        result["rule_seconds"] = fleet.rule_seconds()
        result["rule_seconds_by_kind"] = rule_cost_by_kind(result["rule_seconds"])
        result["prometheus_rss_bytes"] = sum(rss_bytes(p.pid) for p in fleet.proms)
        result["vm_rss_bytes"] = rss_bytes(fleet.vm.pid) if fleet.vm else 0.0
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return _shares(result, s)


def rule_cost_by_kind(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The group's evaluation time by kind of rule: the per-(slice, pop, le) bucket-rate helpers,
    the quantiles over them, and every other term; seconds and share of the group's sum."""
    total = sum(float(r["seconds"]) for r in rows) or 1.0
    kinds: dict[str, list[float]] = {"bucket_rates": [], "quantiles": [], "other": []}
    for r in rows:
        if str(r["record"]).startswith("slice_pop_le:"):
            kind = "bucket_rates"
        else:
            kind = "quantiles" if str(r["term"]).startswith("quantile:") else "other"
        kinds[kind].append(float(r["seconds"]))
    return {k: {"rules": len(v), "seconds": round(sum(v), 6), "share": round(sum(v) / total, 4)} for k, v in kinds.items()}


def _shares(r: dict[str, Any], s: FleetSettings | None = None) -> dict[str, Any]:
    """CPU as shares of one core. Prometheus and VictoriaMetrics: their CPU per second (rules run every
    interval whatever the rounds do); Prometheus's query work = its rate over the rounds minus its
    scrape-only rate. The loop: the CPU one round of every group takes (medians), over the interval:
    the share of a core it needs to keep up (a round slower than the interval would otherwise make
    its per-second CPU look smaller)."""
    scrape = r["scrape_only"]
    rounds = r["rounds"]
    interval = r["scrape_interval_s"]
    scrape_rate = scrape["prometheus_cpu_s"] / scrape["elapsed_s"]
    rounds_rate = rounds["prometheus_cpu_s"] / rounds["elapsed_s"]
    round_cpu = sum(g["total_cpu_s_median"] for g in rounds["groups"] if g["rounds"])
    r["loop_round_cpu_s"] = round_cpu
    r["cpu_share"] = {
        "prometheus_scrape_only": scrape_rate,
        "prometheus_with_rounds": rounds_rate,
        "prometheus_query_work": rounds_rate - scrape_rate,
        "vm_scrape_only": scrape["vm_cpu_s"] / scrape["elapsed_s"],
        "vm_with_rounds": rounds["vm_cpu_s"] / rounds["elapsed_s"],
        "loop": round_cpu / interval,
        "loop_over_elapsed": rounds["loop_cpu_s"] / rounds["elapsed_s"],
    }
    r["cpu_share"]["vm_query_work"] = r["cpu_share"]["vm_with_rounds"] - r["cpu_share"]["vm_scrape_only"]
    if "raw" in r:
        raw = r["raw"]
        r["cpu_share"]["prometheus_query_work_raw"] = raw["prometheus_cpu_s"] / raw["elapsed_s"] - scrape_rate
        r["cpu_share"]["loop_raw"] = raw["total_cpu_s_median"] / interval
    return r
