"""Shared builders for the control tests: the default topology's policies and one-tier states."""

from __future__ import annotations

from inferslice.control.actuators.base import TierObservation
from inferslice.control.settings import TierPolicy, tier_policies
from inferslice.control.state import SliceState
from inferslice.control.view import cluster_view, slice_state
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.placement import ReplicaPlacement
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology, load_topology

TOPOLOGY: Topology = load_topology()
POLICIES: dict[str, TierPolicy] = tier_policies(TOPOLOGY)


def placements(tier: str, n: int, share: float = 1.0, ready: int | None = None) -> tuple[ReplicaPlacement, ...]:
    t = TOPOLOGY.tier(tier)
    out = []
    for k in range(n):
        pop, _, gpu = t.placement[k].partition("/gpu")
        state = "ready" if ready is None or k < ready else "starting"
        out.append(ReplicaPlacement(f"{tier}-{k}", pop, int(gpu), state, share))
    return tuple(out)


def observations(replicas: dict[str, int], caps: dict[str, float | None] | None = None, share: float = 1.0) -> dict[str, TierObservation]:
    return {t: TierObservation(t, n, placements(t, n, share), (caps or {}).get(t)) for t, n in replicas.items()}


def state_of(
    tier: str,
    replicas: dict[str, int],
    snap: SliceSnapshot | None,
    caps: dict[str, float | None] | None = None,
    share: float = 1.0,
    ready: int | None = None,
) -> SliceState:
    obs = observations(replicas, caps, share)
    if ready is not None:
        obs[tier] = TierObservation(tier, replicas[tier], placements(tier, replicas[tier], share, ready), (caps or {}).get(tier))
    return slice_state(tier, obs[tier], snap, cluster_view(obs, POLICIES), POLICIES, TOPOLOGY)


def diag(tier: str, regime: Regime, *secondary: Regime, confidence: float = 0.9) -> Diagnosis:
    return Diagnosis(slice=tier, regime=regime, secondary=tuple(secondary), confidence=confidence)
