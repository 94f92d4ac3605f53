"""Slice-level sums of per-replica cumulative counters that never go backwards.

Each replica's counters (and histogram buckets, sums and counts, which are counters too) are
cumulative *per replica*. A plain sum over the replicas scraped right now drops when a replica is
scaled down, times out or restarts, and Prometheus would read that drop as a counter reset and
invent a burst in ``rate()``. ``SliceAccumulator`` instead remembers each replica's last values:

- a replica that is missing from a scrape (down, or gone) keeps contributing its last values;
- a replica whose value went down, whose series vanished, or whose process start time changed
  has restarted: its previous values move into a per-series *carried* total;
- a replica not read for ``forget_after_s`` is folded into *carried* and forgotten, which bounds
  memory under churn without changing any total. (Should that very process come back later, its
  counts would be added twice: after ten minutes away a replica is taken to be a new one.)

So every exported slice counter is ``carried + sum(last value of every remembered replica)``, which
never decreases. Histograms merge bucket-wise on the edges every contributing replica shares
(vLLM's defaults and ``--custom-histogram-buckets`` give identical edges in one deployment). Where
edges differ only the common edges are kept: a cumulative count is exact at an edge both
histograms have and unknowable between, so no interpolation is invented; ``+Inf`` is always common.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from inferslice.exporters.engine.readings import Histogram, SeriesKey


@dataclass
class _Replica:
    values: Mapping[SeriesKey, float]  # the caller's mapping, never mutated here
    edges: dict[str, frozenset[float]]  # histogram key -> its edges
    start_time_s: float | None
    seen_s: float


class SliceAccumulator:
    """Monotonic cumulative totals of one slice; the clock is passed in."""

    def __init__(self, forget_after_s: float = 600.0) -> None:
        self._forget_after_s = forget_after_s
        self._replicas: dict[str, _Replica] = {}
        self._carried: dict[SeriesKey, float] = {}
        self._carried_edges: dict[str, frozenset[float]] = {}
        self.resets = 0  # restarts detected, for tests and debugging

    def observe(
        self,
        replica: str,
        values: Mapping[SeriesKey, float],
        histogram_edges: Mapping[str, Iterable[float]],
        start_time_s: float | None,
        now_s: float,
    ) -> None:
        prev = self._replicas.get(replica)
        if prev is not None and prev.values is values and prev.start_time_s == start_time_s:
            prev.seen_s = now_s  # the very same reading again (an unchanged body): nothing moved
            return
        if prev is not None:
            restarted = prev.start_time_s is not None and start_time_s is not None and start_time_s != prev.start_time_s
            if not restarted:
                restarted = any(values.get(k, -math.inf) < v for k, v in prev.values.items())
            if restarted:
                self.resets += 1
                self._carry(prev)
        self._replicas[replica] = _Replica(
            values=values,
            edges={k: frozenset(v) for k, v in histogram_edges.items()},
            start_time_s=start_time_s,
            seen_s=now_s,
        )

    def _carry(self, rep: _Replica) -> None:
        for key, value in rep.values.items():
            self._carried[key] = self._carried.get(key, 0.0) + value
        for hkey, edges in rep.edges.items():
            old = self._carried_edges.get(hkey)
            self._carried_edges[hkey] = edges if old is None else old & edges

    def expire(self, now_s: float) -> list[str]:
        """Fold replicas not read for ``forget_after_s`` into the carried totals; return their keys."""
        gone = [k for k, r in self._replicas.items() if now_s - r.seen_s > self._forget_after_s]
        for k in gone:
            self._carry(self._replicas.pop(k))
        return gone

    @property
    def replicas(self) -> list[str]:
        return list(self._replicas)

    def total(self, key: SeriesKey) -> float:
        return self._carried.get(key, 0.0) + sum(r.values.get(key, 0.0) for r in self._replicas.values())

    def has(self, family: str) -> bool:
        return any(k[0] == family for k in self._carried) or any(
            any(k[0] == family for k in r.values) for r in self._replicas.values()
        )

    def reasons(self) -> list[str]:
        """finished_reason values seen for request success."""
        seen = {k[1] for k in self._carried if k[0] == "success"}
        for r in self._replicas.values():
            seen.update(k[1] for k in r.values if k[0] == "success")
        return sorted(seen)

    def histogram(self, hkey: str) -> Histogram | None:
        """The slice's merged histogram on the edges every contributor shares."""
        sets = [r.edges[hkey] for r in self._replicas.values() if hkey in r.edges]
        if hkey in self._carried_edges:
            sets.append(self._carried_edges[hkey])
        if not sets:
            return None
        common = frozenset.intersection(*sets) | {math.inf}
        edges = tuple(sorted(common))
        cumulative = tuple(self.total((hkey, "bucket", e)) for e in edges)
        return Histogram(edges=edges, cumulative=cumulative, sum=self.total((hkey, "sum", 0.0)))


def merge_histograms(histograms: Iterable[Histogram]) -> Histogram | None:
    """Bucket-wise sum on the common edges (the stateless merge; ``SliceAccumulator`` adds memory)."""
    hs = list(histograms)
    if not hs:
        return None
    common = frozenset.intersection(*(frozenset(h.edges) for h in hs)) | {math.inf}
    edges = tuple(sorted(common))
    cumulative = []
    for e in edges:
        total = 0.0
        for h in hs:
            total += h.count if e == math.inf and math.inf not in h.edges else h.cumulative[h.edges.index(e)]
        cumulative.append(total)
    return Histogram(edges=edges, cumulative=tuple(cumulative), sum=sum(h.sum for h in hs))


def good_at_threshold(h: Histogram, threshold_s: float) -> tuple[float, float | None]:
    """Cumulative count at the largest edge <= threshold, and that edge (``None``: no such edge)."""
    best: float | None = None
    for e in h.edges:
        if e <= threshold_s + 1e-12 * max(1.0, threshold_s):
            best = e
    if best is None:
        return 0.0, None
    return h.cumulative[h.edges.index(best)], best
