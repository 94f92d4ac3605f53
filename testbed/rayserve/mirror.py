"""Engine metrics re-recorded through Ray's metrics agent, the way vLLM's Ray stat logger records them.

Under Ray Serve LLM, vLLM logs with ``vllm.v1.metrics.ray_wrappers`` instead of prometheus_client:
each family becomes a ``ray.util.metrics`` Counter/Gauge/Histogram whose name has every character
outside ``[A-Za-z0-9_]`` replaced by ``_`` and whose tags gain ``ReplicaId`` (the Serve replica's
unique id); Ray's agent then exports them with its ``ray_`` prefix. This module applies the same
two rules to the emulator's families, so the exporter's Ray reading meets the real agent.

A counter is re-recorded as its increase since the last sync; a histogram's buckets as their count
increase, each observation placed at its bucket's upper bound (counts per bucket are exact; the
``_sum`` is the matching upper bound, not the engine's sum).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import Metric

REPLICA_TAG = "ReplicaId"  # the tag vLLM's ray_wrappers add to every metric
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def ray_metric_name(name: str) -> str:
    """vLLM's ``_get_sanitized_opentelemetry_name``: ``vllm:prompt_tokens`` -> ``vllm_prompt_tokens``."""
    return _UNSAFE.sub("_", name)


def _key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


class RayMirror:
    """Sync ``collect()``'s families into ``ray.util.metrics``; ``families`` limits which (None: all
    gauges, counters and histograms)."""

    def __init__(self, collect: Callable[[], Iterable[Metric]], replica_id: str, families: frozenset[str] | None = None) -> None:
        from ray.util import metrics as ray_metrics  # only inside a Ray worker

        self._rm = ray_metrics
        self._collect = collect
        self._replica_id = replica_id
        self._families = families
        self._metrics: dict[str, Any] = {}
        self._last: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

    def _metric(self, fam: Metric, tag_keys: tuple[str, ...], bounds: list[float] | None = None) -> Any:
        name = ray_metric_name(fam.name)
        if name not in self._metrics:
            keys = (*tag_keys, REPLICA_TAG)
            doc = fam.documentation or name
            if fam.type == "counter":
                self._metrics[name] = self._rm.Counter(name, description=doc, tag_keys=keys)
            elif fam.type == "gauge":
                self._metrics[name] = self._rm.Gauge(name, description=doc, tag_keys=keys)
            else:
                self._metrics[name] = self._rm.Histogram(name, description=doc, boundaries=bounds or [], tag_keys=keys)
        return self._metrics[name]

    def sync(self) -> None:
        for fam in self._collect():
            if fam.type not in ("counter", "gauge", "histogram") or (self._families is not None and fam.name not in self._families):
                continue
            if fam.type == "histogram":
                self._histogram(fam)
                continue
            suffix = "_total" if fam.type == "counter" else ""
            for s in fam.samples:
                if s.name != fam.name + suffix:
                    continue  # _created samples
                tags = {**s.labels, REPLICA_TAG: self._replica_id}
                metric = self._metric(fam, tuple(sorted(s.labels)))
                if fam.type == "gauge":
                    metric.set(float(s.value), tags=tags)
                    continue
                k = (fam.name, _key(s.labels))
                delta = float(s.value) - self._last.get(k, 0.0)
                if delta > 0:
                    metric.inc(delta, tags=tags)
                self._last[k] = float(s.value)

    def _histogram(self, fam: Metric) -> None:
        series: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
        for s in fam.samples:
            if s.name == fam.name + "_bucket":
                labels = {k: v for k, v in s.labels.items() if k != "le"}
                series.setdefault(_key(labels), []).append((float(s.labels["le"]), float(s.value)))
        for key, buckets in series.items():
            buckets.sort()
            bounds = [b for b, _ in buckets if b != float("inf")]
            labels = dict(key)
            metric = self._metric(fam, tuple(sorted(labels)), bounds)
            tags = {**labels, REPLICA_TAG: self._replica_id}
            previous = 0.0
            for bound, cumulative in buckets:
                k = (fam.name + f"|{bound}", key)
                in_bucket = cumulative - previous
                previous = cumulative
                new = int(in_bucket - self._last.get(k, 0.0))
                self._last[k] = in_bucket
                at = bound if bound != float("inf") else (bounds[-1] * 2 if bounds else 1.0)
                for _ in range(max(new, 0)):
                    metric.observe(at, tags=tags)
