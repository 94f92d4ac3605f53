"""The diagnosis loop: every interval, read one window per slice from a metric source and ingest it.

The loop is the I/O around the pure classifier: a ``MetricSource`` (Prometheus or the embedded
scraper, driven alike: ``poll`` then ``snapshots``) gives snapshots, ``ingest``
(``DiagnosisService.ingest``) classifies, stores, learns references and steps the episodes. A
failing source costs one window, never the loop.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from inferslice.collectors import MetricSource
from inferslice.errors import InferSliceError
from inferslice.snapshot import SliceSnapshot

log = logging.getLogger(__name__)


class Ingest(Protocol):
    def __call__(self, snapshot: SliceSnapshot) -> Any: ...


@dataclass(frozen=True)
class LoopSettings:
    interval_s: float = 2.0  # the testbed's scrape interval: one verdict per new sample
    window_s: float = 8.0  # four scrapes: short enough to see a change within two intervals, long enough for P99


@dataclass
class LoopStats:
    windows: int = 0
    snapshots: int = 0
    failures: int = 0
    last_error: str | None = None
    last_run_s: float | None = None
    history: list[float] = field(default_factory=list)  # durations of recent runs, bounded


class DiagnosisLoop:
    def __init__(
        self,
        source: MetricSource,
        ingest: Ingest,
        settings: LoopSettings | None = None,
        clock: Callable[[], float] = time.time,
        batch: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.source = source
        self.ingest = ingest
        self.batch = batch  # e.g. Store.batch
        self.settings = settings or LoopSettings()
        self.clock = clock
        self.stats = LoopStats()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self, now_s: float | None = None) -> list[SliceSnapshot]:
        """Poll the source for this instant, read every slice's window and ingest it."""
        now = self.clock() if now_s is None else now_s
        started = time.perf_counter()
        try:
            self.source.poll(now)
            snaps = self.source.snapshots(now, self.settings.window_s)
        except InferSliceError as err:
            self.stats.failures += 1
            self.stats.last_error = str(err)
            log.warning("diagnosis window at %.0f skipped: %s", now, err)
            return []
        # One store transaction for the round (1,000 slices: one commit, not two or three per slice).
        with self.batch() if self.batch is not None else contextlib.nullcontext():
            for snap in snaps:
                self.ingest(snap)
        self.stats.windows += 1
        self.stats.snapshots += len(snaps)
        self.stats.last_run_s = now
        self.stats.history = [*self.stats.history[-99:], time.perf_counter() - started]
        return snaps

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.run_once()
            next_at += self.settings.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="diagnosis-loop", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.interval_s + 5.0)
            self._thread = None
