"""inferslice: telemetry, diagnosis and control for SLO-driven LLM inference over a telco WAN.

This package holds the shared vocabulary (topology and tiers, snapshots, diagnoses, actions,
errors) and the CLI. The top-level folders of the repository (exporters/, collectors/, ...)
are installed as sub-packages of this namespace (``inferslice.exporters`` ...).
"""

__version__ = "0.1.0"
