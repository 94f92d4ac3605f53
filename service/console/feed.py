"""``ConsoleFeed``: the I/O around the console's view model, cheap enough to poll every scrape.

The feed keeps each tier's recent windows in memory and asks the store only for windows newer
than the last one it holds, so a live update costs a few indexed queries per tier whatever the
history length, and every open page shares the same cache. A restarted API rebuilds it from
SQLite on the first request: the page sees the same history it had.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from inferslice.errors import InferSliceError
from inferslice.service.console.links import LinkTelemetry, NoLinkTelemetry, Samples
from inferslice.service.console.view import JUDGED, ConsoleSettings, TierHistory, console_state, controller_block, history_point
from inferslice.topology import Topology


class ConsoleStore(Protocol):
    """What the feed reads from the API's store (``inferslice.service.store.Store`` has it all)."""

    def diagnoses(
        self, slice_name: str, since_s: float | None = None, until_s: float | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]: ...

    def snapshots(
        self, slice_name: str, since_s: float | None = None, until_s: float | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]: ...

    def alerts(self, slice_name: str | None = None, limit: int = 1000) -> list[dict[str, Any]]: ...


ActionsReader = Callable[[int], Sequence[Mapping[str, Any]]]  # newest first, at most n
SourcesReader = Callable[[], Sequence[Mapping[str, Any]]]


class _TierCache:
    def __init__(self, max_points: int) -> None:
        self.points: deque[dict[str, Any]] = deque(maxlen=max_points)
        self.snapshot: dict[str, Any] | None = None
        self.diagnosis: dict[str, Any] | None = None
        self.last_ts: float | None = None
        self.judged = 0  # of the points held: SLO state known, and breached (the burn rate, without rescans)
        self.breached = 0

    def append(self, point: dict[str, Any]) -> None:
        if len(self.points) == self.points.maxlen:
            self._count(self.points[0], -1)
        self.points.append(point)
        self._count(point, 1)

    def drop_before(self, horizon_s: float) -> None:
        while self.points and self.points[0]["ts"] < horizon_s:
            self._count(self.points.popleft(), -1)

    def _count(self, point: dict[str, Any], sign: int) -> None:
        self.judged += sign * (point.get("slo") in JUDGED)
        self.breached += sign * (point.get("slo") == "breached")


class ConsoleFeed:
    def __init__(
        self,
        store: ConsoleStore,
        topology: Topology,
        clock: Callable[[], float],
        actions: ActionsReader,
        links: LinkTelemetry | None = None,
        sources: SourcesReader | None = None,
        settings: ConsoleSettings | None = None,
    ) -> None:
        self.store = store
        self.topology = topology
        self.clock = clock
        self.actions = actions
        self.links = links or NoLinkTelemetry()
        self.sources = sources or (lambda: [])
        self.settings = settings or ConsoleSettings(poll_interval_s=topology.timing.scrape_interval_s)
        self._lock = threading.Lock()  # one refresh at a time; pages polling together share it
        self._tiers = {t.name: _TierCache(self.settings.max_points) for t in topology.tiers}

    def _refresh_tier(self, name: str, cache: _TierCache, now: float) -> None:
        # the store's bounds are inclusive: start just after the newest window held, not at it
        since = math.nextafter(cache.last_ts, math.inf) if cache.last_ts is not None else now - self.settings.history_s
        limit = self.settings.max_points
        diagnoses = [d for d in self.store.diagnoses(name, since_s=since, limit=limit) if cache.last_ts is None or d["ts"] > cache.last_ts]
        if not diagnoses:
            return
        snapshots = {s["ts"]: s for s in self.store.snapshots(name, since_s=diagnoses[0]["ts"], limit=limit)}
        for diag in diagnoses:
            ts = float(diag["ts"])
            snap = snapshots.get(ts)
            cache.append(history_point(snap, diag, ts))
            cache.diagnosis = diag
            cache.snapshot = snap if snap is not None else cache.snapshot
            cache.last_ts = ts
        cache.drop_before(now - self.settings.history_s)

    def state(self, since_s: float | None = None) -> dict[str, Any]:
        """The page's document; ``since_s`` (the newest window the page holds) trims the history sent."""
        now = self.clock()
        with self._lock:
            for name, cache in self._tiers.items():
                self._refresh_tier(name, cache, now)
            snapshots = {n: c.snapshot for n, c in self._tiers.items()}
            diagnoses = {n: c.diagnosis for n, c in self._tiers.items()}
            # a tuple copy of each deque: cheap (pointers), and safe once the lock is released
            history = {n: TierHistory(tuple(c.points), c.judged, c.breached) for n, c in self._tiers.items()}
        controller = controller_block(
            self.actions(self.settings.timeline_actions), self.store.alerts(limit=200), now, self.settings.timeline_actions
        )
        sources = [self._windows_source(diagnoses, now), *self._links_source(), *self.sources()]
        return console_state(
            self.topology, snapshots, diagnoses, history, controller, self._link_samples(), sources, now, since_s, self.settings
        )

    def _link_samples(self) -> Samples:
        try:
            return self.links.samples()
        except InferSliceError:
            return {}  # reported by _links_source; the page shows the links without measurements

    def _links_source(self) -> list[dict[str, Any]]:
        status = self.links.status()
        return [status] if status is not None else []

    def _windows_source(self, diagnoses: Mapping[str, Mapping[str, Any] | None], now: float) -> dict[str, Any]:
        stale_after = self.settings.stale_after_scrapes * self.topology.timing.scrape_interval_s
        times = [float(d["ts"]) for d in diagnoses.values() if d is not None]
        if not times:
            return {"name": "diagnosis windows", "ok": False, "detail": "no window recorded yet", "age_s": None}
        age = max(0.0, now - max(times))
        ok = age <= stale_after
        detail = f"newest window {age:.0f} s old" + ("" if ok else f" (stale after {stale_after:.0f} s: loop or metric source down)")
        return {"name": "diagnosis windows", "ok": ok, "detail": detail, "age_s": age}
