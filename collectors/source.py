"""The ``MetricSource`` protocol and what both implementations share.

A source turns the metrics of one window into ``SliceSnapshot`` s. ``PrometheusSource`` asks a
Prometheus server; ``EmbeddedSource`` scrapes the exporters itself. Every source is driven the same
way: ``poll(now_s)`` (scrape what needs scraping at that instant: nothing for Prometheus, which
scrapes on its own), then ``snapshots(now_s, window_s)``. Both take the same
``FieldSettings`` and slice list and interpret the same field table (``fields.py``).

Errors: a source that cannot be reached at all raises ``SourceUnavailable``; a field whose series
are missing is ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from inferslice.collectors.promfuncs import finite_or_none
from inferslice.snapshot import SliceSnapshot, with_configured_slos
from inferslice.topology import Topology


@dataclass(frozen=True)
class SliceConfig:
    """A slice the source reports on, with the SLOs the tiers file gives it."""

    name: str
    slo_ttft_p99_s: float | None = None
    slo_tpot_p99_s: float | None = None


def slices_from_topology(topology: Topology) -> tuple[SliceConfig, ...]:
    return tuple(SliceConfig(t.name, t.slo_ttft_p99_s, t.slo_tpot_p99_s) for t in topology.tiers)


@runtime_checkable
class MetricSource(Protocol):
    def poll(self, now_s: float) -> object:
        """Collect what this source needs for instant ``now_s``; a second call for the same instant is free."""
        ...

    def snapshot(self, slice: str, window_s: float, now_s: float) -> SliceSnapshot:
        """One slice over ``[now_s - window_s, now_s]``; ``SourceUnavailable`` when unreachable."""
        ...

    def snapshots(self, now_s: float, window_s: float | None = None) -> list[SliceSnapshot]:
        """Every configured slice, in configuration order (``window_s`` defaults to the source's)."""
        ...

    def health(self) -> dict[str, Any]:
        """Last known state, without I/O: ``{"source": ..., "ok": bool, ...}``."""
        ...


def assemble_snapshot(
    cfg: SliceConfig, values: Mapping[str, float | None], now_s: float, window_s: float, link_capacity_bps: float | None = None
) -> SliceSnapshot:
    """Build a snapshot from per-field raw values; the tiers file's SLO wins (``with_configured_slos``).

    ``link_capacity_bps``: the measured link's physical rate (``FieldSettings.nominal_link_bps``, the
    brief's 10 Gbps NICs), reported with the link rate so that an uncapped link is judged against it.
    """
    clean: dict[str, Any] = {k: finite_or_none(v) for k, v in values.items()}
    if link_capacity_bps is not None and clean.get("link_rx_bps") is not None:
        clean["link_capacity_bps"] = link_capacity_bps
    for key in ("gpu_utilization", "gpu_share", "kv_cache_usage"):
        # A ratio a hair above 1 (a rounding exporter) would make the snapshot invalid input elsewhere.
        v = clean.get(key)
        if v is not None:
            clean[key] = min(max(v, 0.0), 1.0)
    snap = SliceSnapshot(slice=cfg.name, window_end_s=now_s, window_s=window_s, **clean)
    return with_configured_slos(snap, cfg.slo_ttft_p99_s, cfg.slo_tpot_p99_s)


def find_slice(slices: Sequence[SliceConfig], name: str) -> SliceConfig:
    for cfg in slices:
        if cfg.name == name:
            return cfg
    # An unconfigured slice is still answerable: only its SLOs are unknown.
    return SliceConfig(name)
