"""v10 (docs/diagnosis.md, "v10: an uncapped edge, reported"): the collectors report an uncapped
client edge's cap at the link's physical rate (HTB ceil at the line rate, ``clamp_max``), and the
classifier reads a cap at or above ``link_capacity_bps`` as no cap. A window that reports it is no
longer open to "a cap the window did not report"; a window without the cap still is."""

from __future__ import annotations

import dataclasses

from inferslice.bench.corpus_windows import EDGE_CAP_KEY, EDGE_CAP_REPORTED, as_collected_now, labelled
from inferslice.bottleneck import classify
from inferslice.bottleneck.attribution import link_state
from inferslice.bottleneck.thresholds import DEFAULT
from inferslice.diagnosis import CONFIDENT, NetworkCause, Regime
from inferslice.snapshot import SliceSnapshot

PHYSICAL = "link judged against its physical rate only"

# After s1000--c0-standard-w02 (tune, Prometheus): a GPU share of 0.52 and the median TPOT 1.25x its
# reference, the edge carrying 0.5 Mbit/s of its 10 Gbit/s; no cap gauge in the window as recorded.
COMPUTE = SliceSnapshot(
    slice="standard",
    window_s=6.0,
    slo_ttft_p99_s=0.5,
    ttft_p50_s=0.0933,
    ttft_p99_s=0.246,
    tpot_p50_s=0.0378,
    tpot_p99_s=0.1161,
    output_tokens_per_s=207.5,
    request_rate=2.0,
    link_rx_bps=518_902.0,
    link_capacity_bps=1e10,
    requests_waiting=0.0,
    requests_running=8.0,
    replicas=2.0,
    replicas_max=3.0,
    gpu_share=0.5164,
    kv_cache_usage=0.054,
    preemptions_per_s=0.0,
    ref_ttft_p50_s=0.0956,
    ref_ttft_p99_s=0.2291,
    ref_tpot_p50_s=0.0302,
    ref_tpot_p99_s=0.0671,
    ref_output_tokens_per_s=280.75,
)


def _caps(d: object) -> str:
    return "; ".join(e.note for e in d.evidence if e.signal == "confidence_cap")  # type: ignore[attr-defined]


def test_without_the_cap_a_compute_verdict_stays_below_the_bar() -> None:
    d = classify(COMPUTE)
    assert d.regime is Regime.COMPUTE_LIMITED
    assert PHYSICAL in _caps(d) and d.confidence < CONFIDENT


def test_an_uncapped_edge_reported_at_its_physical_rate_lifts_that_cap() -> None:
    d = classify(dataclasses.replace(COMPUTE, link_cap_bps=1e10))
    assert d.regime is Regime.COMPUTE_LIMITED
    assert PHYSICAL not in _caps(d)
    # The only reason this window was held is gone: its confidence is the calibrated one.
    assert _caps(d) == "" and d.confidence >= CONFIDENT


def test_a_cap_above_the_physical_rate_is_no_cap() -> None:
    above = dataclasses.replace(COMPUTE, link_cap_bps=4e10)
    state = link_state(above, DEFAULT)
    assert state.against == "capacity" and state.cap_reported and state.utilization == 518_902.0 / 1e10
    # Full at its physical rate: the edge binds, and there is no cap to raise.
    full = dataclasses.replace(above, link_rx_bps=9.9e9, gpu_share=1.0, tpot_p50_s=0.09, tpot_p99_s=0.2)
    d = classify(full)
    assert d.regime is Regime.NETWORK_LIMITED and d.network_cause is NetworkCause.EDGE_CAPACITY


def test_a_cap_below_the_physical_rate_is_the_slice_cap() -> None:
    capped = dataclasses.replace(COMPUTE, link_cap_bps=6e5)
    state = link_state(capped, DEFAULT)
    assert state.against == "cap" and state.utilization == 518_902.0 / 6e5


def test_edge_cap_bps_reads_a_cap_at_the_physical_rate_as_none() -> None:
    assert dataclasses.replace(COMPUTE, link_cap_bps=1e10).edge_cap_bps is None
    assert dataclasses.replace(COMPUTE, link_cap_bps=2e10).edge_cap_bps is None
    assert dataclasses.replace(COMPUTE, link_cap_bps=5e5).edge_cap_bps == 5e5
    assert COMPUTE.edge_cap_bps is None
    assert SliceSnapshot(slice="x", link_cap_bps=5e5).edge_cap_bps == 5e5  # no physical rate: the cap stands


def test_corpus_lines_from_before_the_clamp_are_read_as_collected_now() -> None:
    old = {"link_rx_bps": 1e6, "link_capacity_bps": 1e10}
    assert as_collected_now(old) == {**old, "link_cap_bps": 1e10}
    assert as_collected_now({"link_rx_bps": 1e6, "link_capacity_bps": 1e10, "link_cap_bps": 5e5})["link_cap_bps"] == 5e5
    assert "link_cap_bps" not in as_collected_now({"link_capacity_bps": 1e10})  # no link measured: nothing to read
    snaps = {"embedded": {"slice": "free", **old}}
    row = {"id": "s1-clean-free-w01", "seed": 1, "tier": "free", "run": "clean", "window": 1, "snapshots": snaps}
    (before,) = labelled([row], ("embedded",))
    assert before.snapshot.link_cap_bps == 1e10
    # A line written by the clamping collectors is read as recorded: a missing cap stays missing.
    (after,) = labelled([{**row, EDGE_CAP_KEY: EDGE_CAP_REPORTED}], ("embedded",))
    assert after.snapshot.link_cap_bps is None


# Confident compute verdicts exposed three ways a missing field could turn one into a confident other
# verdict (the corpus test's counterexamples before these caps): each such window is now held.
UNCAPPED = dataclasses.replace(COMPUTE, link_cap_bps=1e10)


def test_without_the_tail_a_confirmed_share_drop_holds_healthy_below_the_bar() -> None:
    d = classify(dataclasses.replace(UNCAPPED, tpot_p99_s=None))
    assert d.regime is not Regime.COMPUTE_LIMITED and d.confidence < CONFIDENT
    assert "compute confirmed without the P99 TPOT" in _caps(d)


def test_without_the_share_a_tail_past_the_confirmed_bar_holds_healthy_below_the_bar() -> None:
    d = classify(dataclasses.replace(UNCAPPED, gpu_share=None))
    assert d.regime is not Regime.COMPUTE_LIMITED and d.confidence < CONFIDENT
    assert "without the GPU share" in _caps(d)
    # A tail at its reference leaves the tail nothing a share drop could bind: not that cap. The median
    # past its bar is another matter (v13, found on v12's blind set): without a confirmation it reads as
    # drift, and a reported drop would make it count, so the verdict is held for that instead.
    quiet = classify(dataclasses.replace(UNCAPPED, gpu_share=None, tpot_p99_s=0.0671))
    assert "P99 TPOT past the bar a reported GPU-share drop sets" not in _caps(quiet)
    assert "a median TPOT past its bar read as drift, without the GPU share" in _caps(quiet)
    assert quiet.confidence < CONFIDENT


def test_half_of_the_wan_pair_holds_a_compute_verdict_below_the_bar() -> None:
    one = classify(dataclasses.replace(UNCAPPED, wan_rx_bps=1e6))
    assert one.regime is Regime.COMPUTE_LIMITED and one.confidence < CONFIDENT
    assert "a full WAN link could take the TPOT share" in _caps(one)
    both = classify(dataclasses.replace(UNCAPPED, wan_rx_bps=1e6, wan_capacity_bps=2.79e7))  # a WAN link, 4 % full
    assert both.regime is Regime.COMPUTE_LIMITED and both.confidence >= CONFIDENT
