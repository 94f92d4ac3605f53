"""``EmbeddedSource``: scrape the exporters directly and compute snapshots without any Prometheus.

Each ``poll(now_s)`` scrapes every target concurrently (httpx, per-request timeout), parses the
exposition and appends the samples, stamped ``now_s``, to per-series ring buffers bounded by
``max_window_s``. Snapshots evaluate the shared field table with our own ``rate`` and
``histogram_quantile`` (``promfuncs``), so they match what ``PrometheusSource`` would answer over
the same samples. A target that fails (connection, HTTP status, unparsable exposition) is recorded
in ``health()`` and its series go stale, as in Prometheus; the other targets' fields are unaffected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from inferslice.collectors.evaluate import Evaluator
from inferslice.collectors.fields import FieldSettings, field_specs
from inferslice.collectors.source import SliceConfig, assemble_snapshot, find_slice
from inferslice.collectors.store import SeriesStore
from inferslice.common.exposition import series_samples
from inferslice.errors import ParseError, SourceUnavailable
from inferslice.snapshot import SliceSnapshot


@dataclass(frozen=True)
class EmbeddedSettings:
    timeout_s: float = 2.0  # one scrape interval of the testbed: a slower target is as good as down
    window_s: float = 10.0  # five scrapes at the testbed's 2 s interval, well inside a 20-30 s load step
    max_window_s: float = 300.0  # ring buffer bound: the longest window a snapshot may ask for
    lookback_s: float = 300.0  # Prometheus's default lookback for instant (gauge) lookups


@dataclass
class TargetStatus:
    url: str
    up: bool = False
    last_scrape_s: float | None = None
    last_ok_s: float | None = None
    last_error: str | None = None
    samples: int = 0
    duration_s: float | None = None
    failures: int = 0
    parse_errors: int = 0


class EmbeddedSource:
    """``MetricSource`` that owns its scraping. Drive it with ``poll``/``poll_async`` at the scrape interval.

    ``transport`` lets tests inject an ``httpx.AsyncBaseTransport``; in production leave it ``None``.
    """

    def __init__(
        self,
        targets: Sequence[str],
        slices: Sequence[SliceConfig],
        settings: EmbeddedSettings | None = None,
        fields: FieldSettings | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.slices = tuple(slices)
        self.settings = settings or EmbeddedSettings()
        self.specs = field_specs(fields or FieldSettings())
        self.link_capacity_bps = (fields or FieldSettings()).nominal_link_bps
        self.store = SeriesStore(retention_s=self.settings.max_window_s)
        self.targets: dict[str, TargetStatus] = {url: TargetStatus(url) for url in targets}
        self._transport = transport
        self._polled_at_s: float | None = None  # the instant of the last synchronous poll

    # -- ingestion ---------------------------------------------------------------------------

    def ingest(self, target: str, text: str, now_s: float) -> None:
        """Store one scraped exposition of ``target`` taken at ``now_s``; ``ParseError`` is recorded and re-raised."""
        status = self.targets.setdefault(target, TargetStatus(target))
        status.last_scrape_s = now_s
        try:
            samples = series_samples(text)
        except ParseError as err:
            status.parse_errors += 1
            self._failed(status, now_s, f"ParseError: {err}")
            raise
        self.store.append_scrape(target, now_s, samples)
        status.up = True
        status.last_ok_s = now_s
        status.last_error = None
        status.samples = len(samples)

    def _failed(self, status: TargetStatus, now_s: float, error: str) -> None:
        status.up = False
        status.failures += 1
        status.last_error = error
        self.store.mark_target_down(status.url, now_s)

    async def _scrape(self, client: httpx.AsyncClient, url: str, now_s: float) -> None:
        status = self.targets[url]
        status.last_scrape_s = now_s
        started = time.perf_counter()  # duration only, for health; sample time is the caller's now_s
        try:
            resp = await client.get(url)
            resp.raise_for_status()
        except httpx.HTTPError as err:
            self._failed(status, now_s, f"{type(err).__name__}: {err}")
            return
        finally:
            status.duration_s = time.perf_counter() - started
        try:
            self.ingest(url, resp.text, now_s)
        except ParseError:
            return  # recorded by ingest; the other targets carry on

    async def poll_async(self, now_s: float) -> dict[str, TargetStatus]:
        """Scrape every target once, concurrently; returns their statuses (never raises for a target)."""
        async with httpx.AsyncClient(timeout=self.settings.timeout_s, transport=self._transport) as client:
            await asyncio.gather(*(self._scrape(client, url, now_s) for url in list(self.targets)))
        return dict(self.targets)

    def poll(self, now_s: float) -> dict[str, TargetStatus]:
        """Synchronous ``poll_async`` for callers without an event loop (inside one, await ``poll_async``).

        One scrape per instant: loops that share this source (the diagnosis benchmark runs one per
        window length at the same instants) call ``poll(now_s)`` each, and only the first scrapes.
        """
        if self._polled_at_s == now_s:
            return dict(self.targets)
        self._polled_at_s = now_s
        return asyncio.run(self.poll_async(now_s))

    # -- MetricSource ------------------------------------------------------------------------

    def _check_reachable(self) -> None:
        polled = [t for t in self.targets.values() if t.last_scrape_s is not None]
        if not polled:
            raise SourceUnavailable("embedded source: no target scraped yet")
        if not any(t.up for t in polled):
            errors = "; ".join(f"{t.url}: {t.last_error}" for t in polled)
            raise SourceUnavailable(f"embedded source: every target down ({errors})")

    def _values(self, names: tuple[str, ...], window_s: float, now_s: float) -> dict[str, dict[str, float | None]]:
        if window_s > self.settings.max_window_s:
            raise ValueError(f"window {window_s} s exceeds the buffered {self.settings.max_window_s} s")
        ev = Evaluator(self.store, now_s, window_s, self.settings.lookback_s, names)
        per_slice: dict[str, dict[str, float | None]] = {n: {} for n in names}
        for field_name, spec in self.specs.items():
            for sl, value in ev.evaluate(spec).items():
                per_slice[sl][field_name] = value
        return per_slice

    def snapshot(self, slice: str, window_s: float, now_s: float) -> SliceSnapshot:
        self._check_reachable()
        values = self._values((slice,), window_s, now_s)[slice]
        snap: SliceSnapshot = assemble_snapshot(find_slice(self.slices, slice), values, now_s, window_s, self.link_capacity_bps)
        return snap

    def snapshots(self, now_s: float, window_s: float | None = None) -> list[SliceSnapshot]:
        self._check_reachable()
        w = window_s if window_s is not None else self.settings.window_s
        values = self._values(tuple(c.name for c in self.slices), w, now_s)
        return [assemble_snapshot(c, values[c.name], now_s, w, self.link_capacity_bps) for c in self.slices]

    def health(self) -> dict[str, Any]:
        targets = [asdict(t) for t in self.targets.values()]
        return {
            "source": "embedded",
            "ok": any(t.up for t in self.targets.values()),
            "targets_up": sum(1 for t in self.targets.values() if t.up),
            "targets": targets,
            "series": self.store.series_count(),
        }
