"""Operating points written by hand from the brief's figures (BRIEF.md, "What the measurements showed").

Each point is what a real operator often has: client-side TTFT/TPOT percentiles, the token rate, the
link rate and cap, a reference; no queue gauges, no GPU readings. Labels restate the brief's own
reading of each measurement. Where the brief gives no figure for a field the value is marked
``# assumed`` with its basis (the testbed's calibrated engine, or a ratio the brief implies).
"""

from __future__ import annotations

from typing import Any

from inferslice.snapshot import Reference, SliceSnapshot

MBPS = 1e6
# Unconstrained tier (brief: P99 TTFT ~0.1 s; TPOT median 24-27 ms, P99 26-38 ms; ~370 tok/s at
# concurrency 10). The TTFT median is assumed at 0.06 s (the testbed's unloaded median).
REF_10 = Reference(ttft_p50_s=0.06, ttft_p99_s=0.1, tpot_p50_s=0.025, tpot_p99_s=0.032, output_tokens_per_s=370.0, source="configured")


def _ref(tokens_per_s: float) -> Reference:
    return Reference(
        ttft_p50_s=REF_10.ttft_p50_s,
        ttft_p99_s=REF_10.ttft_p99_s,
        tpot_p50_s=REF_10.tpot_p50_s,
        tpot_p99_s=REF_10.tpot_p99_s,
        output_tokens_per_s=tokens_per_s,
        source="configured",
    )


def _snap(tier: str, **f: Any) -> SliceSnapshot:
    return SliceSnapshot(slice=tier, slo_ttft_p99_s=0.5, **f)


def brief_points() -> list[tuple[str, list[str], SliceSnapshot, Reference]]:
    pts: list[tuple[str, list[str], SliceSnapshot, Reference]] = []

    def add(rid: str, causes: list[str], snap: SliceSnapshot, ref: Reference) -> None:
        pts.append((rid, causes, snap, ref))

    # Service differentiation: indistinguishable up to concurrency 12 (P99 TTFT ~0.1 s, ~2.5 req/s).
    # Token rates: Free's goodput peak 2.49 req/s / 462 tok/s (~185 tokens per request).
    for tier in ("free", "standard", "premium"):
        for c, tps in ((4, 150.0), (8, 300.0), (12, 462.0)):
            add(f"differentiation-{tier}-{c}", [], _snap(tier, ttft_p50_s=0.06, ttft_p99_s=0.1, tpot_p50_s=0.025, tpot_p99_s=0.03,
                                                        output_tokens_per_s=tps), _ref(150.0))  # fmt: skip
    # Free breaches at 16 (P99 ~5 s), ~13 s at 32; TPOT stays near its low-load value; tokens/s stay at the peak.
    # The median TTFT is assumed at half the P99 (a standing queue delays most requests).
    add("free-queue-16", ["queue"], _snap("free", ttft_p50_s=2.5, ttft_p99_s=5.0, tpot_p50_s=0.026, tpot_p99_s=0.031,
                                          output_tokens_per_s=462.0), _ref(150.0))  # fmt: skip
    add("free-queue-32", ["queue"], _snap("free", ttft_p50_s=6.5, ttft_p99_s=13.0, tpot_p50_s=0.026, tpot_p99_s=0.031,
                                          output_tokens_per_s=462.0), _ref(150.0))  # fmt: skip
    # Standard (3 replicas) breaches at 20 (~2.8 s), ~8 s at 32 (peak 840 tok/s).
    add("standard-queue-20", ["queue"], _snap("standard", ttft_p50_s=1.4, ttft_p99_s=2.8, tpot_p50_s=0.026, tpot_p99_s=0.031,
                                              output_tokens_per_s=840.0), _ref(150.0))  # fmt: skip
    add("standard-queue-32", ["queue"], _snap("standard", ttft_p50_s=4.0, ttft_p99_s=8.0, tpot_p50_s=0.026, tpot_p99_s=0.031,
                                              output_tokens_per_s=840.0), _ref(150.0))  # fmt: skip
    # Premium (6 replicas) holds the SLO to 32 (>= 1,026 tok/s); one excursion to ~0.8 s at 16 from a
    # replica cold start (capacity not there yet: requests wait for it).
    for c, tps in ((16, 600.0), (24, 800.0), (32, 1026.0)):
        add(f"premium-healthy-{c}", [], _snap("premium", ttft_p50_s=0.06, ttft_p99_s=0.1, tpot_p50_s=0.026, tpot_p99_s=0.031,
                                              output_tokens_per_s=tps), _ref(150.0))  # fmt: skip
    add("premium-coldstart-16", ["queue"], _snap("premium", ttft_p50_s=0.3, ttft_p99_s=0.8, tpot_p50_s=0.026, tpot_p99_s=0.031,
                                                 output_tokens_per_s=600.0), _ref(150.0))  # fmt: skip

    # Network: concurrency 10 needs ~0.9 Mbps. A 1 Mbps cap changes nothing.
    add("cap-1mbps-10", [], _snap("standard", ttft_p50_s=0.06, ttft_p99_s=0.1, tpot_p50_s=0.025, tpot_p99_s=0.032,
                                  output_tokens_per_s=370.0, link_rx_bps=0.9 * MBPS, link_cap_bps=1.0 * MBPS), REF_10)  # fmt: skip
    # A link at or slightly above its nominal cap with TPOT unchanged: not a bottleneck.
    add("cap-at-nominal-10", [], _snap("standard", ttft_p50_s=0.06, ttft_p99_s=0.11, tpot_p50_s=0.026, tpot_p99_s=0.034,
                                       output_tokens_per_s=365.0, link_rx_bps=1.02 * MBPS, link_cap_bps=1.0 * MBPS), REF_10)  # fmt: skip
    # 0.5 Mbps: receive pinned at ~0.46, 370 -> 220 tok/s, P99 TTFT 2-3 s, P99 TPOT 150-280 ms. The medians
    # are assumed (TTFT: 40 % of the P99; TPOT: 60 % of the P99).
    for i, (ttft99, tpot99) in enumerate(((2.0, 0.15), (2.5, 0.2), (3.0, 0.28))):
        for rx in (0.44, 0.46, 0.48):
            add(f"cap-0.5mbps-10-{i}{int(rx * 100)}", ["network"], _snap(
                "standard", ttft_p50_s=0.4 * ttft99, ttft_p99_s=ttft99, tpot_p50_s=0.6 * tpot99, tpot_p99_s=tpot99,
                output_tokens_per_s=220.0, link_rx_bps=rx * MBPS, link_cap_bps=0.5 * MBPS), REF_10)  # fmt: skip
    # Demand grows with load (Premium ~0.91 / 1.32 / 2.45 Mbps at 10 / 16 / 32): a 1 Mbps cap binds at 16
    # and 32. Assumed: throughput held to what 1 Mbps carries (~400 bits per token), TPOT and TTFT
    # inflated like the 0.5 Mbps case.
    for c, demand, tps in ((16, 1.32, 540.0), (32, 2.45, 1026.0)):
        carried = tps / demand * 0.95
        add(f"premium-cap-1mbps-{c}", ["network"], _snap(
            "premium", ttft_p50_s=0.6, ttft_p99_s=1.8, tpot_p50_s=0.025 * demand * 1.5, tpot_p99_s=0.032 * demand * 3,
            output_tokens_per_s=carried, link_rx_bps=0.95 * MBPS, link_cap_bps=1.0 * MBPS), _ref(tps))  # fmt: skip
    # Regimes combine: a tier already queue-limited (Free at 16) that also hits the 0.5 Mbps cap.
    add("free-queue-and-cap-16", ["network", "queue"], _snap(
        "free", ttft_p50_s=3.5, ttft_p99_s=7.0, tpot_p50_s=0.09, tpot_p99_s=0.2, output_tokens_per_s=220.0,
        link_rx_bps=0.46 * MBPS, link_cap_bps=0.5 * MBPS), REF_10)  # fmt: skip
    # Concurrency policy: strict (1/8) low flat latency; loose (4/32) queueing pushes P99 TTFT past the SLO, TPOT flat.
    add("policy-strict", [], _snap("standard", ttft_p50_s=0.06, ttft_p99_s=0.09, tpot_p50_s=0.025, tpot_p99_s=0.03,
                                   output_tokens_per_s=300.0), _ref(300.0))  # fmt: skip
    add("policy-loose", ["queue"], _snap("standard", ttft_p50_s=0.4, ttft_p99_s=0.9, tpot_p50_s=0.026, tpot_p99_s=0.031,
                                         output_tokens_per_s=900.0), _ref(300.0))  # fmt: skip
    return pts
