"""What each ``SliceSnapshot`` field is, once, as data: both sources interpret this table.

``PrometheusSource`` renders each spec to one PromQL query batched over every slice
(``... by (slice)``); ``EmbeddedSource`` evaluates the same spec over its own ring buffers with the
same semantics (``promfuncs``). Keeping the definitions in one table is what makes the two sources
produce the same fields from the same metrics.

Choices worth knowing (the PromQL of each field is in ``render_promql``):

- ``link_cap_bps``: the smallest ``receive`` cap among the slice's series on the configured link
  (the one ``link_rx_bps`` is measured on), clamped to the nominal link speed
  (``FieldSettings.nominal_link_bps``): an uncapped class (HTB ceil at the line rate) reads as a cap
  equal to ``link_capacity_bps``, which the classifier takes as "no cap" explicitly. No series
  reports ``None``: the cap is unknown, not absent.
- ``requests_waiting``: engine-waiting plus router-held (``inferslice_serve_queued_requests``): Ray
  Serve holds excess requests back at the router, so in the paper's setting those are the queue.
  Where only one of the two is exported, it alone is reported.
- ``request_rate``: the SLO request counter, or the TTFT histogram's ``_count`` where that is absent.
- ``request_count`` / ``tpot_request_count``: ``increase`` of the TTFT / TPOT histogram's ``_count``
  over the window: the number of requests the window's quantiles rest on (Prometheus extrapolates
  ``increase`` to the window's edges, so it need not be an integer).
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
SHARED_SLICE = "shared"  # the slice label of a link every tier crosses (the network exporter's)
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
class Increase:
    """``sum by (slice) (increase(counter[W]))``: the counter's growth over the window."""

    counter: str


@dataclass(frozen=True)
class Gauge:
    """``agg by (slice) (metric{matchers})`` over one or several metric names, optionally clamped to
    ``at_most`` (``clamp_max``)."""

    agg: Agg
    metrics: tuple[str, ...]
    matchers: Matchers = ()
    at_most: float | None = None


@dataclass(frozen=True)
class GpuJoin:
    """Mean utilisation over the GPUs hosting the slice, via the allocation series' ``(pop, gpu)``."""

    utilization: str
    allocated: str


WanValue = Literal["rx_bps", "capacity_bps", "rtt_s", "base_rtt_s"]
WanRank = Literal["utilization", "rtt_excess"]


@dataclass(frozen=True)
class WanPath:
    """A value of one WAN link on the slice's path to the gateway: the link ranked first by ``rank``.

    The path series (``inferslice_slice_wan_path_rtt_seconds{slice,pop,peer_pop,link}``, valued at the
    link's declared RTT) join the shared link counters and capacity on ``(pop, link)`` and the PoP
    probes on ``(pop, peer_pop)``: per (slice, link) ``rx_bps`` (delivered toward the gateway),
    ``capacity_bps``, ``rtt_s`` (mean probe RTT over the window), ``base_rtt_s`` (declared);
    ``utilization`` = rx / capacity, ``rtt_excess`` = rtt - declared."""

    value: WanValue
    rank: WanRank
    path: str = m.SLICE_WAN_PATH_RTT
    receive_bytes: str = m.LINK_RECEIVE_BYTES
    capacity: str = m.LINK_CAPACITY_BPS
    rtt: str = m.POP_RTT


@dataclass(frozen=True)
class FirstOf:
    """PromQL ``or``: the first option that yields a value for a slice."""

    options: tuple[Spec, ...]


Spec = Quantile | HistogramMean | RateSum | Increase | Gauge | GpuJoin | WanPath | FirstOf


@dataclass(frozen=True)
class FieldSettings:
    """Which series stand for a slice's latency and link; one instance configures both sources."""

    link_name: str = "client-edge"  # the testbed registry's client edge: where the response stream is measured
    nominal_link_bps: float = 10e9  # brief: 10 Gbps NICs; a cap at or above it binds nothing
    perspective: Perspective = "engine"  # engine histograms exist on every replica; client ones need the load generator


def field_specs(settings: FieldSettings) -> dict[str, Spec]:
    """Every metric-derived field of ``SliceSnapshot`` (SLOs come from the tiers file first)."""
    if settings.perspective == "client":
        ttft, tpot = m.CLIENT_TTFT, m.CLIENT_TPOT
    else:
        ttft, tpot = m.ENGINE_TTFT, m.ENGINE_TPOT
    link: Matchers = (("link", settings.link_name),)
    return {
        "ttft_p50_s": Quantile(0.5, ttft),
        "ttft_p99_s": Quantile(0.99, ttft),
        "ttft_mean_s": HistogramMean(ttft),
        "tpot_p50_s": Quantile(0.5, tpot),
        "tpot_p99_s": Quantile(0.99, tpot),
        "tpot_mean_s": HistogramMean(tpot),
        "output_tokens_per_s": RateSum(m.ENGINE_GENERATION_TOKENS),
        "request_rate": FirstOf((RateSum(m.SLO_TTFT_REQUESTS), RateSum(ttft + "_count"))),
        "request_count": Increase(ttft + "_count"),
        "tpot_request_count": Increase(tpot + "_count"),
        "link_rx_bps": RateSum(m.LINK_RECEIVE_BYTES, link, scale=8.0),
        "link_tx_bps": RateSum(m.LINK_TRANSMIT_BYTES, link, scale=8.0),
        # Clamped, not dropped, at the physical rate: an uncapped edge (HTB ceil at the line rate)
        # is reported as a cap equal to ``link_capacity_bps``, so the classifier can tell "no cap"
        # from "no cap gauge" (which a cap it did not see could hide behind).
        "link_cap_bps": Gauge("min", (m.LINK_CAP_BPS,), (*link, ("direction", "receive")), at_most=settings.nominal_link_bps),
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
        "wan_rx_bps": WanPath("rx_bps", "utilization"),
        "wan_capacity_bps": WanPath("capacity_bps", "utilization"),
        "wan_rtt_s": WanPath("rtt_s", "rtt_excess"),
        "wan_base_rtt_s": WanPath("base_rtt_s", "rtt_excess"),
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
    if isinstance(spec, Increase):
        return f"sum by (slice) (increase({_selector(spec.counter, sel)}[{w}]))"
    if isinstance(spec, Gauge):
        if len(spec.metrics) == 1:
            vec = _selector(spec.metrics[0], sel, spec.matchers)
        else:
            names = "|".join(spec.metrics)
            vec = _selector("", f"__name__=~{_quote(names)},{sel}", spec.matchers)
        expr = f"{spec.agg} by (slice) ({vec})"
        return expr if spec.at_most is None else f"clamp_max({expr}, {float(spec.at_most)!r})"
    if isinstance(spec, GpuJoin):
        hosts = f"count by (slice, pop, gpu) ({_selector(spec.allocated, sel)} > 0) * 0 + 1"
        return f"avg by (slice) (({hosts}) * on (pop, gpu) group_left () max by (pop, gpu) ({spec.utilization}))"
    if isinstance(spec, WanPath):
        return render_wan(spec, slice_matcher(slices), window_s)
    # FirstOf
    return " or ".join(f"({render_promql(o, slices, window_s)})" for o in spec.options)


def render_wan(spec: WanPath, slice_sel: str, window_s: float) -> str:
    """Per (slice, pop, peer_pop, link) series joined onto the path, then the value of each slice's top-ranked link
    (``slice_sel``: the slices' matcher, "" for every slice: the recording rule's form)."""
    w = format_duration(window_s)
    shared = f'{{slice="{SHARED_SLICE}"}}'
    path = _selector(spec.path, slice_sel)
    one = f"({path} * 0 + 1)"
    onto = "* on (pop, link) group_right ()"
    rx = f"(8 * rate({spec.receive_bytes}{shared}[{w}]) {onto} {one})"
    cap = f"({spec.capacity}{shared} {onto} {one})"
    rtt = f"((rate({spec.rtt}_sum[{w}]) / rate({spec.rtt}_count[{w}])) * on (pop, peer_pop) group_right () {one})"
    values = {"rx_bps": rx, "capacity_bps": cap, "rtt_s": rtt, "base_rtt_s": f"({path} * 1)"}
    rank = f"({rx} / {cap})" if spec.rank == "utilization" else f"({rtt} - {path})"
    return f"max by (slice) ({values[spec.value]} * (topk by (slice) (1, {rank}) * 0 + 1))"
