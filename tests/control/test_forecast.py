"""Holt forecast: extrapolates a ramp, widens with the horizon and with noise, waits for samples."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferslice.control.forecast import HoltState, predict, update

A, B, Z = 0.5, 0.2, 1.28


def _feed(values: list[float], dt: float = 2.0) -> HoltState:
    s = HoltState()
    for i, v in enumerate(values):
        s = update(s, v, dt * i, A, B)
    return s


def test_linear_ramp_is_extrapolated() -> None:
    s = _feed([0.1 * i for i in range(40)])  # 0.05 req/s per second
    fc = predict(s, 8.0, A, B, Z, 4)
    assert fc is not None
    assert fc.mean == pytest.approx(0.1 * 39 + 0.05 * 8.0, rel=0.02)
    assert fc.at_s == pytest.approx(78.0 + 8.0)


def test_no_forecast_before_min_samples() -> None:
    assert predict(_feed([1.0, 2.0, 3.0]), 8.0, A, B, Z, 4) is None


def test_interval_widens_with_noise_and_horizon() -> None:
    rng = random.Random(1)
    calm = _feed([2.0] * 30)
    noisy = _feed([2.0 + rng.uniform(-1, 1) for _ in range(30)])
    fc_calm, fc_noisy = predict(calm, 8.0, A, B, Z, 4), predict(noisy, 8.0, A, B, Z, 4)
    far = predict(noisy, 40.0, A, B, Z, 4)
    assert fc_calm is not None and fc_noisy is not None and far is not None
    assert fc_calm.upper - fc_calm.mean == pytest.approx(0.0, abs=1e-9)
    assert fc_noisy.upper - fc_noisy.mean > 0.1
    assert far.upper - far.mean > fc_noisy.upper - fc_noisy.mean


@given(st.lists(st.floats(0, 100), min_size=4, max_size=50), st.floats(0, 100))
def test_upper_never_below_mean_and_mean_never_negative(values: list[float], horizon: float) -> None:
    fc = predict(_feed(values), horizon, A, B, Z, 4)
    assert fc is not None and fc.mean >= 0 and fc.upper >= fc.mean
