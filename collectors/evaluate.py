"""Evaluate the field specs over a ``SeriesStore`` the way Prometheus evaluates their PromQL.

Each function returns ``{slice: value}`` with PromQL's presence semantics: a slice is absent when
its series are (never an invented 0); a present value may still be NaN (0/0, an empty histogram),
which the snapshot turns into ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from inferslice.collectors.fields import FirstOf, Gauge, GpuJoin, HistogramMean, Matchers, Quantile, RateSum, Spec, WanJoin
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
        if isinstance(spec, Gauge):
            out = self.gauge(spec.agg, spec.metrics, spec.matchers)
            if spec.below is not None:
                out = {s: v for s, v in out.items() if v < spec.below}
            return out
        if isinstance(spec, GpuJoin):
            return self.gpu_join(spec.utilization, spec.allocated)
        if isinstance(spec, WanJoin):
            return self.wan_join(spec)
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

    def wan_join(self, spec: WanJoin) -> Values:
        """``render_wan``'s PromQL: per PoP the median of the prober's rates toward the gateway minus the
        configured RTT (clamped at 0), the max over the PoPs hosting the slice, 0 where none is measured."""
        start = self.now_s - self.window_s
        per_pop: dict[str, dict[float, float]] = {}
        for series in self.store.series(spec.rtt + "_bucket"):
            if series.label("peer_pop") != spec.gateway:
                continue
            le = parse_le(series.label("le") or "")
            rate = extrapolated_rate(series.range(start, self.now_s), start, self.now_s)
            if le is None or rate is None:
                continue
            pop = series.label("pop") or ""
            buckets = per_pop.setdefault(pop, {})
            buckets[le] = buckets.get(le, 0.0) + rate
        configured = dict(spec.configured_s)
        excess: dict[str, float] = {}
        for pop, b in per_pop.items():
            if pop in configured:
                median = bucket_quantile(0.5, list(b.items()))  # NaN without observations, as Prometheus gives
                excess[pop] = median if math.isnan(median) else max(median - configured[pop], 0.0)
        hosts: dict[str, set[str]] = {}
        for labels, _ in self._instant((spec.hosts,)):
            sl = labels.get("slice")
            if sl in self.slices:
                hosts.setdefault(sl, set()).add(labels.get("pop", ""))
        out: Values = {}
        for sl, pops in hosts.items():
            vals = [excess.get(pop, 0.0) for pop in pops]
            known = [v for v in vals if not math.isnan(v)]
            out[sl] = max(known) if known else math.nan  # PromQL's max skips NaN unless nothing else is there
        return out

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
