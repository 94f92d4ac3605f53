"""Evaluate the field specs over a ``SeriesStore`` the way Prometheus evaluates their PromQL.

Each function returns ``{slice: value}`` with PromQL's presence semantics: a slice is absent when
its series are (never an invented 0); a present value may still be NaN (0/0, an empty histogram),
which the snapshot turns into ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from inferslice.collectors.fields import (
    SHARED_SLICE,
    FirstOf,
    Gauge,
    GpuJoin,
    HistogramMean,
    Increase,
    Matchers,
    Quantile,
    RateSum,
    Spec,
    WanPath,
)
from inferslice.collectors.promfuncs import bucket_quantile, extrapolated_rate, parse_le
from inferslice.collectors.store import SeriesStore

Values = dict[str, float]

_AGG: dict[str, Callable[[Iterable[float]], float]] = {"sum": math.fsum, "max": max, "min": min}


class Evaluator:
    """One evaluation instant: ``now_s`` is PromQL's ``time=``, ``window_s`` the ``[W]`` of every rate."""

    def __init__(self, store: SeriesStore, now_s: float, window_s: float, lookback_s: float, slices: Iterable[str]) -> None:
        self.store = store
        self.now_s = now_s
        self.window_s = window_s
        self.lookback_s = lookback_s
        self.slices = frozenset(slices)

    def evaluate(self, spec: Spec) -> Values:
        if isinstance(spec, Quantile):
            return self.quantile(spec.q, spec.histogram)
        if isinstance(spec, HistogramMean):
            num = self.rate_sum(spec.histogram + "_sum")
            den = self.rate_sum(spec.histogram + "_count")
            return {s: _div(num[s], den[s]) for s in num.keys() & den.keys()}
        if isinstance(spec, RateSum):
            return {s: spec.scale * v for s, v in self.rate_sum(spec.counter, spec.matchers).items()}
        if isinstance(spec, Increase):
            # PromQL's increase() is rate() times the range: the same extrapolation.
            return {s: v * self.window_s for s, v in self.rate_sum(spec.counter).items()}
        if isinstance(spec, Gauge):
            out = self.gauge(spec.agg, spec.metrics, spec.matchers)
            if spec.at_most is not None:
                top = spec.at_most
                out = {s: min(v, top) for s, v in out.items()}  # PromQL clamp_max: NaN stays NaN
            return out
        if isinstance(spec, GpuJoin):
            return self.gpu_join(spec.utilization, spec.allocated)
        if isinstance(spec, WanPath):
            return self.wan_path(spec)
        return self.first_of(spec)

    # -- building blocks (each mirrors one PromQL construct) ---------------------------------

    def _rates(self, name: str, matchers: Matchers = ()) -> Iterable[tuple[str, dict[str, str], float]]:
        start = self.now_s - self.window_s
        for series in self.store.series(name):
            sl = series.label("slice")
            if sl not in self.slices or not series.matches(matchers):
                continue
            rate = extrapolated_rate(series.range(start, self.now_s), start, self.now_s)
            if rate is not None:
                yield sl, dict(series.labels), rate

    def rate_sum(self, name: str, matchers: Matchers = ()) -> Values:
        """``sum by (slice) (rate(name{matchers}[W]))``."""
        out: dict[str, list[float]] = {}
        for sl, _, rate in self._rates(name, matchers):
            out.setdefault(sl, []).append(rate)
        return {s: math.fsum(v) for s, v in out.items()}

    def quantile(self, q: float, histogram: str) -> Values:
        """``histogram_quantile(q, sum by (slice, le) (rate(<histogram>_bucket[W])))``."""
        per_slice: dict[str, dict[float, float]] = {}
        for sl, labels, rate in self._rates(histogram + "_bucket"):
            le = parse_le(labels.get("le", ""))
            if le is None:
                continue
            buckets = per_slice.setdefault(sl, {})
            buckets[le] = buckets.get(le, 0.0) + rate
        return {s: bucket_quantile(q, list(b.items())) for s, b in per_slice.items()}

    def _instant(self, names: Iterable[str], matchers: Matchers = ()) -> Iterable[tuple[dict[str, str], float]]:
        for name in names:
            for series in self.store.series(name):
                if not series.matches(matchers):
                    continue
                value = series.instant(self.now_s, self.lookback_s)
                if value is not None:
                    yield dict(series.labels), value

    def gauge(self, agg: str, names: Iterable[str], matchers: Matchers = ()) -> Values:
        """``agg by (slice) ({__name__=~"names"}{matchers})``."""
        groups: dict[str, list[float]] = {}
        for labels, value in self._instant(names, matchers):
            sl = labels.get("slice")
            if sl in self.slices:
                groups.setdefault(sl, []).append(value)
        return {s: _AGG[agg](v) for s, v in groups.items()}

    def gpu_join(self, utilization: str, allocated: str) -> Values:
        """Mean of ``max by (pop, gpu) (utilization)`` over the ``(pop, gpu)`` with a positive allocation to the slice."""
        util: dict[tuple[str, str], float] = {}
        for labels, value in self._instant((utilization,)):
            key = (labels.get("pop", ""), labels.get("gpu", ""))
            util[key] = max(util.get(key, -math.inf), value)
        hosts: dict[str, set[tuple[str, str]]] = {}
        for labels, value in self._instant((allocated,)):
            sl = labels.get("slice")
            if sl in self.slices and value > 0:
                hosts.setdefault(sl, set()).add((labels.get("pop", ""), labels.get("gpu", "")))
        out: Values = {}
        for sl, gpus in hosts.items():
            vals = [util[g] for g in gpus if g in util]
            if vals:
                out[sl] = math.fsum(vals) / len(vals)
        return out

    def _any_rates(self, name: str, matchers: Matchers = ()) -> Iterable[tuple[dict[str, str], float]]:
        """``rate(name{matchers}[W])`` of every series, whatever its slice."""
        start = self.now_s - self.window_s
        for series in self.store.series(name):
            if series.matches(matchers):
                rate = extrapolated_rate(series.range(start, self.now_s), start, self.now_s)
                if rate is not None:
                    yield dict(series.labels), rate

    def wan_path(self, spec: WanPath) -> Values:
        """The joins of ``fields.render_wan``: per (slice, link) values, then each slice's top-ranked link's."""
        shared = (("slice", SHARED_SLICE),)
        rx = {(lb.get("pop", ""), lb.get("link", "")): 8.0 * r for lb, r in self._any_rates(spec.receive_bytes, shared)}
        cap = {(lb.get("pop", ""), lb.get("link", "")): v for lb, v in self._instant((spec.capacity,), shared)}
        sums = {(lb.get("pop", ""), lb.get("peer_pop", "")): r for lb, r in self._any_rates(spec.rtt + "_sum")}
        counts = {(lb.get("pop", ""), lb.get("peer_pop", "")): r for lb, r in self._any_rates(spec.rtt + "_count")}
        best: dict[str, tuple[float, float]] = {}  # slice -> (rank, value)
        for labels, declared in self._instant((spec.path,)):
            sl = labels.get("slice")
            if sl not in self.slices:
                continue
            link, probe = (labels.get("pop", ""), labels.get("link", "")), (labels.get("pop", ""), labels.get("peer_pop", ""))
            rtt = _div(sums[probe], counts[probe]) if probe in sums and probe in counts else None
            got: dict[str, float | None] = {"rx_bps": rx.get(link), "capacity_bps": cap.get(link), "rtt_s": rtt, "base_rtt_s": declared}
            r_rx, r_cap = got["rx_bps"], got["capacity_bps"]
            if spec.rank == "utilization":
                rank = _div(r_rx, r_cap) if r_rx is not None and r_cap is not None else None
            else:
                rank = rtt - declared if rtt is not None else None
            value = got[spec.value]
            if rank is None or math.isnan(rank) or value is None:
                continue
            if sl not in best or rank > best[sl][0]:
                best[sl] = (rank, value)
        return {sl: v for sl, (_, v) in best.items()}

    def first_of(self, spec: FirstOf) -> Values:
        out: Values = {}
        for option in spec.options:
            for s, v in self.evaluate(option).items():
                out.setdefault(s, v)
        return out


def _div(a: float, b: float) -> float:
    """IEEE division as PromQL does it: x/0 is +-Inf, 0/0 is NaN."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a)
    return a / b
