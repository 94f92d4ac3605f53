"""Where the diagnosis loop's windows come from: the one place a source is chosen and built.

``inferslice api --source``, the ``Platform`` and ``inferslice bench diagnosis`` all call
``make_source``; every source is then driven the same way (``poll`` then ``snapshots``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from inferslice.collectors import (
    EmbeddedSettings,
    EmbeddedSource,
    FieldSettings,
    MetricSource,
    PrometheusSettings,
    PrometheusSource,
    slices_from_topology,
)
from inferslice.errors import InputError
from inferslice.topology import Topology

SourceKind = Literal["prometheus", "embedded"]


@dataclass(frozen=True)
class SourceSettings:
    kind: SourceKind = "prometheus"  # the production path: Prometheus already scrapes everything
    prometheus_url: str = "http://127.0.0.1:9090"  # the testbed's Prometheus
    targets: Sequence[str] = field(default_factory=tuple)  # embedded: the /metrics URLs it scrapes itself
    perspective: Literal["engine", "client"] = "engine"  # engine histograms exist on every replica; client ones need a load generator
    window_s: float = 8.0  # the loop's default window: four 2 s scrapes, enough for a P99
    scrape_timeout_s: float = 2.0  # embedded: one testbed scrape interval; a slower target is as good as down
    recorded: bool = False  # prometheus: read the snapshot recording rules (three queries a round; the rule file has them)


def make_source(
    settings: SourceSettings, topology: Topology, only: Sequence[str] | None = None, pops: Sequence[str] | None = None
) -> MetricSource:
    """The configured source over the topology's slices (their SLOs from the tiers file); ``only``: just
    these slices, ``pops``: the recorded rounds read only these PoPs' parts (a diagnosis group)."""
    fields = FieldSettings(perspective=settings.perspective)
    slices = slices_from_topology(topology)
    if only is not None:
        wanted = set(only)
        slices = tuple(s for s in slices if s.name in wanted)
    if settings.kind == "prometheus":
        prom = PrometheusSettings(
            base_url=settings.prometheus_url, window_s=settings.window_s, recorded=settings.recorded, pops=tuple(pops) if pops else None
        )
        return PrometheusSource(slices, prom, fields)
    if settings.kind == "embedded":
        if not settings.targets:
            raise InputError("the embedded source needs --targets", "--targets")
        embedded = EmbeddedSettings(timeout_s=settings.scrape_timeout_s, window_s=settings.window_s)
        return EmbeddedSource(list(settings.targets), slices, embedded, fields)
    raise InputError(f"unknown source {settings.kind!r} (prometheus or embedded)", "--source")
