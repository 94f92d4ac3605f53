"""Where a replica may move: the brief's placement rules and the destination ranking.

Rules (``inferslice.topology.feasible_parallelism``, from the brief's cross-PoP measurements):
tensor parallelism and prefill/decode disaggregation stay within one PoP (cross-PoP TTFT 1.7-4.8 s),
pipeline parallelism spans PoPs up to the mid latency tier (5-10 ms; beyond it the queue-free rate
falls below half), replication goes anywhere. For a sharded tier the replica's peers are the tier's
other replicas: a stage may only move where every peer stays within the allowed latency tier.

Moves are make-before-break: the action names the replica and its destination, and the actuator
starts the new replica, waits until it serves, and only then drains the old one.
"""

from __future__ import annotations

from collections.abc import Mapping

from inferslice.placement import ReplicaPlacement
from inferslice.topology import LatencyTier, Parallelism, latency_tier, parse_slot

_ALLOWED: dict[Parallelism, frozenset[LatencyTier]] = {
    Parallelism.REPLICATION: frozenset(LatencyTier),
    Parallelism.PIPELINE: frozenset({LatencyTier.INTRA_POP, LatencyTier.NEAR, LatencyTier.MID}),
    Parallelism.TENSOR: frozenset({LatencyTier.INTRA_POP}),
    Parallelism.PREFILL_DECODE: frozenset({LatencyTier.INTRA_POP}),
}


def pair_key(a: str, b: str) -> str:
    return "|".join(sorted((a, b)))


def path_tier(a: str, b: str, pair_rtt_s: Mapping[str, float]) -> LatencyTier | None:
    if a == b:
        return LatencyTier.INTRA_POP
    rtt = pair_rtt_s.get(pair_key(a, b))
    return None if rtt is None else latency_tier(rtt)


def placement_allowed(parallelism: Parallelism, dest_pop: str, peer_pops: list[str], pair_rtt_s: Mapping[str, float]) -> bool:
    """May a replica (or stage) of this parallelism sit at ``dest_pop`` next to its peers?"""
    if parallelism is Parallelism.REPLICATION:
        return True
    allowed = _ALLOWED[parallelism]
    for peer in peer_pops:
        tier = path_tier(dest_pop, peer, pair_rtt_s)
        if tier is None or tier not in allowed:
            return False
    return True


def destinations(
    replica: ReplicaPlacement,
    peers: list[ReplicaPlacement],
    parallelism: Parallelism,
    gpu_needed: float,
    free_gpu: Mapping[str, float],
    pair_rtt_s: Mapping[str, float],
    pop_rtt_s: Mapping[str, float],
    avoid_pops: frozenset[str] = frozenset(),
) -> list[str]:
    """GPU slots the replica may move to, best first: enough free GPU guaranteed to nobody, another
    GPU than its own, placement rules kept; ranked by free GPU (most headroom), then by RTT to the
    client gateway."""
    here = f"{replica.pop}/gpu{replica.gpu}"
    peer_pops = [p.pop for p in peers if p.id != replica.id]
    out: list[tuple[float, float, str]] = []
    for slot, free in free_gpu.items():
        pop, _ = parse_slot(slot)
        if slot == here or pop in avoid_pops or free + 1e-9 < gpu_needed:
            continue
        if not placement_allowed(parallelism, pop, peer_pops, pair_rtt_s):
            continue
        out.append((-free, pop_rtt_s.get(pop, float("inf")), slot))
    return [slot for _, _, slot in sorted(out)]
