"""``ReplicaPlacement``: where one replica of a slice runs and in what state.

The one type for it: the placement sources (``collectors.placement``), the actuators' observations
(``control.actuators``), the controller's views and the placement rules all speak it. States are
the testbed registry's vocabulary; every backend's own states map onto them in one parser
(``inferslice.common.placement``).
"""

from __future__ import annotations

from dataclasses import dataclass

STARTING, READY, STOPPING = "starting", "ready", "stopping"
REPLICA_STATES: tuple[str, ...] = (STARTING, READY, STOPPING)


@dataclass(frozen=True)
class ReplicaPlacement:
    id: str  # "premium-2"
    pop: str
    # GPU index at the PoP. Where a backend does not say which GPU (Ray Serve, KubeRay: Run:ai
    # chooses), 0 stands for "a GPU of that PoP".
    gpu: int = 0
    state: str = READY  # starting | ready | stopping
    gpu_share: float = 1.0  # effective share of its GPU allocation (< 1: a co-tenant slows it)

    @property
    def slot(self) -> str:
        """The placement slot, ``pop/gpuN`` (the tiers file's and the guardrails' unit)."""
        return f"{self.pop}/gpu{self.gpu}"


def count_ready(placements: tuple[ReplicaPlacement, ...] | list[ReplicaPlacement]) -> int:
    return sum(1 for p in placements if p.state == READY)
