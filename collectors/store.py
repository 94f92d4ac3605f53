"""In-memory ring buffers of scraped samples, one per series, bounded by the longest window.

Series are keyed by (target, name, labels) so the same series from two targets stays two series,
as Prometheus keeps them apart by ``instance``. Staleness follows Prometheus: a series missing from
a successful scrape of its target, or every series of a target whose scrape failed, gets a stale
marker, after which instant lookups no longer see it (range lookups simply skip the marker).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from inferslice.common.exposition import Labels, Sample

STALE: None = None  # a stale marker is a sample whose value is None


@dataclass
class Series:
    target: str
    name: str
    labels: Labels
    samples: deque[tuple[float, float | None]] = field(default_factory=deque)

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return str(v)
        return None

    def matches(self, matchers: Iterable[tuple[str, str]]) -> bool:
        return all(self.label(k) == v for k, v in matchers)

    def range(self, start_s: float, end_s: float) -> list[tuple[float, float]]:
        """Samples with ``start_s <= t <= end_s`` (Prometheus 2.x: closed range), stale markers dropped."""
        return [(t, v) for t, v in self.samples if start_s <= t <= end_s and v is not None]

    def instant(self, at_s: float, lookback_s: float) -> float | None:
        """The latest sample at or before ``at_s`` within the lookback, unless it is a stale marker."""
        for t, v in reversed(self.samples):
            if t > at_s:
                continue
            if t < at_s - lookback_s:
                return None
            return v
        return None


class SeriesStore:
    """Samples per series; ``retention_s`` bounds memory (the longest window any query may use)."""

    def __init__(self, retention_s: float, max_samples_per_series: int = 4096) -> None:
        self.retention_s = retention_s
        self._max = max_samples_per_series
        self._by_name: dict[str, dict[tuple[str, Labels], Series]] = {}
        self._by_target: dict[str, set[tuple[str, Labels]]] = {}
        self._pruned_at_s: float | None = None

    def append_scrape(self, target: str, at_s: float, samples: Iterable[Sample]) -> None:
        """Store one successful scrape; series of this target absent from it go stale."""
        seen: set[tuple[str, Labels]] = set()
        for s in samples:
            key = (s.name, s.labels)
            if key in seen:
                continue  # a duplicate line: Prometheus keeps the first and rejects the rest
            seen.add(key)
            series = self._by_name.setdefault(s.name, {}).get((target, s.labels))
            if series is None:
                series = Series(target, s.name, s.labels, deque(maxlen=self._max))
                self._by_name[s.name][(target, s.labels)] = series
            series.samples.append((at_s, s.value))
        for name, labels in self._by_target.get(target, set()) - seen:
            self._append_stale(target, name, labels, at_s)
        self._by_target[target] = seen
        self.prune(at_s)

    def mark_target_down(self, target: str, at_s: float) -> None:
        """A failed scrape: every series of the target goes stale (Prometheus does the same)."""
        for name, labels in self._by_target.get(target, set()):
            self._append_stale(target, name, labels, at_s)
        self._by_target[target] = set()
        self.prune(at_s)

    def _append_stale(self, target: str, name: str, labels: Labels, at_s: float) -> None:
        series = self._by_name.get(name, {}).get((target, labels))
        if series is not None and series.samples and series.samples[-1][1] is not None:
            series.samples.append((at_s, STALE))

    def prune(self, now_s: float) -> None:
        # Every target of one poll is stored at the same instant: pruning once per instant is enough
        # (a walk over every series per target made a poll quadratic in the number of targets).
        if now_s == self._pruned_at_s:
            return
        self._pruned_at_s = now_s
        horizon = now_s - self.retention_s
        for name in list(self._by_name):
            group = self._by_name[name]
            for key in list(group):
                samples = group[key].samples
                while samples and samples[0][0] < horizon:
                    samples.popleft()
                if not samples:
                    del group[key]
            if not group:
                del self._by_name[name]

    def series(self, name: str) -> Iterator[Series]:
        yield from self._by_name.get(name, {}).values()

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def series_count(self) -> int:
        return sum(len(g) for g in self._by_name.values())
