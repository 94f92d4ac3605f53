"""The API's own ``/metrics``: diagnosis state read fresh from the store at each scrape, plus request counters.

A custom collector (not module-level gauges) so every app instance owns its registry and a restarted
API exports the same regime and episode counts it had before: both live in SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from inferslice import metric_names as mn
from inferslice.diagnosis import ATTRIBUTION_STATS, RESOURCES, Regime
from inferslice.service.store import Store


class DiagnosisCollector(Collector):
    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        regime = GaugeMetricFamily(
            mn.DIAGNOSIS_REGIME, "1 for the slice's current diagnosed regime, 0 for the others", labels=["slice", "regime"]
        )
        confidence = GaugeMetricFamily(mn.DIAGNOSIS_CONFIDENCE, "confidence of the slice's current diagnosis (0-1)", labels=["slice"])
        requests = GaugeMetricFamily(
            mn.DIAGNOSIS_REQUESTS,
            "requests the slice's latest diagnosed window's TTFT quantiles rest on (absent: not reported)",
            labels=["slice"],
        )
        for slice_name, diag in self.store.latest_diagnoses().items():
            for r in Regime:
                regime.add_metric([slice_name, r.value], 1.0 if diag.get("regime") == r.value else 0.0)
            confidence.add_metric([slice_name], float(diag.get("confidence", 0.0)))
            if diag.get("request_count") is not None:
                requests.add_metric([slice_name], float(diag["request_count"]))
        episodes = CounterMetricFamily(
            mn.DIAGNOSIS_EPISODES.removesuffix("_total"), "bottleneck episodes opened", labels=["slice", "regime"]
        )
        for (slice_name, regime_name), n in sorted(self.store.episode_counts().items()):
            episodes.add_metric([slice_name, regime_name], float(n))
        yield regime
        yield confidence
        yield requests
        yield episodes
        yield attribution_family(self.store.latest_diagnoses())


def attribution_family(latest: Mapping[str, Mapping[str, Any]]) -> GaugeMetricFamily:
    """Where each slice's latency goes in its latest window (``Diagnosis.attribution``)."""
    family = GaugeMetricFamily(
        mn.LATENCY_ATTRIBUTION,
        "seconds of the latest window's latency statistic attributed to each resource (base: the reference and the unexplained)",
        labels=["slice", "resource", "stat"],
    )
    for slice_name, diag in sorted(latest.items()):
        attribution = diag.get("attribution") or {}
        for stat in ATTRIBUTION_STATS:
            share = attribution.get(stat)
            if not share:
                continue
            for resource in (*RESOURCES, "base"):
                family.add_metric([slice_name, resource, stat], float(share.get(f"{resource}_s", 0.0)))
    return family


class ApiMetrics:
    """The registry ``/metrics`` serves, with the per-request instruments."""

    def __init__(self, store: Store) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(DiagnosisCollector(store))
        self.requests = Counter(
            mn.API_REQUESTS.removesuffix("_total"),
            "requests served by the diagnosis API",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            mn.API_REQUEST_DURATION,
            "request handling time",
            ["method", "route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=self.registry,
        )
