"""v18: three rules found by reading v17's misses on its seen blind seeds (9216-9280), each a case the
corpus truth (a paired counterfactual) says v17 read wrong:

- a WAN delay binds only where it is a material part of what the first tokens lost (a quarter of
  the TTFT excess, the P99's where measured): a 130 ms step beside a multi-second queue read
  network, while removing the step left the breach; and it counts where 40 % of it shows (was 50 %);
- the gauge-only queue (a standing queue at the replica ceiling) needs three requests waiting: one or
  two held at an instant are arrivals between an engine's scheduling steps;
- a queue in the window after a GPU-share drop is the backlog the slowed engines left: compute, read
  below the action bar like v14's tail, with the queue secondary.

The expected verdicts are worked from the rules' statements on hand-built windows, not read off the
code. The cases marked "v17:" read otherwise under v17; the others are controls that read the same.
The last two tests are the review's (before any blind window was read): v18 as first frozen judged
the delay on the median's excess, so removing the median could turn a confident network into a
confident queue, and a median at its reference let a queue's P99 carry the delay."""

from __future__ import annotations

import dataclasses

import pytest

from inferslice.bottleneck import classify
from inferslice.bottleneck.classify import TAIL
from inferslice.bottleneck.thresholds import DEFAULT
from inferslice.control.settings import ControlSettings
from inferslice.diagnosis import CONFIDENT, Regime

from .test_v14_contention_tail import CLEAN as V14_CLEAN

# v14's clean window (every statistic at its reference, the link far from its cap, requests in
# flight: healthy by itself), with a WAN path at its base RTT and more requests served.
CLEAN = dataclasses.replace(V14_CLEAN, request_count=40.0, wan_rx_bps=1e6, wan_capacity_bps=27.9e6, wan_rtt_s=0.009, wan_base_rtt_s=0.009)
DELAY_S = 0.13  # the path's RTT 130 ms over its base: one RTT per first token (``delay_rtts_per_first_token``)
DELAYED = dataclasses.replace(CLEAN, wan_rtt_s=0.009 + DELAY_S)
# Forty requests wait at the ceiling, twelve run.
QUEUED = dict(requests_waiting=40.0, requests_running=12.0, replicas=6.0)


def test_the_clean_window_is_healthy() -> None:
    assert classify(CLEAN).regime is Regime.HEALTHY
    assert DEFAULT.delay_excess_share == 0.25 and DEFAULT.delay_shown_fraction == 0.4


def test_a_delay_that_is_the_first_tokens_excess_binds_the_network() -> None:
    # The median TTFT shows the whole step (0.21 - 0.08 = 0.13 s): the delay is all of the excess.
    d = classify(dataclasses.replace(DELAYED, ttft_p50_s=0.21, ttft_p99_s=0.33))
    assert d.regime is Regime.NETWORK_LIMITED


def test_a_delay_beside_a_queue_of_seconds_does_not_bind() -> None:
    # v17: network. 130 ms of an 8.8 s P99 excess is 1.5 %: the queue's breach.
    d = classify(dataclasses.replace(DELAYED, ttft_p50_s=5.0, ttft_p99_s=9.0, **QUEUED))
    assert d.regime is Regime.QUEUE_LIMITED
    assert Regime.NETWORK_LIMITED not in d.secondary


@pytest.mark.parametrize(
    ("p99_excess_s", "regime"),
    [
        (0.50, Regime.NETWORK_LIMITED),  # 0.13 / 0.50 = 26 %: a quarter of the excess, the delay binds first
        (0.54, Regime.QUEUE_LIMITED),  # v17: network. 0.13 / 0.54 = 24 %: under a quarter, the queue binds
    ],
)
def test_a_quarter_of_the_p99_excess_is_the_bar(p99_excess_s: float, regime: Regime) -> None:
    # The median shows the delay and more (0.3 s over): the P99's excess, the SLO's, is the one judged.
    d = classify(dataclasses.replace(DELAYED, ttft_p50_s=0.38, ttft_p99_s=0.2 + p99_excess_s, **QUEUED))
    assert d.regime is regime


def test_a_delay_counts_where_two_fifths_of_it_show() -> None:
    # v17: healthy. 45 % of the step in the median's excess: shown (v17 asked 50 %); 35 %: not (a control).
    shown = classify(dataclasses.replace(DELAYED, ttft_p50_s=0.08 + 0.45 * DELAY_S, ttft_p99_s=0.25))
    assert shown.regime is Regime.NETWORK_LIMITED
    hidden = classify(dataclasses.replace(DELAYED, ttft_p50_s=0.08 + 0.35 * DELAY_S, ttft_p99_s=0.25))
    assert hidden.regime is Regime.HEALTHY


@pytest.mark.parametrize(
    ("waiting", "running", "regime"),
    [
        (1.0, 1.0, Regime.HEALTHY),  # v17: queue. One arrival between scheduling steps
        (2.0, 2.0, Regime.HEALTHY),  # v17: queue
        (2.0, 6.0, Regime.HEALTHY),  # v17: queue
        (3.0, 3.0, Regime.QUEUE_LIMITED),  # three wait: a standing queue
        (3.0, 16.0, Regime.HEALTHY),  # under a quarter of those running (``queue_leading_ratio``)
        (4.0, 16.0, Regime.QUEUE_LIMITED),
    ],
)
def test_the_gauge_only_queue_needs_three_waiting(waiting: float, running: float, regime: Regime) -> None:
    # No first token served in the window: the gauges at the ceiling are all there is to read.
    at_ceiling = dataclasses.replace(
        CLEAN, replicas=6.0, request_count=0.0, ttft_p50_s=None, ttft_p99_s=None,
        requests_waiting=waiting, requests_running=running,
    )  # fmt: skip
    assert classify(at_ceiling).regime is regime


def test_a_queue_after_a_share_drop_is_the_backlog_it_left() -> None:
    queue = dataclasses.replace(CLEAN, ttft_p50_s=2.0, ttft_p99_s=3.0, **QUEUED)
    assert classify(queue).regime is Regime.QUEUE_LIMITED
    d = classify(dataclasses.replace(queue, prior_gpu_share=0.4))  # v17: queue
    assert d.regime is Regime.COMPUTE_LIMITED and Regime.QUEUE_LIMITED in d.secondary
    # Below the controller's action bar: one window held; the next (no drop before it) reads the
    # queue on its own if it still stands.
    assert d.confidence == TAIL < ControlSettings().min_confidence
    assert any(e.signal == "verdict" and "backlog" in (e.note or "") for e in d.evidence)
    # A share the window does not report cannot say the co-tenant is still there.
    assert classify(dataclasses.replace(queue, prior_gpu_share=0.4, gpu_share=None)).regime is Regime.COMPUTE_LIMITED
    # No drop before (0.9 is the bar, not under it): the queue.
    assert classify(dataclasses.replace(queue, prior_gpu_share=0.9)).regime is Regime.QUEUE_LIMITED
    # The share still reduced now: the window's own share cut (v8), judged on its margin, not held.
    still = classify(dataclasses.replace(queue, prior_gpu_share=0.4, gpu_share=0.4))
    assert still.regime is Regime.COMPUTE_LIMITED and still.confidence > TAIL


def test_a_median_at_its_reference_does_not_let_a_queue_carry_the_delay() -> None:
    # v18 as first frozen: network 0.64. The median shows none of the step; the P99's 8.8 s excess
    # is the queue's, and 130 ms is 1.5 % of it.
    for median in (0.08, 0.07):
        d = classify(dataclasses.replace(DELAYED, ttft_p50_s=median, ttft_p99_s=9.0, **QUEUED))
        assert d.regime is Regime.QUEUE_LIMITED


@pytest.mark.parametrize(("p50", "p99"), [(0.18, 9.0), (0.38, 2.0), (0.08, 9.0), (0.21, 0.33)])
def test_removing_a_ttft_statistic_never_flips_a_confident_delay_verdict(p50: float, p99: float) -> None:
    # The missing-field rule on the delay's windows: v18 as first frozen read (0.18, 9.0) network
    # 0.64 whole and queue 0.86 without the median. Many requests, so no sampling cap hides it.
    window = dataclasses.replace(DELAYED, ttft_p50_s=p50, ttft_p99_s=p99, request_count=2000.0, **QUEUED)
    whole = classify(window)
    for field in ("ttft_p50_s", "ttft_p99_s"):
        less = classify(dataclasses.replace(window, **{field: None}))
        if whole.confidence >= CONFIDENT and less.confidence >= CONFIDENT:
            assert less.regime is whole.regime, field


@pytest.mark.parametrize(
    "window",
    [
        # A second review's counterexamples (v18 amended once): the P99's reference removed, the
        # prior derives one, and the delay's quarter bar moved with it.
        dict(wan_rtt_s=0.309, ref_ttft_p50_s=0.3, ref_ttft_p99_s=0.6, ttft_p50_s=1.8, ttft_p99_s=1.9),
        dict(wan_rtt_s=0.139, ref_ttft_p50_s=0.13, ref_ttft_p99_s=0.78, ttft_p50_s=0.83, ttft_p99_s=1.18),
        dict(wan_rtt_s=0.309, ref_ttft_p50_s=None, ref_ttft_p99_s=0.8, ttft_p50_s=2.82, ttft_p99_s=2.9),
    ],
)
def test_removing_the_p99_reference_never_flips_a_confident_delay_verdict(window: dict[str, float | None]) -> None:
    whole_window = dataclasses.replace(CLEAN, request_count=2000.0, **QUEUED, **window)  # type: ignore[arg-type]
    whole = classify(whole_window)
    for field in ("ref_ttft_p99_s", "ref_ttft_p50_s", "ttft_p50_s", "ttft_p99_s"):
        less = classify(dataclasses.replace(whole_window, **{field: None}))
        if whole.confidence >= CONFIDENT and less.confidence >= CONFIDENT:
            assert less.regime is whole.regime, field


def test_a_healthy_verdict_without_the_p99_while_requests_wait_is_capped() -> None:
    # The review's grid (the same in v17): a P99 over the SLO beside a median under its bar binds the
    # queue; without the P99 the window read a confident healthy.
    window = dataclasses.replace(CLEAN, ttft_p50_s=0.5, ttft_p99_s=1.0, ref_ttft_p50_s=0.3, ref_ttft_p99_s=0.6,
                                 requests_waiting=2.0, requests_running=12.0, replicas=6.0, request_count=2000.0)  # fmt: skip
    whole = classify(window)
    assert whole.regime is Regime.QUEUE_LIMITED and whole.confidence >= CONFIDENT
    less = classify(dataclasses.replace(window, ttft_p99_s=None))
    assert less.regime is Regime.HEALTHY and less.confidence < CONFIDENT
    # Nothing waiting: the P99 has no queue to show, and the healthy verdict stands confident.
    idle_queue = classify(dataclasses.replace(window, ttft_p99_s=None, requests_waiting=0.0))
    assert idle_queue.regime is Regime.HEALTHY and idle_queue.confidence >= CONFIDENT
