"""The snapshot fields as Prometheus recording rules: a diagnosis round is three instant queries.

``render_promql`` asks one query per field over every slice (a 1,000-alternative ``slice=~``
matcher each, 21 of them: 483,500 samples and 190 KiB of PromQL a round at 1,000 slices). Here the
same field table (``fields.field_specs``) is compiled into *terms*, each a recording rule evaluated
by Prometheus on its own schedule over every slice at once, grouped by ``(slice, pop)``; a round
reads the recorded samples back with one query per combining family, whatever the slice count:

- ``slice_pop:inferslice_snapshot:sum_w8s{term}``: per-PoP parts that add up across PoPs (counter
  rates, a histogram's ``_sum`` and ``_count`` rates, gauges summed, the GPU join's sum and count);
- ``slice_pop:inferslice_snapshot:max_w8s{term}``: per-PoP quantiles and gauges kept by ``max``;
- ``slice_pop:inferslice_snapshot:min_w8s{term}``: gauges kept by ``min``.

``w8s`` is the window the rates and quantiles cover (the loop's ``window_s``); the rule group runs
every ``interval_s`` (the loop's interval), so a round reads what the last evaluation recorded.

Why ``(slice, pop)`` and not ``slice``: with telemetry sharded by PoP (Prometheus Operator's
``spec.shards``, hashed on the PoP) a shard sees only its PoPs, so it can only record per-PoP
parts; the round combines them. Sums combine exactly (a rate over the fleet is the sum of the
PoPs'), so do ``max``/``min`` gauges and the means (sum of ``_sum`` over sum of ``_count``). A
quantile does not: for a slice spread over PoPs the round takes the highest PoP's, which bounds the
slice's own from above (a mixture's quantile lies between its components'); for a slice inside one
PoP, the synthetic fleet's and the usual case, it is exact. The PromQL semantics (``rate``'s
extrapolation, ``histogram_quantile``'s interpolation) are Prometheus's own: the query layer only
stores and returns samples, so VictoriaMetrics and Prometheus answer a round alike.

Two kinds of term are not per (slice, pop): ``Increase`` is (a sum, exact), and a ``WanPath`` (the
value of the top-ranked WAN link on the slice's path, whose links lie at several PoPs) is recorded per
slice with no ``pop`` label: exact while the path is inside one shard, the highest shard's value if
not; a PoP group's round reads these terms too (its matcher admits an empty ``pop``).

Term ids are derived from the spec (``quantile:0.99:<histogram>``, ``rate:<counter>{matchers}``),
not from the field, so one rule file serves both perspectives and every ``FieldSettings`` whose
terms it records (the generator records the engine and the client perspective for the default
link); a scale factor or an ``at_most`` clamp is applied when the round assembles the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from inferslice.collectors.fields import (
    FieldSettings,
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
    field_specs,
    render_wan,
)
from inferslice.common.promtime import format_duration

Combine = Literal["sum", "max", "min"]
FAMILIES: tuple[Combine, ...] = ("sum", "max", "min")
TERM_LABEL = "term"
GROUP_NAME = "inferslice-snapshot"
DEFAULT_WINDOW_SCRAPES = 4  # the loop's window in scrapes (8 s at the testbed's 2 s: enough samples for a P99)
_BY = "slice, pop"
# No ``slice!=""`` matcher: Prometheus resolves it by merging the postings of every slice value (all
# 146,000 series at 1,000 slices, for each of 30 rules); series without a slice label only add a
# (slice="", pop) row per rule, which a round ignores.


def family_name(combine: Combine, window_s: float) -> str:
    """The recorded metric of one combining family for windows of ``window_s``."""
    return f"slice_pop:inferslice_snapshot:{combine}_w{format_duration(window_s)}"


@dataclass(frozen=True)
class Term:
    """One recorded series per (slice, pop): ``expr`` is evaluated by Prometheus, ``combine`` joins PoPs.

    ``helpers``: (record, expr) rules the expression reads, recorded first in the same group (a
    histogram's per-(slice, pop, le) bucket rates, shared by its P50 and P99: one rate over the raw
    buckets per histogram, not one per quantile). The shards keep them; only the terms are written on."""

    id: str
    combine: Combine
    expr: str
    helpers: tuple[tuple[str, str], ...] = ()


def _matchers(matchers: Matchers) -> str:
    return "".join(f",{k}={_quote(v)}" for k, v in matchers)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _key(matchers: Matchers) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in matchers) + "}" if matchers else ""


def _selector(metric: str, matchers: Matchers = ()) -> str:
    inner = ",".join(f"{k}={_quote(v)}" for k, v in matchers)
    return f"{metric}{{{inner}}}" if inner else metric


def _rate(metric: str, w: str, matchers: Matchers = ()) -> Term:
    return Term(f"rate:{metric}{_key(matchers)}", "sum", f"sum by ({_BY}) (rate({_selector(metric, matchers)}[{w}]))")


def bucket_rates_name(histogram: str, window_s: float) -> str:
    return f"slice_pop_le:{histogram}_bucket:rate_w{format_duration(window_s)}"


def terms_of(spec: Spec, window_s: float) -> list[Term]:
    """The recorded terms a spec is assembled from (``value_of`` is the assembly)."""
    w = format_duration(window_s)
    if isinstance(spec, Quantile):
        helper = (bucket_rates_name(spec.histogram, window_s), f"sum by ({_BY}, le) (rate({spec.histogram}_bucket[{w}]))")
        return [Term(f"quantile:{spec.q:g}:{spec.histogram}", "max", f"histogram_quantile({spec.q:g}, {helper[0]})", (helper,))]
    if isinstance(spec, HistogramMean):
        return [_rate(spec.histogram + "_sum", w), _rate(spec.histogram + "_count", w)]
    if isinstance(spec, RateSum):
        return [_rate(spec.counter, w, spec.matchers)]
    if isinstance(spec, Increase):
        return [Term(f"increase:{spec.counter}", "sum", f"sum by ({_BY}) (increase({spec.counter}[{w}]))")]
    if isinstance(spec, WanPath):
        # A path's links lie at several PoPs and the value is the top-ranked link's: recorded per slice
        # (pop=""), not per (slice, pop). Exact while a slice's path is inside one Prometheus shard;
        # across shards the round keeps the highest shard's value (see module doc).
        return [Term(f"wan:{spec.value}:{spec.rank}:{spec.path}", "max", render_wan(spec, "", window_s))]
    if isinstance(spec, Gauge):
        if len(spec.metrics) == 1:
            vec = _selector(spec.metrics[0], spec.matchers)
        else:
            vec = f"{{__name__=~{_quote('|'.join(spec.metrics))}{_matchers(spec.matchers)}}}"
        return [Term(f"{spec.agg}:{'|'.join(spec.metrics)}{_key(spec.matchers)}", spec.agg, f"{spec.agg} by ({_BY}) ({vec})")]
    if isinstance(spec, GpuJoin):
        hosts = f"count by (slice, pop, gpu) ({spec.allocated} > 0) * 0 + 1"
        joined = f"({hosts}) * on (pop, gpu) group_left () max by (pop, gpu) ({spec.utilization})"
        base = f"{spec.utilization}/{spec.allocated}"
        return [
            Term(f"gpu_sum:{base}", "sum", f"sum by ({_BY}) ({joined})"),
            Term(f"gpu_count:{base}", "sum", f"count by ({_BY}) ({joined})"),
        ]
    out: list[Term] = []
    for option in spec.options:
        out += terms_of(option, window_s)
    return out


def value_of(spec: Spec, window_s: float, terms: Mapping[str, float]) -> float | None:
    """The field's value from its slice's combined terms (``None`` where a term is missing or NaN)."""

    def get(term: Term) -> float | None:
        v = terms.get(term.id)
        return None if v is None or math.isnan(v) else v

    found = terms_of(spec, window_s)
    if isinstance(spec, (HistogramMean, GpuJoin)):
        total, count = get(found[0]), get(found[1])
        if total is None or count is None or count == 0:
            return None
        return total / count
    if isinstance(spec, RateSum):
        v = get(found[0])
        return None if v is None else spec.scale * v
    if isinstance(spec, Gauge):
        v = get(found[0])
        if v is None or spec.at_most is None:
            return v
        return min(v, spec.at_most)
    if isinstance(spec, (Quantile, Increase, WanPath)):
        return get(found[0])
    for option in spec.options if isinstance(spec, FirstOf) else ():
        v = value_of(option, window_s, terms)
        if v is not None:
            return v
    return None


def assembler(spec: Spec, window_s: float) -> Callable[[Mapping[str, float]], float | None]:
    """``value_of`` for one spec with its term ids worked out once (a round assembles 21 fields x
    every slice: building the terms' strings per call was most of a 1,000-slice round's read)."""
    if isinstance(spec, FirstOf):
        options = [assembler(o, window_s) for o in spec.options]

        def first(terms: Mapping[str, float]) -> float | None:
            for option in options:
                v = option(terms)
                if v is not None:
                    return v
            return None

        return first
    ids = [t.id for t in terms_of(spec, window_s)]

    def get(terms: Mapping[str, float], i: int) -> float | None:
        v = terms.get(ids[i])
        return None if v is None or v != v else v  # v != v: NaN

    if isinstance(spec, (HistogramMean, GpuJoin)):

        def ratio(terms: Mapping[str, float]) -> float | None:
            total, count = get(terms, 0), get(terms, 1)
            return None if total is None or not count else total / count

        return ratio
    if isinstance(spec, RateSum):
        scale = spec.scale

        def scaled(terms: Mapping[str, float]) -> float | None:
            v = get(terms, 0)
            return None if v is None else scale * v

        return scaled
    if isinstance(spec, Gauge) and spec.at_most is not None:
        top = spec.at_most

        def clamped(terms: Mapping[str, float]) -> float | None:
            v = get(terms, 0)
            return v if v is None else min(v, top)

        return clamped
    return lambda terms: get(terms, 0)


def snapshot_terms(window_s: float, settings: Iterable[FieldSettings] | None = None) -> list[Term]:
    """Every term the fields need, once, for each ``FieldSettings`` given (default: both perspectives)."""
    chosen = list(settings) if settings is not None else [FieldSettings(perspective="engine"), FieldSettings(perspective="client")]
    seen: dict[str, Term] = {}
    for fs in chosen:
        for spec in field_specs(fs).values():
            for term in terms_of(spec, window_s):
                seen.setdefault(term.id, term)
    return list(seen.values())


def snapshot_rule_group(window_s: float, interval_s: float, settings: Iterable[FieldSettings] | None = None) -> dict[str, Any]:
    """The rule group recording every term, evaluated every ``interval_s``."""
    terms = snapshot_terms(window_s, settings)
    helpers = {name: expr for t in terms for name, expr in t.helpers}
    rules: list[dict[str, Any]] = [{"record": name, "expr": expr} for name, expr in helpers.items()]
    rules += [{"record": family_name(t.combine, window_s), "expr": t.expr, "labels": {TERM_LABEL: t.id}} for t in terms]
    return {"name": GROUP_NAME, "interval": format_duration(interval_s), "rules": rules}


def combine(samples: Iterable[tuple[Combine, str, str, float]]) -> dict[str, dict[str, float]]:
    """(family, slice, term, value) of every recorded (slice, pop) sample -> slice -> term -> value, PoPs joined.

    NaN parts (a quantile over no observations) are skipped: a PoP with no traffic says nothing."""
    out: dict[str, dict[str, float]] = {}
    for fam, sl, term, value in samples:
        if math.isnan(value):
            continue
        per = out.setdefault(sl, {})
        old = per.get(term)
        if old is None:
            per[term] = value
        elif fam == "sum":
            per[term] = old + value
        elif fam == "max":
            per[term] = max(old, value)
        else:
            per[term] = min(old, value)
    return out


# One sample of a recorded family as Prometheus (and VictoriaMetrics) write it: labels sorted by name,
# so ``term`` directly follows ``slice`` (no other family label sorts between or after them), then the
# value as a string ("1.5", "NaN", "+Inf").
_SAMPLE = re.compile(r'"slice":"([^"]*)","' + TERM_LABEL + r'":"([^"]*)"\},"value":\[[^,\]]*,"([^"]*)"\]')
_SUCCESS_VECTOR = re.compile(r'^\{"status":"success",(?:"isPartial":false,)?"data":\{"resultType":"vector","result":\[')


def scan_vector(body: bytes) -> list[tuple[str, str, float]] | None:
    """(slice, term, value) of every sample of a recorded family's instant-query answer, read from
    the text, or ``None`` where the answer is not plainly a successful vector in the expected
    layout (the caller then decodes it in full). Samples without a slice (the ``slice=""`` rows a
    rule over series without one leaves) are skipped, as the full decode skips them. Every sample
    that has a slice label must be matched, else ``None``: a layout this does not know is never
    read as fewer samples. Any JSON escape in the answer also means ``None`` (the scan does not
    unescape)."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return None
    if "\\" in text or _SUCCESS_VECTOR.match(text) is None:
        return None
    found = _SAMPLE.findall(text)
    if len(found) != text.count('"slice":"'):
        return None
    try:
        return [(sl, term, float(v)) for sl, term, v in found if sl and term]
    except ValueError:
        return None
