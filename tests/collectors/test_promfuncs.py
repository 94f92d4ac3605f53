"""rate and histogram_quantile against values Prometheus 2.42 computes (worked by hand from its code,
and cross-checked by tests/collectors/test_prometheus_parity.py against the real binary)."""

from __future__ import annotations

import math

import pytest

from inferslice.collectors.promfuncs import bucket_quantile, extrapolated_rate, finite_or_none

INF = math.inf


def test_rate_samples_on_both_edges_is_plain_slope() -> None:
    samples = [(float(t), float(t)) for t in range(0, 61, 10)]
    assert extrapolated_rate(samples, 0, 60) == pytest.approx(1.0)


def test_rate_extrapolates_to_edges_within_1_1_intervals() -> None:
    samples = [(10.0, 100.0), (20.0, 110.0), (30.0, 120.0), (40.0, 130.0), (50.0, 140.0)]
    # 40 over 40 s, extended by 10 s at each end (both gaps < 11 s): 40 * 60/40 / 60
    assert extrapolated_rate(samples, 0, 60) == pytest.approx(1.0)


def test_rate_extrapolates_half_an_interval_when_gaps_are_long() -> None:
    samples = [(20.0, 100.0), (30.0, 110.0), (40.0, 120.0)]
    # gaps of 20 s > 11 s: extend by 5 s each side: 20 * 30/20 / 60
    assert extrapolated_rate(samples, 0, 60) == pytest.approx(0.5)


def test_rate_does_not_extrapolate_below_counter_zero() -> None:
    samples = [(30.0, 5.0), (40.0, 15.0), (50.0, 25.0)]
    # zero would be reached 5 s before the first sample: extend 5 s at the start, 10 s at the end
    assert extrapolated_rate(samples, 0, 60) == pytest.approx(20 * 35 / 20 / 60)


def test_rate_counter_reset_adds_back_the_value_before_it() -> None:
    samples = [(0.0, 10.0), (10.0, 20.0), (20.0, 5.0), (30.0, 15.0)]
    # increase = (15 - 10) + 20 = 25 over 30 s
    assert extrapolated_rate(samples, 0, 30) == pytest.approx(25 / 30)


def test_increase_and_gauge_mode() -> None:
    samples = [(0.0, 10.0), (10.0, 20.0), (20.0, 5.0)]
    assert extrapolated_rate(samples, 0, 20, is_rate=False) == pytest.approx(15.0)  # (5-10)+20
    assert extrapolated_rate(samples, 0, 20, is_counter=False, is_rate=False) == pytest.approx(-5.0)


def test_rate_needs_two_samples() -> None:
    assert extrapolated_rate([(5.0, 1.0)], 0, 10) is None
    assert extrapolated_rate([], 0, 10) is None


BUCKETS = [(0.1, 10.0), (0.5, 60.0), (1.0, 90.0), (INF, 100.0)]


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (0.5, 0.1 + 0.4 * 40 / 50),  # rank 50 in (0.1, 0.5]
        (0.05, 0.1 * 5 / 10),  # lowest bucket interpolates from 0
        (0.9, 1.0),  # rank exactly at a bucket's cumulative count: its upper bound
        (0.99, 1.0),  # rank in +Inf: the highest finite bound
        (0.0, 0.0),
    ],
)
def test_bucket_quantile_interpolates_like_prometheus(q: float, expected: float) -> None:
    assert bucket_quantile(q, BUCKETS) == pytest.approx(expected)


def test_bucket_quantile_order_and_duplicates_do_not_matter() -> None:
    shuffled = [BUCKETS[2], BUCKETS[0], BUCKETS[3], BUCKETS[1]]
    assert bucket_quantile(0.5, shuffled) == pytest.approx(0.42)
    split = [(0.1, 4.0), (0.1, 6.0), (0.5, 60.0), (INF, 100.0)]  # "0.1" and "0.10" from two exporters
    assert bucket_quantile(0.05, split) == pytest.approx(0.05)


def test_bucket_quantile_edge_cases() -> None:
    assert math.isnan(bucket_quantile(0.5, [(0.1, 0.0), (INF, 0.0)]))  # no observations
    assert math.isnan(bucket_quantile(0.5, [(0.1, 1.0), (0.5, 2.0)]))  # no +Inf bucket
    assert math.isnan(bucket_quantile(0.5, [(INF, 5.0)]))  # one bucket
    assert bucket_quantile(1.5, BUCKETS) == INF
    assert bucket_quantile(-0.1, BUCKETS) == -INF
    assert bucket_quantile(0.2, [(-1.0, 5.0), (0.0, 10.0), (INF, 10.0)]) == -1.0  # lowest bound <= 0
    # non-monotonic counts (scraped at slightly different moments) are flattened
    assert bucket_quantile(0.5, [(0.1, 10.0), (0.5, 8.0), (INF, 20.0)]) == pytest.approx(0.1)


def test_finite_or_none() -> None:
    assert finite_or_none(math.nan) is None
    assert finite_or_none(INF) is None
    assert finite_or_none(0.0) == 0.0
