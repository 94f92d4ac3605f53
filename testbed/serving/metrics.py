"""/metrics of a tier's serving front with Ray Serve's metric names (application = tier name).

Ray exports through its metrics agent with a ``ray_`` prefix; the names, label keys and the
latency buckets follow Ray 2.60 (CONTRACTS.md). A custom collector renders the front's live state
per scrape.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from inferslice.testbed.engine.stats import Histogram

DEPLOYMENT = "LLMServer"  # Ray Serve LLM's deployment class name
# Ray Serve's DEFAULT_LATENCY_BUCKET_MS
LATENCY_BUCKETS_MS: tuple[float, ...] = (
    1,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    300,
    400,
    500,
    1000,
    2000,
    5000,
    10000,
    60000,
    120000,
    300000,
    600000,
)


@dataclass
class HttpStats:
    requests: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (route, method, status) -> n
    latency_ms: dict[str, Histogram] = field(default_factory=dict)  # route -> histogram

    def record(self, route: str, method: str, status: int, latency_ms: float) -> None:
        key = (route, method, str(status))
        self.requests[key] = self.requests.get(key, 0) + 1
        self.latency_ms.setdefault(route, Histogram(LATENCY_BUCKETS_MS)).observe(latency_ms)


class FrontView(Protocol):
    """What the collector reads from a front."""

    tier_name: str
    http: HttpStats

    def replica_view(self) -> list[tuple[str, bool, int]]: ...  # (replica id, healthy, in flight)

    @property
    def queued(self) -> int: ...

    @property
    def target_replicas(self) -> int: ...

    @property
    def desired_replicas(self) -> int: ...

    @property
    def ongoing(self) -> int: ...


class RayServeCollector(Collector):
    def __init__(self, front: FrontView) -> None:
        self.front = front

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        f = self.front
        app = [f.tier_name, DEPLOYMENT]
        replicas = f.replica_view()
        ongoing = GaugeMetricFamily(
            "ray_serve_num_ongoing_requests_at_replicas",
            "The current number of requests being processed by replicas.",
            labels=["application", "deployment"],
        )
        ongoing.add_metric(app, sum(n for _, _, n in replicas))
        yield ongoing
        queued = GaugeMetricFamily(
            "ray_serve_deployment_queued_queries",
            "The current number of queries to this deployment waiting to be assigned to a replica.",
            labels=["application", "deployment"],
        )
        queued.add_metric(app, f.queued)
        yield queued
        for name, doc, value in (
            ("ray_serve_autoscaling_target_replicas", "The target number of replicas for the deployment.", f.target_replicas),
            ("ray_serve_autoscaling_desired_replicas", "The desired number of replicas before bounds and delays.", f.desired_replicas),
            ("ray_serve_autoscaling_total_requests", "Total requests (ongoing + queued) seen by the autoscaler.", f.ongoing),
        ):
            g = GaugeMetricFamily(name, doc, labels=["application", "deployment"])
            g.add_metric(app, value)
            yield g
        healthy = GaugeMetricFamily(
            "ray_serve_deployment_replica_healthy",
            "Tracks whether this deployment replica is healthy.",
            labels=["application", "deployment", "replica"],
        )
        processing = GaugeMetricFamily(
            "ray_serve_replica_processing_queries",
            "The current number of queries being processed.",
            labels=["application", "deployment", "replica"],
        )
        for rid, ok, n in replicas:
            healthy.add_metric([*app, rid], 1.0 if ok else 0.0)
            processing.add_metric([*app, rid], n)
        yield healthy
        yield processing
        reqs = CounterMetricFamily(
            "ray_serve_num_http_requests",
            "The number of HTTP requests processed.",
            labels=["application", "route", "method", "status_code"],
        )
        for (route, method, status), n in sorted(f.http.requests.items()):
            reqs.add_metric([f.tier_name, route, method, status], n)
        yield reqs
        lat = HistogramMetricFamily(
            "ray_serve_http_request_latency_ms",
            "The end-to-end latency of HTTP requests (measured from the Serve HTTP proxy).",
            labels=["application", "route"],
        )
        for route, h in sorted(f.http.latency_ms.items()):
            buckets = [(repr(float(b)), v) for (b, v) in zip(h.bounds, [c for _, c in h.cumulative()], strict=False)]
            buckets.append(("+Inf", float(h.count)))
            lat.add_metric([f.tier_name, route], buckets, h.total)
        yield lat
