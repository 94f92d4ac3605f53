"""Diagnosis benchmark: inject one change per tier on the running testbed and time the verdicts.

Per tier, after a healthy baseline (long enough to learn its reference), one change at a time:

- Free: a load step past its capacity (4 -> 24 clients): ``queue_limited``;
- Standard: its client-edge receive cap cut below demand (uncapped -> 0.5 Mbit/s at 10 clients):
  ``network_limited``;
- Premium: a GPU-share drop (1.0 -> 0.35 at 8 clients, fixed replicas): ``compute_limited``;

then the reverse change (expected: ``healthy``), repeated. The tiers are independent slices, so
their changes run in the same timeline (one per tier at a time), which keeps a run short.

Around the testbed: the exporter, one load generator per tier (plus one for Free's extra
clients) serving client-perceived metrics (the network-limited regime shows only at the client),
a real Prometheus scraping them, and side by side in this process one ``DiagnosisLoop`` per
(source, window): ``PrometheusSource`` and ``EmbeddedSource`` (one shared scraper), each loop
with its own in-memory ``Store`` + ``DiagnosisService``. Every loop runs at
the same instants, so the sources and windows see the very same run. Each loop's raw snapshots
are written out, so ``rescore`` can replay them with other thresholds.

Change instants: a cap or share change counts from when its call returned; the load step from
when the extra load generator's metrics port answered (it starts sending right after).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from inferslice.bench.diagnosis_score import (
    Change,
    Targets,
    markdown_table,
    recommend_window,
    replay,
    score_loops,
    summarize,
)
from inferslice.bottleneck import DEFAULT, Thresholds
from inferslice.collectors import MetricSource
from inferslice.common.registry import DEFAULT_STATE_DIR, Registry, read_registry
from inferslice.diagnosis import Regime
from inferslice.errors import InferSliceError, PermanentError
from inferslice.service.diagnosis import DiagnosisService, IngestResult
from inferslice.service.loop import DiagnosisLoop, Ingest, LoopSettings
from inferslice.service.platform import Platform, PlatformSettings
from inferslice.service.sources import SourceSettings, make_source
from inferslice.service.store import Store
from inferslice.snapshot import SliceSnapshot
from inferslice.testbed.net import lifecycle
from inferslice.testbed.ops import set_gpu_share, set_replicas, wait_replicas_ready
from inferslice.topology import Topology, load_topology

Progress = Callable[[str], None]
PY = [sys.executable, "-m", "inferslice.cli"]
RESULT_FILE = "diagnosis-bench.json"
REPORT_FILE = "diagnosis-bench.md"


@dataclass(frozen=True)
class Injection:
    """One tier's change: its steady load, and what the change alters (exactly one of the three)."""

    name: str
    tier: str
    expected: str  # a Regime value
    concurrency: int  # clients for the whole run
    replicas: int  # fixed: the autoscaler must not move the ground under the diagnosis
    extra_clients: int = 0  # load step: clients added by the change
    cap_bps: float | None = None  # cap cut: the client-edge receive cap during the change
    gpu_share: float | None = None  # share drop: the tier's effective GPU share during the change


# The three examples. Free admits 14 in flight on its one replica, so 24 clients queue;
# Standard needs ~0.9 Mbit/s at 10 clients, so 0.5 Mbit/s binds; 0.35 of the GPU slows Premium's
# decode ~3x while its 2 replicas x 6 slots still admit all 8 clients (no queue).
DEFAULT_INJECTIONS: tuple[Injection, ...] = (
    Injection("load step 4->24", "free", Regime.QUEUE_LIMITED.value, concurrency=4, replicas=1, extra_clients=20),
    Injection("cap cut ->0.5 Mbit/s", "standard", Regime.NETWORK_LIMITED.value, concurrency=10, replicas=2, cap_bps=0.5e6),
    Injection("GPU share 1.0->0.35", "premium", Regime.COMPUTE_LIMITED.value, concurrency=8, replicas=2, gpu_share=0.35),
)


def select_injections(
    tiers: Sequence[str] | None = None, clients: Mapping[str, int] | None = None, injections: Sequence[Injection] = DEFAULT_INJECTIONS
) -> tuple[Injection, ...]:
    """The injections of ``tiers`` (all when None), with a tier's steady client count replaced from ``clients``.

    A real engine (vLLM on CPU) fits fewer clients than the emulator before it queues: its baseline
    must stay healthy, or no reference is learned and every verdict is judged against the fallbacks.
    """
    known = {inj.tier for inj in injections}
    wanted = set(tiers) if tiers is not None else known
    unknown = sorted((wanted | set(clients or {})) - known)
    if unknown:
        raise PermanentError(f"no injection for tier(s) {', '.join(unknown)} (have {', '.join(sorted(known))})")
    out = []
    for inj in injections:
        if inj.tier not in wanted:
            continue
        n = (clients or {}).get(inj.tier)
        if n is not None and n < 1:
            raise PermanentError(f"{inj.tier}: clients must be >= 1, got {n}")
        out.append(replace(inj, concurrency=n) if n is not None else inj)
    return tuple(out)


@dataclass(frozen=True)
class BenchSettings:
    interval_s: float = 2.0  # the testbed's scrape interval: one verdict per new sample
    windows_s: tuple[float, ...] = (4.0, 6.0, 8.0)  # evaluated side by side over the same run, to choose one on evidence
    sources: tuple[str, ...] = ("prometheus", "embedded")
    baseline_s: float = 30.0  # healthy load before the first change: ~15 windows to learn each reference
    hold_s: float = 40.0  # long enough for a 8 s window to settle and ~15 settled windows
    recover_s: float = 30.0  # the reverse change's hold, also the next repetition's baseline; 0: not scored
    repetitions: int = 2  # 2 x (40 + 30) s + 30 s baseline + setup stays well under the issue's ~8 min
    perspective: str = "client"  # client-perceived TTFT/TPOT: a bandwidth cap is invisible in the engines' histograms
    ready_timeout_s: float = 120.0  # cold starts are compressed to 8 s; replicas may queue behind each other
    seed: int = 0


@dataclass(frozen=True)
class LoopKey:
    source: str
    window_s: float

    @property
    def label(self) -> str:
        return f"{self.source}-{self.window_s:g}s"


class Ticker:
    """Runs every loop at the same instants, one tick per interval, on one thread."""

    def __init__(self, loops: Sequence[DiagnosisLoop], interval_s: float) -> None:
        self.loops = list(loops)
        self.interval_s = interval_s
        self.ticks = 0
        self.late_ticks = 0  # ticks that started more than half an interval late (an overloaded machine)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self, now_s: float) -> None:
        # Loops sharing a source poll it at the same instant: it scrapes once (MetricSource.poll).
        for loop in self.loops:
            loop.run_once(now_s)
        self.ticks += 1

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - next_at > self.interval_s / 2:
                self.late_ticks += 1
            self.tick(time.time())
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="diagnosis-bench-ticker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


def _recording_sink(service: DiagnosisService, log: list[dict[str, Any]]) -> Ingest:
    """``service.ingest`` that also keeps the raw snapshot and the verdict of every window (for replay)."""

    def ingest(snapshot: SliceSnapshot) -> IngestResult:
        result = service.ingest(snapshot)
        d = result.diagnosis
        log.append(
            {"ts": result.ts, "slice": snapshot.slice, "regime": d.regime.value, "confidence": d.confidence, "snapshot": snapshot.to_dict()}
        )
        return result

    return ingest


def build_loops(
    top: Topology,
    settings: BenchSettings,
    thresholds: Thresholds,
    prometheus_url: str | None,
    targets: Sequence[str],
) -> tuple[dict[LoopKey, DiagnosisLoop], dict[LoopKey, list[dict[str, Any]]], list[Store]]:
    """One loop per (source, window), each with its own in-memory store and service; one source per kind, shared."""
    perspective: Literal["engine", "client"] = "client" if settings.perspective == "client" else "engine"
    shared: dict[str, MetricSource] = {}
    for kind in settings.sources:
        if kind == "prometheus" and prometheus_url is None:
            raise PermanentError("the prometheus source needs a running Prometheus")
        source_settings = SourceSettings(
            "prometheus" if kind == "prometheus" else "embedded",
            prometheus_url or "",
            tuple(targets),
            perspective,
            scrape_timeout_s=0.75 * settings.interval_s,
        )
        shared[kind] = make_source(source_settings, top)
    loops: dict[LoopKey, DiagnosisLoop] = {}
    logs: dict[LoopKey, list[dict[str, Any]]] = {}
    stores: list[Store] = []
    for source, src in shared.items():
        for w in settings.windows_s:
            key = LoopKey(source, w)
            store = Store(":memory:")
            stores.append(store)
            service = DiagnosisService(store, top, clock=time.time, thresholds=thresholds)
            logs[key] = []
            loops[key] = DiagnosisLoop(src, _recording_sink(service, logs[key]), LoopSettings(settings.interval_s, w))
    return loops, logs, stores


def _sleep_until(t: float) -> None:
    while (left := t - time.time()) > 0:
        time.sleep(min(left, 0.5))


def _original_caps(reg: Registry) -> dict[str, float | None]:
    """Each tier's configured client-edge receive cap (the topology's; None: uncapped)."""
    return {lk.tier: lk.cap_bps for lk in reg.links if lk.kind == "access" and lk.direction == "receive" and lk.tier}


def _apply(inj: Injection, on: bool, platform: Platform, state_dir: Path, duration_s: float, seed: int) -> float:
    """Make (``on``) or undo one tier's change; return the instant it took effect."""
    if inj.cap_bps is not None:
        lifecycle.set_cap(inj.tier, inj.cap_bps if on else _original_caps(platform.registry).get(inj.tier), "receive", state_dir)
        return time.time()
    if inj.gpu_share is not None:
        set_gpu_share(inj.tier, inj.gpu_share if on else 1.0, state_dir)
        return time.time()
    key = f"{inj.tier}+"
    if on:
        platform.start_load(key, inj.tier, inj.extra_clients, duration_s, seed, drain_timeout_s=2.0)
        return platform.wait_load(key)
    return platform.stop_load(key)


def _schedule(settings: BenchSettings, start_s: float) -> list[tuple[int, str, float]]:
    """(repetition, kind, at) of every change, and the end of the run as a final ``("end")`` entry."""
    period = settings.hold_s + settings.recover_s
    out = []
    for rep in range(settings.repetitions):
        inject_at = start_s + settings.baseline_s + rep * period
        out.append((rep, "inject", inject_at))
        out.append((rep, "revert", inject_at + settings.hold_s))
    out.append((settings.repetitions, "end", start_s + settings.baseline_s + settings.repetitions * period))
    return out


def _changes(applied: Sequence[tuple[Injection, int, str, float]], end_s: float, recover_s: float) -> list[Change]:
    out = []
    for i, (inj, rep, kind, at) in enumerate(applied):
        later = [a for j, (other, _, _, a) in enumerate(applied) if j > i and other.tier == inj.tier]
        until = min(later) if later else end_s
        if kind == "revert" and recover_s <= 0:
            continue  # reverted only to clean up: nothing to score
        expected = inj.expected if kind == "inject" else Regime.HEALTHY.value
        out.append(Change(inj.name, inj.tier, kind, rep, at, until, expected))
    return out


def write_windows(logs: Mapping[LoopKey, Sequence[Mapping[str, Any]]], out: Path) -> None:
    """Each loop's recorded windows as ``windows-<source>-<window>s.jsonl`` (what ``rescore`` and the corpus read)."""
    for key, log in logs.items():
        with (out / f"windows-{key.label}.jsonl").open("w") as fh:
            for row in log:
                fh.write(json.dumps(row) + "\n")


def stop_run(ticker: Ticker | None, platform: Platform, stores: Sequence[Store]) -> None:
    """The loops first (they read the platform), then the platform's processes, then the in-memory stores."""
    if ticker is not None:
        ticker.stop()
    platform.stop()
    for store in stores:
        store.close()


def restore_tiers(tiers: Sequence[str], caps: Mapping[str, float | None], state_dir: Path, progress: Progress) -> None:
    """Give each tier back its configured cap, a whole GPU share and its autoscaler (best effort, said when not)."""
    for tier in tiers:
        try:
            lifecycle.set_cap(tier, caps.get(tier), "receive", state_dir)
            set_gpu_share(tier, 1.0, state_dir)
            set_replicas(tier, None, state_dir)
        except (InferSliceError, OSError) as err:
            progress(f"cleanup of {tier} incomplete: {err}")


def ensure_testbed(state_dir: Path, topology_path: str | None, progress: Progress) -> tuple[Registry, bool]:
    """The running testbed's registry, bringing it up first when it is not (then ``True``: take it down after)."""
    try:
        return read_registry(state_dir), False
    except InferSliceError:
        progress("testbed is not up: starting it")
        return lifecycle.up(topology_path, state_dir, services=True), True


def run(
    out: Path,
    settings: BenchSettings | None = None,
    injections: Sequence[Injection] = DEFAULT_INJECTIONS,
    state_dir: Path = DEFAULT_STATE_DIR,
    topology_path: str | None = None,
    thresholds: Thresholds = DEFAULT,
    progress: Progress = print,
) -> dict[str, Any]:
    """Run the benchmark on the testbed in ``state_dir`` (started, and then stopped, if it is not up)."""
    settings = settings or BenchSettings()
    out = out.resolve()  # Prometheus runs in its own working directory
    out.mkdir(parents=True, exist_ok=True)
    reg, started_here = ensure_testbed(state_dir, topology_path, progress)
    top = load_topology(reg.topology_path)
    tiers = {inj.tier for inj in injections}
    load_keys = [inj.tier for inj in injections] + [f"{inj.tier}+" for inj in injections if inj.extra_clients]
    platform_settings = PlatformSettings(scrape_interval_s=settings.interval_s, alertmanager=False, api=False, load_keys=load_keys)
    platform = Platform(reg, top, state_dir, out / "platform", platform_settings)
    ticker: Ticker | None = None
    stores: list[Store] = []
    applied: list[tuple[Injection, int, str, float]] = []
    total_s = settings.baseline_s + settings.repetitions * (settings.hold_s + settings.recover_s)
    t0 = time.time()
    try:
        caps = _original_caps(reg)
        for inj in injections:
            lifecycle.set_cap(inj.tier, caps.get(inj.tier), "receive", state_dir)
            set_replicas(inj.tier, inj.replicas, state_dir)
        wait_replicas_ready({inj.tier: inj.replicas for inj in injections}, state_dir, settings.ready_timeout_s)
        for inj in injections:
            set_gpu_share(inj.tier, 1.0, state_dir)
        progress(f"replicas ready ({', '.join(f'{i.tier} {i.replicas}' for i in injections)}); starting exporter and Prometheus")
        platform.start()
        for i, inj in enumerate(injections):
            platform.start_load(inj.tier, inj.tier, inj.concurrency, total_s + 30, settings.seed + i, drain_timeout_s=2.0)
        for inj in injections:
            platform.wait_load(inj.tier)
        loops, logs, stores = build_loops(top, settings, thresholds, platform.prom.url, platform.targets)
        ticker = Ticker(list(loops.values()), settings.interval_s)
        ticker.start()
        start_s = time.time()
        progress(
            f"baseline {settings.baseline_s:g} s, then {settings.repetitions} x "
            f"(change {settings.hold_s:g} s, reverse {settings.recover_s:g} s)"
        )
        schedule = _schedule(settings, start_s)
        for rep, kind, at in schedule:
            _sleep_until(at)
            if kind == "end":
                break
            for i, inj in enumerate(injections):
                seed = settings.seed + 100 * (rep + 1) + i
                applied.append((inj, rep, kind, _apply(inj, kind == "inject", platform, state_dir, total_s, seed)))
            progress(f"[{rep + 1}/{settings.repetitions}] {kind}: {', '.join(inj.name for inj in injections)}")
        end_s = time.time()
        ticker.stop()
        changes = _changes(applied, end_s, settings.recover_s)
        write_windows(logs, out)
        windows = {(k.source, k.window_s): [(w["slice"], float(w["ts"]), str(w["regime"])) for w in log] for k, log in logs.items()}
        result = _result(settings, injections, changes, windows, thresholds)
        result["run"] = {
            "started_s": t0,
            "wall_s": round(time.time() - t0, 1),
            "ticks": ticker.ticks,
            "late_ticks": ticker.late_ticks,
            "loop_failures": {k.label: loop.stats.failures for k, loop in loops.items()},
            "loop_last_error": {k.label: loop.stats.last_error for k, loop in loops.items() if loop.stats.last_error},
            "tier_slo_s": {t: top.tier(t).slo_ttft_p99_s for t in sorted(tiers)},
        }
        write(result, out)
        return result
    finally:
        stop_run(ticker, platform, stores)
        restore_tiers([inj.tier for inj in injections], _original_caps(reg), state_dir, progress)
        if started_here:
            lifecycle.down(state_dir)


def _result(
    settings: BenchSettings,
    injections: Sequence[Injection],
    changes: Sequence[Change],
    windows: Mapping[tuple[str, float], Sequence[tuple[str, float, str]]],
    thresholds: Thresholds,
) -> dict[str, Any]:
    scores = score_loops(changes, windows, settings.interval_s)
    rows = summarize(scores, Targets())
    return {
        "benchmark": "diagnosis",
        "settings": asdict(settings),
        "targets": asdict(Targets()),
        "thresholds": asdict(thresholds),
        "injections": [asdict(i) for i in injections],
        "changes": [asdict(c) for c in changes],
        "summary": rows,
        "scores": scores,
        "recommended_window_s": recommend_window(rows),
    }


def rescore(out: Path, thresholds: Thresholds, topology_path: str | None = None) -> dict[str, Any]:
    """Replay a finished run's recorded windows with other thresholds (no testbed needed)."""
    previous = json.loads((out / RESULT_FILE).read_text())
    saved = previous["settings"]
    settings = BenchSettings(**{**saved, "windows_s": tuple(saved["windows_s"]), "sources": tuple(saved["sources"])})
    injections = [Injection(**i) for i in previous["injections"]]
    changes = [Change(**c) for c in previous["changes"]]
    top = load_topology(topology_path)
    windows: dict[tuple[str, float], list[tuple[str, float, str]]] = {}
    for source in settings.sources:
        for w in settings.windows_s:
            path = out / f"windows-{LoopKey(source, w).label}.jsonl"
            recorded = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            windows[(source, w)] = replay(recorded, top, thresholds)
    result = _result(settings, injections, changes, windows, thresholds)
    result["run"] = {**previous.get("run", {}), "rescored": True}
    return result


def markdown(result: Mapping[str, Any]) -> str:
    s = result["settings"]
    changed = {k: v for k, v in result["thresholds"].items() if v != asdict(DEFAULT)[k]}
    run_info = result.get("run", {})
    lines = [
        "# Diagnosis benchmark",
        "",
        f"One change at a time per tier, {s['repetitions']} repetitions: baseline {s['baseline_s']:g} s, change held {s['hold_s']:g} s, "
        f"reverse held {s['recover_s']:g} s. A loop per source and window ran side by side over the same run, one window every "
        f"{s['interval_s']:g} s ({s['perspective']}-perceived TTFT/TPOT). Wall time {run_info.get('wall_s', '-')} s"
        + (" (rescored from recorded windows)" if run_info.get("rescored") else "")
        + ".",
        "",
        "Injections: "
        + "; ".join(
            f"{i['name']} on {i['tier']} ({i['concurrency']} clients, {i['replicas']} replicas) -> {i['expected']}"
            for i in result["injections"]
        ),
        "",
        "Thresholds: " + (", ".join(f"{k}={v}" for k, v in changed.items()) if changed else "defaults") + ".",
        f"Recommended window (meets the most targets, shorter on a tie): {result['recommended_window_s']} s.",
        "",
        "Intervals = (end of the first window diagnosed with the expected regime - change) / scrape interval. Settled share = "
        "fraction of the windows after that one, until the next change, with the expected regime.",
        "",
        markdown_table(result["summary"], Targets(**result["targets"])),
    ]
    return "\n".join(lines)


def write(result: Mapping[str, Any], out: Path) -> None:
    (out / RESULT_FILE).write_text(json.dumps(result, indent=1))
    (out / REPORT_FILE).write_text(markdown(result))


def quick_settings(**overrides: Any) -> BenchSettings:
    """A short single-pass variant (the CI test): one repetition, no reverse scoring by default."""
    base = BenchSettings(sources=("prometheus",), windows_s=(6.0,), baseline_s=20.0, hold_s=30.0, recover_s=0.0, repetitions=1)
    return replace(base, **overrides)
