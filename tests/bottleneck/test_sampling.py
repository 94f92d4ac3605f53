"""The order-statistic bound on a window's quantiles (bottleneck/sampling.py), against independent checks:
published table values, the closed-form bound computed by hand, and coverage by simulation."""

from __future__ import annotations

import math
import random

import pytest

from inferslice.bottleneck.sampling import MEDIAN_MIN_REQUESTS, TAIL_MIN_REQUESTS, binomial_cdf, bounded, min_requests, rank_interval


def test_binomial_cdf_matches_direct_sums() -> None:
    # Bin(4, 0.5): 1, 4, 6, 4, 1 over 16
    assert binomial_cdf(1, 4, 0.5) == pytest.approx(5 / 16)
    assert binomial_cdf(3, 4, 0.5) == pytest.approx(15 / 16)
    assert binomial_cdf(19, 20, 0.99) == pytest.approx(1 - 0.99**20)
    assert binomial_cdf(-1, 5, 0.3) == 0.0 and binomial_cdf(5, 5, 0.3) == 1.0


def test_median_interval_of_100_is_the_textbook_40th_to_61st() -> None:
    # Conover, Practical Nonparametric Statistics: n = 100, 95 % -> ranks 40 and 61.
    assert rank_interval(100, 0.5) == (40, 61)


def test_the_fewest_requests_that_bound_a_quantile() -> None:
    # q^n <= 0.025 by hand: 0.5^5 = 0.031 > 0.025 >= 0.5^6 = 0.016; 0.99^367 = 0.02501 > 0.025 >= 0.99^368.
    assert MEDIAN_MIN_REQUESTS == 6 and min_requests(0.5) == 6
    assert TAIL_MIN_REQUESTS == 368
    assert 0.99**367 > 0.025 >= 0.99**368
    assert min_requests(0.99, alpha=0.1) == math.ceil(math.log(0.05) / math.log(0.99))  # the one-sided 95 % bound: 299
    for q in (0.5, 0.9, 0.99):
        n = min_requests(q)
        lo, hi = rank_interval(n, q)
        assert lo >= 1 and hi <= n, (q, n, lo, hi)  # inside the sample at the bound
        assert rank_interval(n - 1, q)[1] == n  # one request fewer: no upper bound among the requests


def test_twenty_requests_bound_a_median_but_not_a_p99() -> None:
    assert bounded(20, 0.5) is True
    assert bounded(20, 0.99) is False
    assert bounded(None, 0.99) is None
    lo, hi = rank_interval(20, 0.99)
    assert hi == 21  # the true P99 may lie above every request of the window
    assert lo == 19  # ... and no lower than the second largest


@pytest.mark.parametrize(("n", "q"), [(12, 0.5), (60, 0.5), (400, 0.99), (1000, 0.99), (50, 0.9)])
def test_coverage_by_simulation(n: int, q: float) -> None:
    # Uniform(0, 1): the true q-quantile is q. The interval must cover it in >= 95 % of windows.
    lo, hi = rank_interval(n, q)
    rng = random.Random(n * 1000 + int(q * 100))
    trials, covered = 3000, 0
    for _ in range(trials):
        xs = sorted(rng.random() for _ in range(n))
        below = xs[lo - 1] if lo >= 1 else -math.inf
        above = xs[hi - 1] if hi <= n else math.inf
        covered += below <= q < above
    share = covered / trials
    assert share >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / trials), share  # 95 % up to sampling noise
    assert share <= 0.995  # not a vacuous interval


def test_bad_arguments_are_errors() -> None:
    with pytest.raises(ValueError):
        rank_interval(0, 0.5)
    with pytest.raises(ValueError):
        min_requests(1.0)
