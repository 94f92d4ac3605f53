"""The diagnosis benchmark's scoring, schedule, recording and replay (no testbed)."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from inferslice.bench.diagnosis import (
    DEFAULT_INJECTIONS,
    BenchSettings,
    Ticker,
    _changes,
    _recording_sink,
    _schedule,
    markdown,
    quick_settings,
)
from inferslice.bench.diagnosis_score import Change, Targets, recommend_window, replay, score_change, score_loops, summarize
from inferslice.bottleneck import DEFAULT
from inferslice.collectors import EmbeddedSource, FieldSettings, SliceConfig
from inferslice.service.app import create_app
from inferslice.service.loop import DiagnosisLoop, LoopSettings
from inferslice.service.store import Store
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import load_topology

T0 = 1_700_000_000.0


def _change(expected: str = "network_limited", at: float = T0, until: float = T0 + 20, kind: str = "inject") -> Change:
    return Change("cap cut", "standard", kind, 0, at, until, expected)


def test_score_counts_from_the_change_to_the_first_correct_window() -> None:
    windows = [(T0 - 2, "network_limited"), (T0 + 1, "healthy"), (T0 + 3, "network_limited")]
    windows += [(T0 + 5 + 2 * i, "network_limited") for i in range(7)] + [(T0 + 19, "unknown"), (T0 + 21, "healthy")]
    s = score_change(_change(), windows, interval_s=2.0)
    assert s["intervals"] == 1.5  # (T0+3 - T0) / 2; the window before the change does not count
    assert s["windows_to_first"] == 2
    assert s["before_first"] == {"healthy": 1}
    assert s["settled"] == 8  # T0+5 .. T0+19; T0+21 belongs to the next change
    assert s["settled_correct"] == 7
    assert s["share"] == pytest.approx(7 / 8)
    assert s["settled_regimes"] == {"network_limited": 7, "unknown": 1}


def test_score_of_a_change_never_diagnosed() -> None:
    s = score_change(_change(), [(T0 + 2, "healthy"), (T0 + 4, "unknown")], interval_s=2.0)
    assert s["intervals"] is None and s["share"] is None and s["settled"] == 0
    assert s["before_first"] == {"healthy": 1, "unknown": 1}


def test_summary_pools_repetitions_and_flags_targets() -> None:
    base = {"injection": "cap cut", "tier": "standard", "kind": "inject", "expected": "network_limited", "source": "prometheus"}
    scores = [
        {**base, "window_s": 4.0, "intervals": 1.0, "settled": 10, "settled_correct": 10, "settled_regimes": {"network_limited": 10}},
        {**base, "window_s": 4.0, "intervals": 2.5, "settled": 10, "settled_correct": 9, "settled_regimes": {"network_limited": 9, "x": 1}},
        {**base, "window_s": 8.0, "intervals": 2.0, "settled": 10, "settled_correct": 10, "settled_regimes": {"network_limited": 10}},
        {**base, "window_s": 8.0, "intervals": 2.0, "settled": 10, "settled_correct": 10, "settled_regimes": {"network_limited": 10}},
    ]
    rows = summarize(scores, Targets(intervals=2.0, share=0.95))
    by_w = {r["window_s"]: r for r in rows}
    assert by_w[4.0]["intervals_median"] == 1.75 and by_w[4.0]["intervals_max"] == 2.5
    assert by_w[4.0]["settled_share"] == 0.95 and by_w[4.0]["meets_share"] and not by_w[4.0]["meets_latency"]
    assert by_w[8.0]["meets_latency"] and by_w[8.0]["meets_share"]
    assert recommend_window(rows) == 8.0
    # a change never detected fails the latency target even if the others were fast
    missed = summarize([*scores[2:], {**scores[2], "intervals": None, "settled": 0, "settled_correct": 0, "settled_regimes": {}}])
    assert missed[0]["detected"] == 2 and missed[0]["changes"] == 3 and not missed[0]["meets_latency"]


def test_schedule_and_changes_end_at_the_next_change_of_the_same_tier() -> None:
    settings = BenchSettings(baseline_s=30, hold_s=40, recover_s=30, repetitions=2)
    sched = _schedule(settings, T0)
    assert [(k, at - T0) for _, k, at in sched] == [("inject", 30), ("revert", 70), ("inject", 100), ("revert", 140), ("end", 170)]
    free, standard = DEFAULT_INJECTIONS[0], DEFAULT_INJECTIONS[1]
    applied = [
        (free, 0, "inject", T0 + 30.5),
        (standard, 0, "inject", T0 + 30.1),
        (free, 0, "revert", T0 + 70.2),
        (standard, 0, "revert", T0 + 70.0),
    ]
    changes = _changes(applied, T0 + 100, recover_s=30)
    assert [(c.tier, c.kind, c.until_s - T0, c.expected) for c in changes] == [
        ("free", "inject", pytest.approx(70.2), "queue_limited"),
        ("standard", "inject", pytest.approx(70.0), "network_limited"),
        ("free", "revert", 100, "healthy"),
        ("standard", "revert", 100, "healthy"),
    ]
    assert all(c.kind == "inject" for c in _changes(applied, T0 + 100, recover_s=0))
    assert quick_settings(windows_s=(4.0,)).windows_s == (4.0,)


def _snap(t: float, *, capped: bool) -> SliceSnapshot:
    """Standard at 10 clients: healthy, then its edge capped below demand (TPOT and TTFT up, link at cap)."""
    return SliceSnapshot(
        slice="standard",
        window_end_s=t,
        window_s=6.0,
        ttft_p50_s=0.9 if capped else 0.05,
        ttft_p99_s=2.5 if capped else 0.07,
        ttft_mean_s=1.0 if capped else 0.05,
        tpot_p50_s=0.05 if capped else 0.025,
        tpot_p99_s=0.2 if capped else 0.03,
        tpot_mean_s=0.06 if capped else 0.025,
        request_rate=1.5,
        link_rx_bps=4.9e5 if capped else 9e5,
        link_cap_bps=5e5 if capped else None,
        requests_waiting=0.0,
    )


def test_recorded_windows_replay_to_the_same_verdicts_and_thresholds_change_them() -> None:
    top = load_topology(None)
    store = Store(":memory:")
    log: list[dict] = []
    sink = _recording_sink(create_app(store, top).state.service, log)
    for i in range(12):
        sink(_snap(T0 + 2 * i, capped=i >= 8))
    live = [(w["slice"], w["ts"], w["regime"]) for w in log]
    assert [r for _, _, r in live[:8]] == ["healthy"] * 8 and [r for _, _, r in live[8:]] == ["network_limited"] * 4
    assert replay(log, top, DEFAULT) == live
    # a link-binding ratio above what the cap lets through turns the same windows into another verdict
    strict = dataclasses.replace(DEFAULT, link_binding_ratio=0.99)
    assert all(r != "network_limited" for _, _, r in replay(log, top, strict))
    change = Change("cap cut", "standard", "inject", 0, T0 + 15, T0 + 30, "network_limited")
    scores = score_loops([change], {("prometheus", 6.0): live}, interval_s=2.0)
    assert scores[0]["intervals"] == 0.5 and scores[0]["share"] == 1.0
    rows = summarize(scores)
    result = {
        "settings": dataclasses.asdict(BenchSettings()),
        "thresholds": dataclasses.asdict(DEFAULT),
        "targets": dataclasses.asdict(Targets()),
        "injections": [dataclasses.asdict(i) for i in DEFAULT_INJECTIONS],
        "summary": rows,
        "recommended_window_s": recommend_window(rows),
    }
    text = markdown(result)
    assert "| cap cut | standard | inject | network_limited | prometheus | 6 s | 1/1 | 0.50 / 0.50 | 100.0% |" in text
    store.close()


CLIENT_TEXT = """# TYPE gen_ai_client_operation_time_to_first_chunk_seconds histogram
gen_ai_client_operation_time_to_first_chunk_seconds_bucket{{slice="free",le="0.1"}} {n}
gen_ai_client_operation_time_to_first_chunk_seconds_bucket{{slice="free",le="+Inf"}} {n}
gen_ai_client_operation_time_to_first_chunk_seconds_sum{{slice="free"}} {s}
gen_ai_client_operation_time_to_first_chunk_seconds_count{{slice="free"}} {n}
"""


def test_ticker_polls_the_shared_embedded_source_once_and_runs_every_loop_at_the_same_instant() -> None:
    page = {"text": "", "scrapes": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        page["scrapes"] += 1
        return httpx.Response(200, text=str(page["text"]))

    url = "http://load.invalid/metrics"
    slices = [SliceConfig("free", slo_ttft_p99_s=0.5)]
    source = EmbeddedSource([url], slices, fields=FieldSettings(perspective="client"), transport=httpx.MockTransport(handler))
    logs: dict[float, list[dict]] = {4.0: [], 8.0: []}
    stores = [Store(":memory:") for _ in logs]
    loops = [
        DiagnosisLoop(source, _recording_sink(create_app(st, None).state.service, logs[w]), LoopSettings(2.0, w))
        for st, w in zip(stores, logs, strict=True)
    ]
    ticker = Ticker(loops, interval_s=2.0)
    for i in range(5):
        page["text"] = CLIENT_TEXT.format(n=10 * i, s=0.05 * 10 * i)
        ticker.tick(T0 + 2 * i)
    assert ticker.ticks == 5 and page["scrapes"] == 5  # one scrape per tick, whatever the number of loops
    for w, log in logs.items():
        assert [row["ts"] for row in log] == [T0 + 2 * i for i in range(5)]
        assert log[-1]["snapshot"]["window_s"] == w and log[-1]["snapshot"]["ttft_mean_s"] == pytest.approx(0.05)
    for st in stores:
        st.close()
