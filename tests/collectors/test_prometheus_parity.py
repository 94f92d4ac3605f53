"""PrometheusSource against a REAL Prometheus, and EmbeddedSource against the same data.

1. Exact parity: the same timestamped samples are backfilled into Prometheus (promtool) and
   ingested by EmbeddedSource; every field must agree to 1e-6 (float seconds vs integer milliseconds) at several evaluation times, with
   irregular scrape spacing and a counter reset thrown in.
2. Live: Prometheus scrapes a tiny server every second while EmbeddedSource polls it too; the fields
   agree within 10 % (the two scrape at different instants).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from inferslice.collectors import EmbeddedSource, PrometheusSettings, PrometheusSource, SliceConfig

from .conftest import EXPECTED, PROMTOOL, ExpositionServer, render_openmetrics, render_text, require_prometheus, running_prometheus, world

SLICES = (SliceConfig("free"), SliceConfig("premium"))
T0 = 1_700_000_000.0


def _compare(a: dict[str, object], b: dict[str, object], rel: float) -> list[str]:
    bad = []
    for field in EXPECTED["free"]:
        x, y = a.get(field), b.get(field)
        if x is None or y is None:
            if x is not y:
                bad.append(f"{field}: {x} vs {y}")
        elif y != pytest.approx(x, rel=rel, abs=1e-12):
            bad.append(f"{field}: {x} vs {y}")
    return bad


def test_exact_parity_with_prometheus_on_backfilled_samples(tmp_path: Path) -> None:
    require_prometheus()
    if not os.access(PROMTOOL, os.X_OK):
        pytest.skip(f"no promtool at {PROMTOOL}")
    # Irregular scrapes per target (jitter, a missed scrape) and an engine restart at k=4.
    schedule = {
        "engine": [0.0, 9.7, 20.4, 30.0, 41.2, 50.0, 60.3],
        "serve": [0.5, 10.5, 20.5, 30.5, 40.5, 50.5, 60.5],
        "network": [1.0, 11.0, 33.0, 41.0, 51.0, 61.0],
        "gpu": [2.0, 12.0, 22.0, 32.0, 42.0, 52.0, 62.0],
    }
    scrapes: list[tuple[str, float, dict]] = []
    for target, times in schedule.items():
        for t in times:
            scrapes.append((target, T0 + t, world(t / 10, reset_free_tokens_at=4)[target]))
    embedded = EmbeddedSource([], SLICES)
    for target, t, samples in sorted(scrapes, key=lambda s: s[1]):
        embedded.ingest(target, render_text(samples), t)
    om = tmp_path / "data.om"
    om.write_text(render_openmetrics(scrapes))
    data = tmp_path / "data"
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(om), str(data)], check=True, capture_output=True, timeout=60)
    config = "global: {scrape_interval: 15s}\nscrape_configs: []\n"
    with running_prometheus(tmp_path, config, data) as url:
        prom = PrometheusSource(SLICES, PrometheusSettings(base_url=url))
        try:
            fixed = [(T0 + 62, 20.0), (T0 + 55, 30.0), (T0 + 45, 12.5), (T0 + 62, 60.0)]
            # a sweep puts window edges at every distance from the samples (extrapolation thresholds)
            sweep = [(T0 + 25 + 1.7 * i, w) for i in range(22) for w in (10.5, 21.0)]
            for now, window in fixed + sweep:
                p = {s.slice: s.to_dict(drop_none=False) for s in prom.snapshots(now, window)}
                e = {s.slice: s.to_dict(drop_none=False) for s in embedded.snapshots(now, window)}
                for sl in ("free", "premium"):
                    assert not _compare(p[sl], e[sl], 1e-6), (now - T0, window, sl, _compare(p[sl], e[sl], 1e-6))
            # (at 45 s over 12.5 s the engine has a single sample in range: both say None)
            assert prom.snapshot("free", 12.5, T0 + 45).output_tokens_per_s is None
            assert prom.snapshot("free", 20, T0 + 62).output_tokens_per_s is not None
        finally:
            prom.close()


def test_live_scrape_agrees_with_embedded(tmp_path: Path) -> None:
    require_prometheus()
    start = time.time()

    def page(target: str) -> str:
        return render_text(world((time.time() - start) / 10)[target])  # counters grow with wall time

    with ExpositionServer() as srv:
        for target in ("engine", "serve", "network", "gpu"):
            srv.dynamic[f"/{target}"] = lambda target=target: page(target)  # type: ignore[misc]
        targets = ", ".join(f"'127.0.0.1:{srv.port}'" for _ in range(1))
        jobs = "".join(
            f"  - job_name: {t}\n    metrics_path: /{t}\n    static_configs: [{{targets: [{targets}]}}]\n"
            for t in ("engine", "serve", "network", "gpu")
        )
        config = f"global: {{scrape_interval: 1s, scrape_timeout: 900ms}}\nscrape_configs:\n{jobs}"
        embedded = EmbeddedSource([srv.url(f"/{t}") for t in ("engine", "serve", "network", "gpu")], SLICES)
        with running_prometheus(tmp_path, config) as url:
            prom = PrometheusSource(SLICES, PrometheusSettings(base_url=url))
            try:

                async def poll_for(seconds: float) -> None:
                    end = time.time() + seconds
                    while time.time() < end:
                        await embedded.poll_async(time.time())
                        await asyncio.sleep(1.0)

                # The first scrape lands ~5 s after start; 6 s of data then gives a 5 s window >= 5 samples.
                deadline = time.time() + 30
                while time.time() < deadline:
                    asyncio.run(poll_for(1.0))
                    if prom.snapshot("free", 30, time.time()).output_tokens_per_s is not None:
                        break
                else:
                    pytest.fail("prometheus never had two samples of the token counter")
                asyncio.run(poll_for(6.0))
                now = time.time()
                p = {s.slice: s.to_dict(drop_none=False) for s in prom.snapshots(now, 5.0)}
                e = {s.slice: s.to_dict(drop_none=False) for s in embedded.snapshots(now, 5.0)}
            finally:
                prom.close()
    for sl in ("free", "premium"):
        assert not _compare(p[sl], e[sl], 0.10), (sl, _compare(p[sl], e[sl], 0.10))
        # and both are near the true values of the world (rates are exact but for scrape jitter)
        assert p[sl]["output_tokens_per_s"] == pytest.approx(EXPECTED[sl]["output_tokens_per_s"], rel=0.15)
        assert p[sl]["gpu_utilization"] == pytest.approx(EXPECTED[sl]["gpu_utilization"])
