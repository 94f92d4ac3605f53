"""v5's three rules (docs/diagnosis.md, "Tokens held on the path"), on windows built by hand after
dev-corpus windows: RTT jitter beside seconds of TTFT is no delay that binds; a median TPOT far under
its measured reference is tokens held on the path; no replica up with nothing waiting is idle."""

from __future__ import annotations

import dataclasses

from inferslice.bottleneck import classify
from inferslice.diagnosis import CONFIDENT, Regime
from inferslice.snapshot import SliceSnapshot

# A tier queueing at its front (after s9015--c0-premium-w08): TTFT 3 s against 0.08 s, TPOT at its
# reference, a free link, nothing waiting at the engines (the router holds the queue).
FRONT_QUEUE = SliceSnapshot(
    slice="premium",
    slo_ttft_p99_s=0.5,
    request_count=36.0,
    ttft_p50_s=3.0,
    ttft_p99_s=7.35,
    ref_ttft_p50_s=0.08,
    ref_ttft_p99_s=0.19,
    tpot_p50_s=0.023,
    tpot_p99_s=0.049,
    ref_tpot_p50_s=0.019,
    ref_tpot_p99_s=0.049,
    output_tokens_per_s=440.0,
    ref_output_tokens_per_s=186.0,
    gpu_share=1.0,
    requests_waiting=0.0,
    requests_running=8.0,
    replicas=2.0,
    replicas_max=6.0,
    link_rx_bps=1.1e6,
    link_capacity_bps=1e10,
    wan_rx_bps=1.06e6,
    wan_capacity_bps=1.3e7,
    wan_rtt_s=0.024,  # 15 ms over its base: jitter of 0.2 % of the TTFT excess, 30 % of the 50 ms bar
    wan_base_rtt_s=0.009,
)


def _queue_share(snap: SliceSnapshot, stat: str) -> float:
    d = classify(snap)
    assert d.attribution is not None
    share = d.attribution.share(stat)
    assert share is not None and share.excess_s > 0
    return share.queue_s / share.excess_s


def test_rtt_jitter_beside_seconds_of_ttft_leaves_the_queue_its_share() -> None:
    d = classify(FRONT_QUEUE)
    assert d.regime is Regime.QUEUE_LIMITED
    assert _queue_share(FRONT_QUEUE, "ttft_p50") > 0.9
    # Nothing waits at the engines: the verdict is held below the bar, never confident.
    assert d.confidence < CONFIDENT


def test_a_material_delay_still_binds_the_network_and_takes_the_queue_s_share() -> None:
    # +150 ms on the path (3x the 50 ms bar) with nothing waiting: the network, not a queue.
    delayed = dataclasses.replace(FRONT_QUEUE, wan_rtt_s=0.009 + 0.15)
    assert classify(delayed).regime is Regime.NETWORK_LIMITED
    assert _queue_share(delayed, "ttft_p50") == 0.0


# A cap's backlog (after s9012--c1-free-w06): tokens arrive in bursts, a median TPOT at a fifth of
# the reference's, seconds of TTFT, no cap reported (it was just lifted) and nothing waiting.
BACKLOG = SliceSnapshot(
    slice="free",
    slo_ttft_p99_s=0.5,
    request_count=9.0,
    ttft_p50_s=1.75,
    ttft_p99_s=4.925,
    ref_ttft_p50_s=0.074,
    ref_ttft_p99_s=0.126,
    tpot_p50_s=0.0067,
    tpot_p99_s=0.0497,
    ref_tpot_p50_s=0.0365,
    ref_tpot_p99_s=0.0497,
    output_tokens_per_s=181.0,
    ref_output_tokens_per_s=109.0,
    gpu_share=1.0,
    requests_waiting=0.0,
    requests_running=4.0,
    replicas=1.0,
    replicas_max=1.0,
    link_rx_bps=1.13e6,
    link_capacity_bps=1e10,
)


def test_coalesced_tokens_are_the_network_s_held_below_the_bar_without_a_full_link() -> None:
    d = classify(BACKLOG)
    assert d.regime is Regime.NETWORK_LIMITED
    assert d.confidence < CONFIDENT
    cap = next(e.note for e in d.evidence if e.signal == "confidence_cap")
    assert "coalesced" in cap


def test_coalescing_is_judged_against_a_measured_median_only() -> None:
    # Without the reference's median (derived from its P99 by a prior) no engine pace is known.
    prior = dataclasses.replace(BACKLOG, ref_tpot_p50_s=None)
    assert classify(prior).regime is not Regime.NETWORK_LIMITED
    # A median at 0.7 of its reference is the engine's own spread, not a burst.
    spread = dataclasses.replace(BACKLOG, tpot_p50_s=0.7 * 0.0365)
    assert classify(spread).regime is not Regime.NETWORK_LIMITED


# A tier with no replica up, nothing waiting, nothing served (after s9007--c1-premium-w02): the
# engines' running gauge is absent because no engine runs.
NO_REPLICA = SliceSnapshot(
    slice="premium",
    request_count=0.0,
    ref_ttft_p50_s=0.215,
    ref_ttft_p99_s=0.497,
    ref_tpot_p50_s=0.019,
    ref_tpot_p99_s=0.048,
    output_tokens_per_s=0.0,
    requests_waiting=0.0,
    replicas=0.0,
    replicas_max=6.0,
    link_rx_bps=0.0,
    link_capacity_bps=1e10,
)


def test_no_replica_up_and_nothing_waiting_is_idle() -> None:
    d = classify(NO_REPLICA)
    assert d.regime is Regime.HEALTHY
    assert any(e.signal == "verdict" and "idle" in (e.note or "") for e in d.evidence)


def test_without_the_replica_count_or_with_requests_waiting_it_is_not_idle() -> None:
    assert classify(dataclasses.replace(NO_REPLICA, replicas=None)).regime is Regime.UNKNOWN
    assert classify(dataclasses.replace(NO_REPLICA, replicas=1.0)).regime is Regime.UNKNOWN  # running unknown
    assert classify(dataclasses.replace(NO_REPLICA, requests_waiting=3.0)).regime is not Regime.HEALTHY
