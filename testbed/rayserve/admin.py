"""A Ray tier's admin API, the TierFront's (testbed/serving/admin.py) over Serve's declarative config.

Served by the relay under ``/tiers/<tier>``, which is the tier's ``admin_url`` in the registry, so the
testbed actuator and ``inferslice testbed replicas`` drive a Ray tier as they drive a TierFront:
- ``PUT /admin/replicas {"replicas": N}``: Serve's ``num_replicas`` (its autoscaler off for the tier, as
  the RayServeActuator does), the new replicas claiming the next placement slots at their PoPs;
- ``PUT /admin/autoscale {"enabled": true}``: Ray's default autoscaling policy with the tier's bounds;
  ``false`` fixes the count at the current target;
- ``GET /admin/state``: mode, target and the replicas as last published to the registry.
Moves are refused (409): a Serve replica's engine stays at the slot it claimed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from inferslice.testbed.serving.moves import Move, MoveRefused

if TYPE_CHECKING:
    from inferslice.testbed.rayserve.serving import RayServing

TIERS_PATH = "/tiers"


class RayTierControl:
    """``Controllable`` (testbed/serving/admin.py) for one tier of a ``RayServing``."""

    def __init__(self, rs: RayServing, tier: str) -> None:
        self.rs = rs
        self.tier = tier
        self._dirty = False

    @property
    def autoscale_enabled(self) -> bool:
        return self.rs.modes[self.tier] != "fixed"

    @autoscale_enabled.setter
    def autoscale_enabled(self, enabled: bool) -> None:  # Controllable declares a settable attribute
        self.set_autoscale(enabled)

    @property
    def replicas_max(self) -> int:
        t = self.rs.top.tier(self.tier)
        return min(t.replicas_max, len(t.placement))  # one engine per placement slot

    def state(self) -> dict[str, Any]:
        target = self.rs.targets[self.tier]
        return {
            "tier": self.tier,
            "mode": "autoscale" if self.autoscale_enabled else "fixed",
            "serving": "ray",
            "target": target,
            "desired": target,
            "replicas": [
                {
                    "id": e.id,
                    "pop": e.pop,
                    "gpu": e.gpu,
                    "url": e.url,
                    "state": e.state,
                    "gpu_share": e.gpu_share,
                    "ray_replica_id": e.ray_replica_id,
                }
                for e in self.rs.entries[self.tier]
            ],
        }

    def set_fixed(self, replicas: int) -> None:
        self.rs.targets[self.tier] = replicas
        self._dirty = True

    def set_autoscale(self, enabled: bool) -> None:
        if enabled == self.autoscale_enabled:
            return
        if not enabled:  # keep what runs now, as the TierFront does
            self.rs.targets[self.tier] = max(1, sum(1 for e in self.rs.entries[self.tier] if e.state == "ready"))
        self.rs.modes[self.tier] = "ray-default" if enabled else "fixed"
        self.rs.apply()  # the admin handler has no reconcile step after this one: apply now

    async def reconcile(self) -> None:
        if self._dirty:
            self._dirty = False
            await asyncio.to_thread(self.rs.apply)

    @property
    def moves(self) -> dict[str, Move]:
        return {}

    def start_move(self, move_id: str, replica: str, pop: str, gpu: int) -> tuple[Move, bool]:
        raise MoveRefused(f"{self.tier} is served by Ray Serve: its replicas' engines stay at the slots they claimed", 409)
