"""inferslice.collectors: metric sources -> ``SliceSnapshot`` s, placement sources, reference learning.

Imports only the shared vocabulary (never exporters, testbed or bottleneck).
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
from inferslice.collectors.reference import (
    JsonFileReferenceStore,
    LearnerSettings,
    LearnerState,
    ReferenceLearner,
    ReferenceStore,
    SliceLearning,
    load_reference_overrides,
    load_state,
    reference_overrides_from_dict,
    save_state,
)
from inferslice.collectors.source import MetricSource, SliceConfig, slices_from_topology
from inferslice.collectors.window import build_snapshots

__all__ = [
    "EmbeddedSettings",
    "EmbeddedSource",
    "FieldSettings",
    "JsonFileReferenceStore",
    "KubernetesPlacement",
    "LearnerSettings",
    "LearnerState",
    "MetricSource",
    "PlacementSource",
    "PrometheusSettings",
    "PrometheusSource",
    "RayServePlacement",
    "ReferenceLearner",
    "ReferenceStore",
    "RegistryPlacement",
    "ReplicaPlacement",
    "SliceConfig",
    "SliceLearning",
    "TargetStatus",
    "build_snapshots",
    "count_ready",
    "field_specs",
    "load_reference_overrides",
    "load_state",
    "parse_query_response",
    "parse_rayservice",
    "parse_serve_applications",
    "placement_from_rayservice",
    "reference_overrides_from_dict",
    "render_promql",
    "save_state",
    "slices_from_topology",
]
