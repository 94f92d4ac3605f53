"""Arrival rate, per-replica service rate and the replicas they call for: the one estimator (pure).

``decide`` (from each diagnosis window: the served request rate and the router queue) and the Ray
Serve ``QueuePolicy`` (from the replicas' finished-request counters and Serve's queue) both size a
queue-limited tier with these; neither keeps a copy of the formulas.

- arrivals = what was served per second + the queue's growth per second (a standing queue hides
  demand: the requests it gained arrived but were not served);
- service rate per replica = served per second / busy replicas, learned (EWMA) only from windows in
  which every replica was busy (a queue stood through the window), so it measures capacity, not load;
- replicas = ceil((arrivals + backlog / drain_s) / (rate x target utilisation)): serve the arrivals
  and drain the backlog within ``drain_s`` without running at saturation.
"""

from __future__ import annotations

import math


def arrival_rate(served_rps: float, waiting: float | None, waiting_before: float | None, dt_s: float | None) -> float:
    """Requests/s arriving: served plus the queue's growth since the last sample ``dt_s`` ago."""
    if waiting is None or waiting_before is None or dt_s is None or dt_s <= 0:
        return served_rps
    return served_rps + max(0.0, (waiting - waiting_before) / dt_s)


def service_rate(previous_rps: float | None, served_rps: float, busy_replicas: int, weight: float) -> float | None:
    """The per-replica service rate after one saturated sample (EWMA weight ``weight``); unchanged without busy replicas."""
    if busy_replicas <= 0:
        return previous_rps
    sample = served_rps / busy_replicas
    return sample if previous_rps is None else (1 - weight) * previous_rps + weight * sample


def replicas_for(arrivals_rps: float, backlog: float, drain_s: float, rate_rps: float, utilisation: float) -> int:
    """Replicas that serve ``arrivals_rps`` and drain ``backlog`` requests within ``drain_s`` at ``utilisation``."""
    need = (arrivals_rps + backlog / drain_s) / (rate_rps * utilisation)
    return math.ceil(min(need, 1e6) - 1e-9)


def short_of_capacity(n: int, current: int, starting: bool) -> int:
    """A queue stands and nothing is starting: capacity is short whatever the estimate says, so one more."""
    return max(n, current + 1) if not starting else n
