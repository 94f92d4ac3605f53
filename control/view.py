"""Build what ``decide`` and ``guard`` read from what actuators observe and the topology (pure)."""

from __future__ import annotations

from collections.abc import Mapping

from inferslice.control.actuators.base import TierObservation
from inferslice.control.guardrails import ClusterView, free_gpu_for
from inferslice.control.placement import pair_key
from inferslice.control.settings import EDGE_RATE_BPS, TierPolicy
from inferslice.control.state import SliceState
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology


def all_slots(topology: Topology) -> list[str]:
    return [f"{p.name}/gpu{g}" for p in topology.pops for g in range(p.gpus)]


def cluster_view(observations: Mapping[str, TierObservation], policies: Mapping[str, TierPolicy]) -> ClusterView:
    use: dict[str, dict[str, float]] = {}
    for tier, obs in observations.items():
        per = policies[tier].gpu_per_replica if tier in policies else 0.5
        for r in obs.replicas:
            if r.state == "stopping":
                continue
            slot = f"{r.pop}/gpu{r.gpu}"
            use.setdefault(slot, {})
            use[slot][tier] = use[slot].get(tier, 0.0) + per
    return ClusterView(
        replicas={t: o.replicas_target for t, o in observations.items()},
        slot_use=use,
        caps_bps={t: o.cap_bps for t, o in observations.items()},
        edge_capacity_bps=EDGE_RATE_BPS,
    )


def slice_state(
    tier: str,
    obs: TierObservation,
    snapshot: SliceSnapshot | None,
    cluster: ClusterView,
    policies: Mapping[str, TierPolicy],
    topology: Topology,
    pop_headroom_bps: Mapping[str, float] | None = None,
    relocatable: bool = True,
    path_excess_s: Mapping[str, float] | None = None,
) -> SliceState:
    gw = topology.client.gateway
    pop_rtt = {
        p.name: topology.rtt_s(gw, p.name) if topology.link_between(gw, p.name) or p.name == gw else float("inf") for p in topology.pops
    }
    pairs = {pair_key(lk.a, lk.b): lk.rtt_s for lk in topology.links}
    return SliceState(
        tier=tier,
        replicas_target=obs.replicas_target,
        replicas=obs.replicas,
        cap_bps=obs.cap_bps,
        snapshot=snapshot,
        free_gpu=free_gpu_for(tier, cluster.slot_use, policies, all_slots(topology)),
        pop_rtt_s=pop_rtt,
        pop_headroom_bps=dict(pop_headroom_bps or {}),
        pair_rtt_s=pairs,
        relocatable=relocatable,
        path_excess_s=dict(path_excess_s or {}),
    )
