"""The diagnosis loop: windows flow from a source into ingest; a failing source costs one window."""

from __future__ import annotations

import time
from typing import Any

from inferslice.errors import SourceUnavailable
from inferslice.service.app import create_app
from inferslice.service.loop import DiagnosisLoop, LoopSettings
from inferslice.service.store import Store
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import load_topology


class FlakySource:
    def __init__(self, fail_on: set[int]) -> None:
        self.calls = 0
        self.fail_on = fail_on

    def poll(self, now_s: float) -> None:
        pass

    def snapshot(self, slice: str, window_s: float, now_s: float) -> SliceSnapshot:
        return self.snapshots(now_s, window_s)[0]

    def snapshots(self, now_s: float, window_s: float | None = None) -> list[SliceSnapshot]:
        self.calls += 1
        if self.calls in self.fail_on:
            raise SourceUnavailable("prometheus down")
        queue = self.calls >= 4
        return [
            SliceSnapshot(
                slice="free",
                window_end_s=now_s,
                window_s=window_s,
                slo_ttft_p99_s=0.5,
                ttft_p50_s=2.0 if queue else 0.06,
                ttft_p99_s=5.0 if queue else 0.09,
                tpot_p50_s=0.026 if queue else 0.025,
                tpot_p99_s=0.027 if queue else 0.026,
                requests_waiting=6.0 if queue else 0.0,
                requests_running=14.0,
                link_rx_bps=1.2e6,
                replicas=1.0,
                replicas_max=1.0,
            )
        ]

    def health(self) -> dict[str, Any]:
        return {}


def test_loop_feeds_the_service_and_survives_a_failing_source() -> None:
    store = Store()
    app = create_app(store, load_topology(), clock=time.time)
    source = FlakySource(fail_on={2})
    loop = DiagnosisLoop(source, app.state.service.ingest, LoopSettings(interval_s=1.0, window_s=8.0))
    for i in range(8):
        loop.run_once(now_s=1000.0 + 2 * i)
    assert loop.stats.failures == 1 and loop.stats.windows == 7
    latest = store.latest_diagnosis("free")
    assert latest is not None and latest["regime"] == "queue_limited"
    history = store.diagnoses("free", None, None, 100)
    assert len(history) == 7
    assert [e for e in store.episodes("free", 10) if e["regime"] == "queue_limited"]


def test_loop_thread_starts_and_stops() -> None:
    seen: list[SliceSnapshot] = []
    loop = DiagnosisLoop(FlakySource(set()), seen.append, LoopSettings(interval_s=0.05, window_s=1.0))
    loop.start()
    deadline = time.monotonic() + 5
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    loop.stop()
    assert len(seen) >= 3
