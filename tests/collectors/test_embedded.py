"""EmbeddedSource over real HTTP: exact rates and quantiles, counter resets, a target down, garbage."""

from __future__ import annotations

import pytest

from inferslice.collectors import EmbeddedSource, SliceConfig
from inferslice.common.ports import free_port
from inferslice.errors import ParseError, SourceUnavailable

from .conftest import EXPECTED, ExpositionServer, render_text, world

SLICES = (SliceConfig("free", slo_ttft_p99_s=0.5), SliceConfig("premium", slo_ttft_p99_s=0.5))
TARGETS = ("engine", "serve", "network", "gpu")
T0 = 1_700_000_000.0


def _source(server: ExpositionServer, targets: tuple[str, ...] = TARGETS) -> EmbeddedSource:
    return EmbeddedSource([server.url(f"/{t}") for t in targets], SLICES)


def _serve(server: ExpositionServer, k: float, **kw: float) -> None:
    for target, samples in world(k, **kw).items():
        server.pages[f"/{target}"] = render_text(samples)


def _assert_matches(snap_values: dict[str, float | None], expected: dict[str, float | None]) -> None:
    for field, want in expected.items():
        got = snap_values.get(field)
        if want is None:
            assert got is None, f"{field}: expected missing, got {got}"
        else:
            assert got == pytest.approx(want, rel=1e-9), f"{field}: {got} != {want}"


def test_fields_exact_over_http(server: ExpositionServer) -> None:
    src = _source(server)
    for step in range(3):
        _serve(server, step)
        statuses = src.poll(T0 + 10 * step)
        assert all(s.up for s in statuses.values()), statuses
    snaps = src.snapshots(T0 + 20, window_s=20)
    assert [s.slice for s in snaps] == ["free", "premium"]
    for snap in snaps:
        assert snap.window_end_s == T0 + 20 and snap.window_s == 20
        assert snap.slo_ttft_p99_s == 0.5  # from the slice configuration (the tiers file)
        _assert_matches(snap.to_dict(drop_none=False), EXPECTED[snap.slice])
    # one slice alone gives the same answer as the batch
    assert src.snapshot("premium", 20, T0 + 20) == snaps[1]


def test_counter_reset_is_not_a_negative_rate(server: ExpositionServer) -> None:
    src = _source(server, ("engine",))
    for step in range(3):
        _serve(server, step, reset_free_tokens_at=2)  # 0, 1000, then 0 again after the restart
        src.poll(T0 + 10 * step)
    free = src.snapshot("free", 20, T0 + 20)
    # increase = (0 - 0) + 1000 (value before the reset), over 20 s
    assert free.output_tokens_per_s == pytest.approx(50.0)


def test_one_target_down_others_still_computed(server: ExpositionServer) -> None:
    dead = f"http://127.0.0.1:{free_port()}/metrics"  # nothing listens there
    src = EmbeddedSource([server.url("/engine"), server.url("/gpu"), dead], SLICES)
    for step in range(3):
        _serve(server, step)
        src.poll(T0 + 10 * step)
    free = src.snapshot("free", 20, T0 + 20)
    assert free.ttft_p50_s == pytest.approx(EXPECTED["free"]["ttft_p50_s"])
    assert free.gpu_utilization == pytest.approx(0.8)
    assert free.link_rx_bps is None and free.link_cap_bps is None  # the network target is the dead one
    health = src.health()
    assert health["ok"] is True and health["targets_up"] == 2
    down = next(t for t in health["targets"] if t["url"] == dead)
    assert down["up"] is False and down["failures"] == 3 and "ConnectError" in down["last_error"]


def test_target_going_down_makes_its_gauges_stale(server: ExpositionServer) -> None:
    src = _source(server, ("engine", "network"))
    for step in range(2):
        _serve(server, step)
        src.poll(T0 + 10 * step)
    assert src.snapshot("free", 10, T0 + 10).link_cap_bps == 5e5
    server.pages["/network"] = 503
    server.pages["/engine"] = render_text(world(2)["engine"])
    src.poll(T0 + 20)
    snap = src.snapshot("free", 10, T0 + 20)
    assert snap.link_cap_bps is None  # stale, as Prometheus marks a failed target's series
    assert snap.requests_running == 10
    assert "503" in str(src.health()["targets"][1]["last_error"])


def test_garbage_exposition_is_recorded_not_fatal(server: ExpositionServer) -> None:
    src = _source(server, ("engine", "gpu"))
    for step in range(3):
        _serve(server, step)
        if step == 1:
            server.pages["/gpu"] = 'inferslice_gpu_utilization_ratio{pop="bristol" 0.5\nthis is { not metrics\n'
        src.poll(T0 + 10 * step)
    gpu = next(t for t in src.health()["targets"] if t["url"].endswith("/gpu"))
    assert gpu["parse_errors"] == 1 and gpu["up"] is True  # recovered on the next scrape
    snap = src.snapshot("free", 20, T0 + 20)
    assert snap.gpu_utilization == pytest.approx(0.8)
    with pytest.raises(ParseError):
        src.ingest("manual", "garbage {{{", T0 + 21)


def test_every_target_down_is_source_unavailable() -> None:
    src = EmbeddedSource([f"http://127.0.0.1:{free_port()}/metrics"], SLICES)
    with pytest.raises(SourceUnavailable):
        src.snapshots(T0)  # never scraped
    src.poll(T0)
    with pytest.raises(SourceUnavailable):
        src.snapshots(T0)
    assert src.health()["ok"] is False


def test_missing_series_are_none_never_zero() -> None:
    src = EmbeddedSource([], SLICES)
    src.ingest("engine", 'inferslice_engine_requests_running{slice="free"} 0\n', T0)
    snap = src.snapshot("free", 10, T0)
    assert snap.requests_running == 0.0  # a real zero stays a zero
    assert snap.requests_waiting is None and snap.output_tokens_per_s is None and snap.ttft_p99_s is None
    assert src.snapshot("premium", 10, T0).requests_running is None


def test_ring_buffer_is_bounded_by_the_longest_window() -> None:
    from inferslice.collectors.embedded import EmbeddedSettings

    src = EmbeddedSource([], SLICES, EmbeddedSettings(max_window_s=30))
    for i in range(100):
        src.ingest("engine", f'inferslice_engine_generation_tokens_total{{slice="free"}} {i * 10}\n', T0 + i)
    (series,) = src.store.series("inferslice_engine_generation_tokens_total")
    assert len(series.samples) <= 31
    assert src.snapshot("free", 20, T0 + 99).output_tokens_per_s == pytest.approx(10.0)
    with pytest.raises(ValueError):
        src.snapshot("free", 60, T0 + 99)
