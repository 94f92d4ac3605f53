"""inferslice: telemetry, diagnosis and control for SLO-driven LLM inference over a telco WAN.

This package holds only the shared vocabulary (topology and tiers, snapshots, diagnoses, actions,
records, metric names, errors). The top-level folders of the repository (common/, exporters/,
collectors/, ..., service/, cli/, bench/) are installed as sub-packages of this namespace
(``inferslice.common`` ...); docs/architecture.md shows how they stack.
"""

__version__ = "0.1.0"
