"""What each ``SliceSnapshot`` field is, once, as data: both sources interpret this table.

``PrometheusSource`` renders each spec to one PromQL query batched over every slice
(``... by (slice)``); ``EmbeddedSource`` evaluates the same spec over its own ring buffers with the
same semantics (``promfuncs``). Keeping the definitions in one table is what makes the two sources
produce the same fields from the same metrics.

Choices worth knowing (the PromQL of each field is in ``render_promql``):

- ``link_cap_bps``: the smallest ``receive`` cap among the slice's series on the configured link
  (the one ``link_rx_bps`` is measured on). No series, or a cap at or above the nominal link speed,
  means uncapped and is reported as ``None`` (there is no cap to be near).
- ``requests_waiting``: engine-waiting plus router-held (``inferslice_serve_queued_requests``): Ray
  Serve holds excess requests back at the router, so in the paper's setting those are the queue.
  Where only one of the two is exported, it alone is reported.
- ``request_rate``: the SLO request counter, or the TTFT histogram's ``_count`` where that is absent.
- ``gpu_utilization``: the mean utilisation of the distinct GPUs that host the slice (those with a
  positive ``inferslice_gpu_allocated_fraction`` for it), joined on ``(pop, gpu)``.
- Quantiles follow Prometheus: no observations in the window -> ``None``; a rank in the ``+Inf``
  bucket yields the highest finite bucket bound (a lower bound, still a breach signal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from inferslice import metric_names as m
from inferslice.common.promtime import format_duration

Matchers = tuple[tuple[str, str], ...]
Agg = Literal["sum", "max", "min"]
Perspective = Literal["engine", "client"]


@dataclass(frozen=True)
class Quantile:
    """``histogram_quantile(q, sum by (slice, le) (rate(<histogram>_bucket[W])))``."""

    q: float
    histogram: str


@dataclass(frozen=True)
class HistogramMean:
    """``rate(_sum) / rate(_count)``: the mean observation over the window."""

    histogram: str


@dataclass(frozen=True)
class RateSum:
    """``scale * sum by (slice) (rate(counter{matchers}[W]))``."""

    counter: str
    matchers: Matchers = ()
    scale: float = 1.0


@dataclass(frozen=True)
class Gauge:
    """``agg by (slice) (metric{matchers})`` over one or several metric names, optionally ``< below``."""

    agg: Agg
    metrics: tuple[str, ...]
    matchers: Matchers = ()
    below: float | None = None


@dataclass(frozen=True)
class GpuJoin:
    """Mean utilisation over the GPUs hosting the slice, via the allocation series' ``(pop, gpu)``."""

    utilization: str
    allocated: str


@dataclass(frozen=True)
class FirstOf:
    """PromQL ``or``: the first option that yields a value for a slice."""

    options: tuple[Spec, ...]


@dataclass(frozen=True)
class WanJoin:
    """The slowest WAN path to the gateway among the PoPs hosting the slice's replicas: per PoP, the
    median RTT its prober measures to the gateway minus the configured RTT; 0 for replicas at the
    gateway, clamped at 0 (a path a hair faster than configured is as configured)."""

    rtt: str  # the prober's histogram, labels pop (the prober's PoP) and peer_pop
    hosts: str  # a per-replica series with slice and pop labels: where the slice's replicas serve
    gateway: str
    configured_s: tuple[tuple[str, float], ...]  # (PoP, configured RTT to the gateway) for every PoP with a WAN path


Spec = Quantile | HistogramMean | RateSum | Gauge | GpuJoin | WanJoin | FirstOf


@dataclass(frozen=True)
class FieldSettings:
    """Which series stand for a slice's latency and link; one instance configures both sources."""

    link_name: str = "client-edge"  # the testbed registry's client edge: where the response stream is measured
    nominal_link_bps: float = 10e9  # brief: 10 Gbps NICs; a cap at or above it binds nothing
    perspective: Perspective = "engine"  # engine histograms exist on every replica; client ones need the load generator
    # The WAN paths to the gateway (``wan_rtt_excess_s``): the gateway PoP and each other PoP's configured RTT to it.
    # None: no such field (a deployment without a topology's WAN, or without the prober).
    gateway: str | None = None
    wan_rtt_s: tuple[tuple[str, float], ...] = ()


def field_specs(settings: FieldSettings) -> dict[str, Spec]:
    """Every metric-derived field of ``SliceSnapshot`` (SLOs come from the tiers file first)."""
    if settings.perspective == "client":
        ttft, tpot = m.CLIENT_TTFT, m.CLIENT_TPOT
    else:
        ttft, tpot = m.ENGINE_TTFT, m.ENGINE_TPOT
    link: Matchers = (("link", settings.link_name),)
    wan: dict[str, Spec] = {}
    if settings.gateway is not None and settings.wan_rtt_s:
        wan["wan_rtt_excess_s"] = WanJoin(m.POP_RTT, m.REPLICA_GPU_SHARE, settings.gateway, settings.wan_rtt_s)
    return {
        **wan,
        "ttft_p50_s": Quantile(0.5, ttft),
        "ttft_p99_s": Quantile(0.99, ttft),
        "ttft_mean_s": HistogramMean(ttft),
        "tpot_p50_s": Quantile(0.5, tpot),
        "tpot_p99_s": Quantile(0.99, tpot),
        "tpot_mean_s": HistogramMean(tpot),
        "output_tokens_per_s": RateSum(m.ENGINE_GENERATION_TOKENS),
        "request_rate": FirstOf((RateSum(m.SLO_TTFT_REQUESTS), RateSum(ttft + "_count"))),
        "link_rx_bps": RateSum(m.LINK_RECEIVE_BYTES, link, scale=8.0),
        "link_tx_bps": RateSum(m.LINK_TRANSMIT_BYTES, link, scale=8.0),
        "link_cap_bps": Gauge("min", (m.LINK_CAP_BPS,), (*link, ("direction", "receive")), below=settings.nominal_link_bps),
        "requests_waiting": Gauge("sum", (m.ENGINE_WAITING, m.SERVE_QUEUED)),
        "requests_running": Gauge("sum", (m.ENGINE_RUNNING,)),
        "queue_time_p99_s": Quantile(0.99, m.ENGINE_QUEUE_TIME),
        # max, not sum: the same per-slice gauge may come from more than one exporter instance
        "replicas": Gauge("max", (m.SLICE_REPLICAS,)),
        "replicas_max": Gauge("max", (m.SLICE_REPLICAS_MAX,)),
        "gpu_utilization": GpuJoin(m.GPU_UTILIZATION, m.GPU_ALLOCATED_FRACTION),
        "gpu_share": Gauge("min", (m.REPLICA_GPU_SHARE,)),
        "kv_cache_usage": Gauge("max", (m.ENGINE_KV_CACHE_USAGE,), (("stat", "max"),)),
        "preemptions_per_s": RateSum(m.ENGINE_PREEMPTIONS),
        "slo_ttft_p99_s": Gauge("max", (m.SLO_TTFT_THRESHOLD,)),
    }


# -- PromQL rendering --------------------------------------------------------------------------


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def slice_matcher(slices: tuple[str, ...]) -> str:
    """``slice="a"`` or ``slice=~"a|b"``; slice names are tier names (``[a-z][a-z0-9-]*``), no regex escaping needed."""
    if len(slices) == 1:
        return f"slice={_quote(slices[0])}"
    return f"slice=~{_quote('|'.join(slices))}"


def _selector(metric: str, slice_sel: str, matchers: Matchers = ()) -> str:
    parts = [slice_sel, *(f"{k}={_quote(v)}" for k, v in matchers)]
    return f"{metric}{{{','.join(parts)}}}"


def render_promql(spec: Spec, slices: tuple[str, ...], window_s: float) -> str:
    """One instant query yielding one sample per slice (label ``slice``) for this spec."""
    sel = slice_matcher(slices)
    w = format_duration(window_s)
    if isinstance(spec, Quantile):
        return f"histogram_quantile({spec.q:g}, sum by (slice, le) (rate({_selector(spec.histogram + '_bucket', sel)}[{w}])))"
    if isinstance(spec, HistogramMean):
        return (
            f"sum by (slice) (rate({_selector(spec.histogram + '_sum', sel)}[{w}]))"
            f" / sum by (slice) (rate({_selector(spec.histogram + '_count', sel)}[{w}]))"
        )
    if isinstance(spec, RateSum):
        expr = f"sum by (slice) (rate({_selector(spec.counter, sel, spec.matchers)}[{w}]))"
        return expr if spec.scale == 1.0 else f"{spec.scale:g} * {expr}"
    if isinstance(spec, Gauge):
        if len(spec.metrics) == 1:
            vec = _selector(spec.metrics[0], sel, spec.matchers)
        else:
            names = "|".join(spec.metrics)
            vec = _selector("", f"__name__=~{_quote(names)},{sel}", spec.matchers)
        expr = f"{spec.agg} by (slice) ({vec})"
        return expr if spec.below is None else f"{expr} < {float(spec.below)!r}"
    if isinstance(spec, GpuJoin):
        hosts = f"count by (slice, pop, gpu) ({_selector(spec.allocated, sel)} > 0) * 0 + 1"
        return f"avg by (slice) (({hosts}) * on (pop, gpu) group_left () max by (pop, gpu) ({spec.utilization}))"
    if isinstance(spec, WanJoin):
        return render_wan(spec, sel, w)
    # FirstOf
    return " or ".join(f"({render_promql(o, slices, window_s)})" for o in spec.options)


def render_wan(spec: WanJoin, slice_sel: str, w: str) -> str:
    """``max by (slice)`` over the slice's replica PoPs of max(0, median RTT to the gateway - configured)."""
    median = f"histogram_quantile(0.5, sum by (pop, le) (rate({spec.rtt}_bucket{{peer_pop={_quote(spec.gateway)}}}[{w}])))"
    configured = " or ".join(f'label_replace(vector({rtt!r}), "pop", {_quote(pop)}, "", "")' for pop, rtt in spec.configured_s)
    excess = f"clamp_min({median} - on (pop) ({configured}), 0)"
    hosts = f"count by (slice, pop) ({_selector(spec.hosts, slice_sel)}) * 0"
    # PoPs with a measured path add their excess; the rest (the gateway, an unprobed PoP) count as 0.
    return f"max by (slice) (({hosts} + on (pop) group_left () {excess}) or {hosts})"
