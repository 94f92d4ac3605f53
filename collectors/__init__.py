"""inferslice.collectors: metric sources -> ``SliceSnapshot`` s, and placement sources.

References are learned in one place, ``bottleneck.reference`` (used by the diagnosis service).

Imports only the vocabulary and the shared layer (never exporters, testbed or bottleneck).
"""

from inferslice.collectors.embedded import EmbeddedSettings, EmbeddedSource, TargetStatus
from inferslice.collectors.fields import FieldSettings, field_specs, render_promql
from inferslice.collectors.placement import (
    KubernetesPlacement,
    PlacementSource,
    RayServePlacement,
    RegistryPlacement,
    ReplicaPlacement,
    count_ready,
    parse_rayservice,
    parse_serve_applications,
    placement_from_rayservice,
)
from inferslice.collectors.prometheus import PrometheusSettings, PrometheusSource, parse_query_response
from inferslice.collectors.source import MetricSource, SliceConfig, slices_from_topology

__all__ = [
    "EmbeddedSettings",
    "EmbeddedSource",
    "FieldSettings",
    "KubernetesPlacement",
    "MetricSource",
    "PlacementSource",
    "PrometheusSettings",
    "PrometheusSource",
    "RayServePlacement",
    "RegistryPlacement",
    "ReplicaPlacement",
    "SliceConfig",
    "TargetStatus",
    "count_ready",
    "field_specs",
    "parse_query_response",
    "parse_rayservice",
    "parse_serve_applications",
    "placement_from_rayservice",
    "render_promql",
    "slices_from_topology",
]
