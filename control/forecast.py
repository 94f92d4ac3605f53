"""Arrival-rate forecast: Holt's linear trend (ETS(A,A,N)) with an analytic prediction interval.

Why Holt: the demand the controller must get ahead of is a ramp (a load step, the rising side of a
diurnal curve) seen over a horizon of one cold start, i.e. a few tens of windows. Over that horizon
a local level plus a local trend is the right shape; seasonality cannot be fitted from the history a
compressed run holds, and ARIMA/Prophet (Dynamo's options) need far more of it. Holt needs two
smoothing constants, updates in O(1) from each window, and its state-space form gives the
h-step-ahead variance in closed form (Hyndman & Athanasopoulos, FPP3 table 8.8):

    var_h = sigma^2 * (1 + (h - 1) * (alpha^2 + alpha*beta*h + beta^2*h*(2h - 1)/6))

with h in windows. Windows may be irregular, so the trend is kept per second and h = horizon / the
mean window. The controller pre-scales for ``upper`` (the one-sided bound at ``z``), so a forecast
that is wrong in the safe direction costs replica-seconds, not SLO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class HoltState:
    level: float | None = None  # requests/s
    trend_per_s: float = 0.0
    var: float = 0.0  # EWMA of squared one-step errors (requests/s)^2
    last_s: float | None = None
    mean_dt_s: float = 0.0
    samples: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def holt_from_dict(data: dict[str, Any]) -> HoltState:
    return HoltState(**data)


@dataclass(frozen=True)
class Forecast:
    at_s: float  # the time forecast for
    mean: float
    upper: float  # one-sided prediction bound
    samples: int


def update(state: HoltState, y: float, now_s: float, alpha: float, beta: float) -> HoltState:
    """Feed one window's arrival rate observed at ``now_s``."""
    if state.level is None or state.last_s is None:
        return HoltState(level=y, trend_per_s=0.0, var=0.0, last_s=now_s, mean_dt_s=0.0, samples=1)
    dt = now_s - state.last_s
    if dt <= 0:
        return state  # a repeated or out-of-order window: no new information
    predicted = state.level + state.trend_per_s * dt
    err = y - predicted
    level = alpha * y + (1 - alpha) * predicted
    trend = beta * (level - state.level) / dt + (1 - beta) * state.trend_per_s
    n = state.samples + 1
    var = err * err if state.samples == 1 else (1 - alpha) * state.var + alpha * err * err
    mean_dt = dt if state.mean_dt_s == 0 else 0.8 * state.mean_dt_s + 0.2 * dt
    return replace(state, level=level, trend_per_s=trend, var=var, last_s=now_s, mean_dt_s=mean_dt, samples=n)


def predict(state: HoltState, horizon_s: float, alpha: float, beta: float, z: float, min_samples: int) -> Forecast | None:
    """The forecast ``horizon_s`` after the last window; ``None`` until ``min_samples`` windows."""
    if state.level is None or state.last_s is None or state.samples < min_samples:
        return None
    horizon_s = max(0.0, horizon_s)
    mean = max(0.0, state.level + state.trend_per_s * horizon_s)
    h = max(1.0, horizon_s / state.mean_dt_s) if state.mean_dt_s > 0 else 1.0
    var_h = state.var * (1 + (h - 1) * (alpha**2 + alpha * beta * h + beta**2 * h * (2 * h - 1) / 6))
    upper = mean + z * math.sqrt(max(0.0, var_h))
    return Forecast(at_s=state.last_s + horizon_s, mean=mean, upper=upper, samples=state.samples)
