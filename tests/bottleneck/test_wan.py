"""The control benchmark's two WAN causes, as the classifier must read them for the controller to
move replicas instead of raising a cap or scaling out: ``network_limited`` with ``network_cause``
``wan_delay`` / ``wan_link``, and a client-edge cap still the edge's.

Operating points written from the brief's unconstrained tier (REF in test_attribution) and the
control benchmark's two WAN causes on the 9 ms bristol-london link: an added delay (+0.45 s round
trip: every first chunk late, TPOT unchanged, nothing waiting, the link nearly idle) and
cross-traffic filling it (27.9 Mbit/s delivered of 27.9, its 50 ms buffer full: RTT 56 ms; the
streams behind it are paced: TPOT x4). The client edge is uncapped and far from its physical rate."""

from __future__ import annotations

from typing import Any

from inferslice.bottleneck import classify
from inferslice.diagnosis import NetworkCause, Regime

from .test_attribution import MBPS, point

EDGE = dict(link_rx_bps=0.8 * MBPS, link_capacity_bps=10e9, requests_waiting=0.0, requests_running=8.0, request_rate=1.6)


def delayed(**kw: Any) -> Any:
    return point(**{**EDGE, "ttft_p50_s": 0.56, "ttft_p99_s": 0.6, "tpot_p50_s": 0.025, "tpot_p99_s": 0.034,
                    "output_tokens_per_s": 300.0, **kw})  # fmt: skip


def congested(**kw: Any) -> Any:
    return point(**{**EDGE, "ttft_p50_s": 1.5, "ttft_p99_s": 4.0, "tpot_p50_s": 0.1, "tpot_p99_s": 0.15,
                    "output_tokens_per_s": 120.0, **kw})  # fmt: skip


DELAY = dict(wan_rtt_s=0.459, wan_base_rtt_s=0.009, wan_rx_bps=1e6, wan_capacity_bps=27.9e6)
FULL = dict(wan_rtt_s=0.056, wan_base_rtt_s=0.009, wan_rx_bps=27.9e6, wan_capacity_bps=27.9e6)


def test_a_delay_step_on_the_wan_is_the_wan_not_a_queue() -> None:
    d = classify(delayed(**DELAY))
    assert d.regime is Regime.NETWORK_LIMITED and d.network_cause is NetworkCause.WAN_DELAY and d.confidence >= 0.6
    # Without the WAN fields the same window reads as a queue (not confidently): the cause is invisible.
    assert classify(delayed()).regime is Regime.QUEUE_LIMITED


def test_cross_traffic_filling_the_wan_link_is_the_wan_not_compute() -> None:
    d = classify(congested(**FULL))
    assert d.regime is Regime.NETWORK_LIMITED and d.network_cause is NetworkCause.WAN_LINK
    assert classify(congested()).regime is Regime.COMPUTE_LIMITED  # TPOT up on a free edge at full GPU share


def test_a_capped_edge_stays_the_edges_with_a_full_wan_link_beside_it() -> None:
    d = classify(congested(link_rx_bps=0.46 * MBPS, link_cap_bps=0.5 * MBPS, **FULL))
    assert d.regime is Regime.NETWORK_LIMITED and d.network_cause is NetworkCause.EDGE_CAP  # the cap raise comes first
