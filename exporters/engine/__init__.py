"""The engine exporter: vLLM replicas and Ray-Serve-like fronts, re-exported per slice.

See docs/exporters.md ("engine"). ``collectors_from_config`` is the entry point the exporter
command calls with the config's ``engine:`` section.
"""

from __future__ import annotations

from typing import Any

from inferslice.exporters.base import Source
from inferslice.exporters.engine.collector import EngineSettings, EngineSource
from inferslice.exporters.engine.merge import SliceAccumulator, good_at_threshold, merge_histograms
from inferslice.exporters.engine.readings import (
    FrontReading,
    Histogram,
    ReplicaReading,
    front_readings_from_exposition,
    reading_from_exposition,
)
from inferslice.exporters.engine.settings import EngineConfig, engine_config_from_dict
from inferslice.exporters.engine.targets import (
    Discovered,
    FrontTarget,
    KubernetesDiscovery,
    RayServeDiscovery,
    RegistryDiscovery,
    ServeReplica,
    StaticDiscovery,
    Target,
    replicas_from_serve_applications,
    targets_from_endpoints,
    targets_from_serve_applications,
)
from inferslice.topology import Topology

__all__ = [
    "Discovered",
    "EngineConfig",
    "EngineSettings",
    "EngineSource",
    "FrontReading",
    "FrontTarget",
    "Histogram",
    "KubernetesDiscovery",
    "RayServeDiscovery",
    "RegistryDiscovery",
    "ReplicaReading",
    "ServeReplica",
    "SliceAccumulator",
    "StaticDiscovery",
    "Target",
    "collectors_from_config",
    "engine_config_from_dict",
    "front_readings_from_exposition",
    "good_at_threshold",
    "merge_histograms",
    "reading_from_exposition",
    "replicas_from_serve_applications",
    "targets_from_endpoints",
    "targets_from_serve_applications",
]


def collectors_from_config(section: dict[str, Any], topology: Topology | None, registry_path: str | None) -> list[Source]:
    """One ``EngineSource`` for the section (``ConfigError`` naming the bad field otherwise)."""
    cfg = engine_config_from_dict(section, registry_path)
    return [EngineSource(cfg.discoveries, topology, cfg.settings)]
