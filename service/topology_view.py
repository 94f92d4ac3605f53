"""The topology as operators read it: links with their RTT, latency tier and feasible parallelism."""

from __future__ import annotations

from typing import Any

from inferslice.topology import LatencyTier, Topology, feasible_parallelism, latency_tier


def topology_view(topology: Topology) -> dict[str, Any]:
    intra = latency_tier(0.0, same_pop=True)
    links = [
        {
            "a": link.a,
            "b": link.b,
            "rtt_s": link.rtt_s,
            "latency_tier": link.latency_tier.value,
            "feasible_parallelism": [p.value for p in feasible_parallelism(link.latency_tier)],
        }
        for link in topology.links
    ]
    return {
        "name": topology.name,
        "model": topology.model,
        "client": topology.client.model_dump(mode="json"),
        "pops": [p.model_dump(mode="json") for p in topology.pops],
        "links": links,
        # Within one PoP every strategy is feasible; the topology file does not model intra-PoP RTT
        # (the brief measured 0.60 ms mean), so none is claimed here.
        "intra_pop": {"latency_tier": LatencyTier.INTRA_POP.value, "feasible_parallelism": [p.value for p in feasible_parallelism(intra)]},
        "tiers": [
            {
                "name": t.name,
                "title": t.label,
                "replicas_max": t.replicas_max,
                "gpu_quota": t.gpu_quota,
                "slo_ttft_p99_s": t.slo_ttft_p99_s,
                "slo_tpot_p99_s": t.slo_tpot_p99_s,
                "client_cap_bps": t.client_cap_bps,
                "placement": list(t.placement),
            }
            for t in topology.tiers
        ],
    }
