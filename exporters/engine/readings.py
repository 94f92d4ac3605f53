"""What one vLLM replica (or one Ray Serve front) says, read out of a parsed exposition.

Pure functions, no I/O. They accept every spelling a deployment may emit: the V1 names, the
renamed/removed ones older engines still emit (``vllm:gpu_cache_usage_perc``,
``vllm:gpu_prefix_cache_*``, ``vllm:time_per_output_token_seconds``), and the Ray-wrapped
``ray_vllm_*`` names (``:`` became ``_``, a ``ReplicaId`` label was added), with or without the
``_total`` suffix on counters. An engine with several data-parallel ``engine`` series is one
replica: counters and histograms add up, KV-cache usage takes the fullest engine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from inferslice.common.exposition import Exposition, Sample
from inferslice.errors import ParseError

VLLM = "vllm:"
RAY_VLLM = "ray_vllm_"
RAY_REPLICA_LABEL = "ReplicaId"

# Merged histogram families: exported key -> the names a replica may use, preferred first.
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "queue": ("vllm:request_queue_time_seconds",),
}
# Plain cumulative counters: key -> base names (without ``_total``), preferred first.
COUNTERS: dict[str, tuple[str, ...]] = {
    "prompt_tokens": ("vllm:prompt_tokens",),
    "generation_tokens": ("vllm:generation_tokens",),
    "preemptions": ("vllm:num_preemptions",),
    "prefix_queries": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
    "prefix_hits": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
}
SUCCESS = "vllm:request_success"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
START_TIME = "process_start_time_seconds"

# Series key of a cumulative value: (family key, component, bucket edge). Components: "" for a
# plain counter, a finished_reason for request success, "bucket"/"sum"/"count" for histograms.
SeriesKey = tuple[str, str, float]


def wanted_name(name: str) -> bool:
    """The parse filter: only vLLM families and the process start time are read."""
    return name.startswith(VLLM) or name.startswith(RAY_VLLM) or name == START_TIME


@dataclass(frozen=True)
class Histogram:
    edges: tuple[float, ...]  # ascending upper bounds, +Inf last
    cumulative: tuple[float, ...]  # count at or below each edge
    sum: float

    @property
    def count(self) -> float:
        return self.cumulative[-1] if self.cumulative else 0.0


@dataclass(frozen=True)
class ReplicaReading:
    running: float
    waiting: float
    kv_cache_usage: float | None
    histograms: Mapping[str, Histogram] = field(default_factory=dict)
    counters: Mapping[str, float] = field(default_factory=dict)
    success: Mapping[str, float] = field(default_factory=dict)  # finished_reason -> count
    start_time_s: float | None = None  # process start: a change means the counters restarted

    @cached_property
    def series(self) -> Mapping[SeriesKey, float]:
        """``cumulative_series()``, computed once per reading (treat as read-only)."""
        return self.cumulative_series()

    def cumulative_series(self) -> dict[SeriesKey, float]:
        """Every cumulative value of this replica, flat, for the monotonic accumulator."""
        out: dict[SeriesKey, float] = {}
        for key, value in self.counters.items():
            out[(key, "", 0.0)] = value
        for reason, value in self.success.items():
            out[("success", reason, 0.0)] = value
        for key, h in self.histograms.items():
            for edge, value in zip(h.edges, h.cumulative, strict=True):
                out[(key, "bucket", edge)] = value
            out[(key, "sum", 0.0)] = h.sum
            out[(key, "count", 0.0)] = h.count
        return out


def _normalised(expo: Exposition, ray_replica_id: str | None) -> dict[str, list[Sample]]:
    """vLLM samples under their ``vllm:`` names; Ray-wrapped ones renamed and filtered to a replica."""
    out: dict[str, list[Sample]] = {}
    for name in expo.sample_names():
        if name.startswith(VLLM):
            key = name
        elif name.startswith(RAY_VLLM):
            key = VLLM + name[len(RAY_VLLM) :]
        else:
            continue
        for s in expo.samples(name):
            if ray_replica_id is not None:
                rid = s.label(RAY_REPLICA_LABEL)
                if rid is not None and not _same_replica(rid, ray_replica_id):
                    continue
            out.setdefault(key, []).append(s)
    return out


def _same_replica(label_value: str, replica_id: str) -> bool:
    # Ray has written the id both bare ("abc123") and qualified ("app#deployment#abc123").
    return label_value == replica_id or label_value.rsplit("#", 1)[-1] == replica_id.rsplit("#", 1)[-1]


def _finite_sum(samples: Iterable[Sample]) -> float:
    return float(sum(s.value for s in samples if math.isfinite(s.value)))


def _counter_samples(view: Mapping[str, list[Sample]], bases: Iterable[str]) -> list[Sample] | None:
    for base in bases:
        for name in (base + "_total", base):
            if name in view:
                return view[name]
    return None


def _histogram(view: Mapping[str, list[Sample]], base: str) -> Histogram | None:
    buckets = view.get(base + "_bucket")
    if not buckets:
        return None
    per_edge: dict[float, float] = {}
    edge_sets: dict[tuple[tuple[str, str], ...], set[float]] = {}
    for s in buckets:
        le = s.label("le")
        if le is None:
            raise ParseError(f"{base}_bucket without an 'le' label")
        try:
            edge = float(le)
        except ValueError:
            raise ParseError(f"{base}_bucket has le={le!r}") from None
        if math.isnan(edge):
            raise ParseError(f"{base}_bucket has le=NaN")
        series = tuple(kv for kv in s.labels if kv[0] != "le")
        edge_sets.setdefault(series, set()).add(edge)
        per_edge[edge] = per_edge.get(edge, 0.0) + (s.value if math.isfinite(s.value) else 0.0)
    # Several engine series in one replica must share edges, or their sum would be meaningless.
    sets = list(edge_sets.values())
    if any(es != sets[0] for es in sets[1:]):
        raise ParseError(f"{base}: engine series disagree on bucket edges")
    edges = sorted(per_edge)
    total = _finite_sum(view.get(base + "_count", ()))
    if not edges or edges[-1] != math.inf:
        edges.append(math.inf)
        per_edge[math.inf] = total
    cumulative = tuple(per_edge[e] for e in edges)
    return Histogram(edges=tuple(edges), cumulative=cumulative, sum=_finite_sum(view.get(base + "_sum", ())))


def reading_from_exposition(expo: Exposition, ray_replica_id: str | None = None) -> ReplicaReading:
    """Read one replica. ``ParseError`` if the exposition holds no vLLM metrics at all (a wrong
    port, a proxy's error page that happened to parse) or an inconsistent histogram."""
    view = _normalised(expo, ray_replica_id)
    if not view:
        raise ParseError("no vLLM metrics in the exposition")
    histograms: dict[str, Histogram] = {}
    for key, names in HISTOGRAMS.items():
        for base in names:
            h = _histogram(view, base)
            if h is not None:
                histograms[key] = h
                break
    counters: dict[str, float] = {}
    for key, names in COUNTERS.items():
        samples = _counter_samples(view, names)
        if samples is not None:
            counters[key] = _finite_sum(samples)
    success: dict[str, float] = {}
    for s in _counter_samples(view, (SUCCESS,)) or ():
        reason = s.label("finished_reason", "unknown") or "unknown"
        if math.isfinite(s.value):
            success[reason] = success.get(reason, 0.0) + s.value
    kv_samples = next((view[n] for n in KV_USAGE if n in view), [])
    kv_values = [s.value for s in kv_samples if math.isfinite(s.value)]
    start = None
    if ray_replica_id is None:  # under Ray the process metrics belong to the node's agent
        starts = [s.value for s in expo.samples(START_TIME) if math.isfinite(s.value)]
        start = starts[0] if starts else None
    return ReplicaReading(
        running=_finite_sum(view.get(RUNNING, ())),
        waiting=_finite_sum(view.get(WAITING, ())),
        kv_cache_usage=max(kv_values) if kv_values else None,
        histograms=histograms,
        counters=counters,
        success=success,
        start_time_s=start,
    )


# -- Ray Serve fronts -------------------------------------------------------------------------
SERVE_ONGOING = "ray_serve_num_ongoing_requests_at_replicas"
SERVE_QUEUED = "ray_serve_deployment_queued_queries"
SERVE_TARGET = "ray_serve_autoscaling_target_replicas"


def wanted_front_name(name: str) -> bool:
    return name.startswith("ray_serve_")


@dataclass(frozen=True)
class FrontReading:
    ongoing: float | None
    queued: float | None
    target_replicas: float | None


def front_readings_from_exposition(
    expo: Exposition, default_slice: str | None, application_slices: Mapping[str, str] | None = None
) -> dict[str, FrontReading]:
    """Router metrics per slice. The slice is the ``application`` label (mapped through
    ``application_slices``; identity by default), else ``default_slice``. Deployments of one
    application add up."""
    apps = application_slices or {}
    sums: dict[str, dict[str, float]] = {}
    for metric in (SERVE_ONGOING, SERVE_QUEUED, SERVE_TARGET):
        for s in expo.samples(metric):
            app = s.label("application")
            slice_ = apps.get(app, app) if app else default_slice
            if slice_ is None or not math.isfinite(s.value):
                continue
            per = sums.setdefault(slice_, {})
            per[metric] = per.get(metric, 0.0) + s.value
    return {
        slice_: FrontReading(ongoing=v.get(SERVE_ONGOING), queued=v.get(SERVE_QUEUED), target_replicas=v.get(SERVE_TARGET))
        for slice_, v in sums.items()
    }
