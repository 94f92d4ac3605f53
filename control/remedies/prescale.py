"""No binding resource yet: pre-scale for the forecast arrival rate one cold start ahead (pure).

Only from a *measured* per-replica service rate (the configured prior alone pre-scaled a healthy
Standard 1 -> 3 in the testbed's diurnal scenario) and only when the forecast's upper bound exceeds
the measured capacity (replicas x rate x target utilisation) and the forecast mean itself outgrows
the replicas (a trend, not noise) in two windows running with the level still rising (not one burst);
sized for the upper bound. ``decide`` calls it only when no other
remedy wants replicas, none waits, and the network is neither the only binding resource nor settling.
"""

from __future__ import annotations

import math

from inferslice.actions import ActionKind
from inferslice.control.remedies.base import FORECAST, Proposal, ReplicaWish, Step, cold_start_s, rate_per_replica


def prescale_remedy(step: Step) -> Proposal:
    out = Proposal()
    fc, st, p, s = step.forecast, step.st, step.p, step.p.settings
    if fc is None or (FORECAST, ActionKind.SET_REPLICAS.value) in step.ineffective or not st.service_rate_rps:
        return out
    mu = rate_per_replica(st, p)
    target = step.target
    capacity = target * mu * s.target_utilisation
    if fc.upper <= capacity:
        return out
    n = min(math.ceil(min(fc.upper / (mu * s.target_utilisation), 1e6) - 1e-9), p.replicas_limit)
    n_mean = math.ceil(min(fc.mean / (mu * s.target_utilisation), 1e6) - 1e-9)
    lam = step.arrivals_rps
    # A trend, not one Poisson burst: the previous window's forecast mean had outgrown the replicas too and
    # the level is still rising. A burst moves Holt's level half-way and its trend with it, and the mean
    # stays high a window after (Premium at 2 req/s read 7 req/s once and pre-scaled 3 -> 6 on an upper
    # bound of 15 req/s); the level falls back in that window, a ramp's keeps rising.
    prev = step.previous
    if prev is not None:
        again = prev.forecast_mean is not None and math.ceil(min(prev.forecast_mean / (mu * s.target_utilisation), 1e6) - 1e-9) > target
        now_level, prev_level = st.forecast.level, prev.forecast.level
        if not (again and now_level is not None and prev_level is not None and now_level > prev_level):
            return out
    if n > target and n_mean > target and lam is not None and fc.mean > lam:
        horizon = cold_start_s(st, p)
        why = (
            f"forecast: {fc.upper:.2f} req/s (upper bound) by t+{horizon:.0f} s, one cold start ahead, over the measured"
            f" capacity {capacity:.2f} req/s ({target} x {mu:.2f} req/s per replica x {s.target_utilisation:.0%})"
        )
        out.replicas = ReplicaWish(n, FORECAST, why, max(0.0, fc.at_s - step.now_s))
    return out
