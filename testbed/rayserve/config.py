"""The declarative Serve config of a Ray-served testbed: one application per tier (pure).

Each tier is an application named after it at route prefix ``/<tier>``, built by
``replica:app_builder``; its one deployment ``LLMServer`` takes the tier's max_ongoing_requests and
either a fixed replica count (``num_replicas``: Serve's autoscaler off, the platform's controller
owns the count) or an ``autoscaling_config`` with the tier's bounds and the testbed's compressed
delays, run by Ray's default policy or by the inferslice queue policy as a Ray custom policy.
This is the body of ``PUT /api/serve/applications/`` (Serve's REST API replaces the whole config).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from inferslice.topology import Topology

BUILDER = "inferslice.testbed.rayserve.replica:app_builder"
QUEUE_POLICY = "inferslice.control.actuators.rayserve_policy:QueuePolicy"
DEPLOYMENT = "LLMServer"
Mode = Literal["fixed", "ray-default", "inferslice-queue"]


def route_prefix(tier: str) -> str:
    return f"/{tier}"


def deployment_config(
    topology: Topology, tier: str, mode: Mode, replicas: int | None = None, policy_kwargs: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    t = topology.tier(tier)
    dep: dict[str, Any] = {"name": DEPLOYMENT, "max_ongoing_requests": t.max_ongoing_requests}
    if mode == "fixed":
        dep["num_replicas"] = t.replicas_min if replicas is None else replicas
        return dep
    timing = topology.timing
    auto: dict[str, Any] = {
        "min_replicas": t.replicas_min,
        "max_replicas": t.replicas_max,
        "initial_replicas": t.replicas_min if replicas is None else replicas,
        "target_ongoing_requests": t.target_ongoing_requests,
        "upscale_delay_s": timing.upscale_delay_s,
        "downscale_delay_s": timing.downscale_delay_s,
        "look_back_period_s": timing.look_back_period_s,
        # Replicas push their metrics this often; the testbed's compressed time needs it below Ray's 10 s.
        "metrics_interval_s": min(10.0, max(0.5, timing.look_back_period_s / 4)),
    }
    if mode == "inferslice-queue":
        auto["policy"] = {"policy_function": QUEUE_POLICY, "policy_kwargs": dict(policy_kwargs or {})}
    dep["autoscaling_config"] = auto
    return dep


def serve_config(
    topology: Topology,
    *,
    http_host: str,
    http_port: int,
    modes: Mapping[str, Mode] | None = None,
    replicas: Mapping[str, int] | None = None,
    seed: int = 0,
    engine: Mapping[str, Any] | None = None,
    policy_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    tiers: Sequence[str] | None = None,
    pop_engines: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The whole Serve config; tiers default to ``fixed`` at their replicas_min.

    ``tiers``: only these get an application (default: all). ``pop_engines``: {topology, state_dir}
    of a netns testbed, whose replicas then proxy to their slot's engine at the tier's PoP."""
    modes = modes or {}
    replicas = replicas or {}
    apps = []
    for k, tier in enumerate(topology.tier_names):
        if tiers is not None and tier not in tiers:
            continue
        args: dict[str, Any] = {
            "model": topology.model,
            "cold_start_s": topology.timing.cold_start_s,
            "seed": seed * 1000 + k,
            "engine": dict(engine or {}),
        }
        if pop_engines is not None:
            args["pop"] = {**pop_engines, "tier": tier}
        apps.append({
            "name": tier,
            "route_prefix": route_prefix(tier),
            "import_path": BUILDER,
            "args": args,
            "deployments": [
                deployment_config(topology, tier, modes.get(tier, "fixed"), replicas.get(tier), (policy_kwargs or {}).get(tier))
            ],
        })
    return {"proxy_location": "HeadOnly", "http_options": {"host": http_host, "port": http_port}, "applications": apps}
