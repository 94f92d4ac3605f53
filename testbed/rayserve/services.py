"""The testbed's services with some tiers served by a real Ray Serve (``inferslice testbed up --serving ray``).

Wraps a service factory (``default_services`` or ``--engine``'s): the TierFronts of the ``ray`` tiers
are replaced by one ``ray-serve`` service in the gateway namespace (serving.py), which publishes
their front entries: the client URL ``http://<tier's front IP>:8001/<tier>`` (same IP, so the same
client-edge class), the relay's filtered agent metrics as the front's metrics. Engine hosts,
addresses, the exporter and the other tiers' fronts stay as they are.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from inferslice.common.registry import FrontEntry
from inferslice.testbed.addressing import AddressPlan, Endpoint
from inferslice.testbed.net.lifecycle import READY_TIMEOUT_S, ServiceFactory, ServiceSpec, default_services
from inferslice.testbed.net.plan import NetPlan
from inferslice.testbed.per_tier import resolve_per_tier
from inferslice.testbed.rayserve.admin import TIERS_PATH
from inferslice.testbed.rayserve.config import route_prefix
from inferslice.testbed.rayserve.serving import HTTP_PORT, RELAY_PORT, RUNNING_TIMEOUT_S
from inferslice.topology import Topology

SERVINGS = ("front", "ray")
SERVICE = "ray-serve"
# `testbed up` waits this long for every service when a tier is on Ray: Serve's applications come
# up after Ray itself and the replicas' engines at their PoPs.
RAY_READY_TIMEOUT_S = max(READY_TIMEOUT_S, RUNNING_TIMEOUT_S + 30.0)


def resolve_serving(items: list[str], tiers: list[str]) -> dict[str, str]:
    """``["ray"]`` (every tier) or ``["premium=ray", ...]`` -> {tier: front|ray}; later items win."""
    return resolve_per_tier(items, tiers, SERVINGS, "front", "serving")


def ray_front(top: Topology, plan: NetPlan, tier: str) -> FrontEntry:
    relay = relay_endpoint(plan)
    front = AddressPlan(top).front(tier)
    return FrontEntry(
        tier=tier,
        url=f"http://{front.host}:{HTTP_PORT}{route_prefix(tier)}",
        admin_url=f"{relay.url}{TIERS_PATH}/{tier}",  # the TierFront's admin API over Serve's config (admin.py)
        netns=plan.gateway_netns,
        replicas_target=max(1, top.tier(tier).replicas_min),
        autoscale=False,  # fixed num_replicas: Serve's autoscaler is off, the platform owns the count
        metrics_url=f"{relay.url}/metrics",
    )


def relay_endpoint(plan: NetPlan) -> Endpoint:
    return Endpoint(plan.mgmt_gateway_ip, RELAY_PORT)


def ray_services(serving: Mapping[str, str], base: ServiceFactory | None = None) -> ServiceFactory:
    """A service factory whose ``ray`` tiers are served by Ray Serve instead of TierFronts."""
    ray = [t for t, s in serving.items() if s == "ray"]

    def factory(top: Topology, topology_path: str, state_dir: Path, plan: NetPlan) -> list[ServiceSpec]:
        specs = (base or default_services)(top, topology_path, state_dir, plan)
        if not ray:
            return specs
        specs = [s for s in specs if not (s.kind == "front" and s.key in ray)]
        relay = relay_endpoint(plan)
        argv = (sys.executable, "-m", "inferslice.testbed.rayserve.serving", "--topology", topology_path,
                *(f"--tier={t}" for t in ray), "--state-dir", str(state_dir), "--relay", relay.listen)  # fmt: skip
        fronts = tuple(ray_front(top, plan, t) for t in top.tier_names if t in ray)
        specs.append(ServiceSpec(SERVICE, plan.gateway_netns, argv, f"{relay.url}/healthz", "front", ",".join(ray), fronts))
        return specs

    return factory
