"""The queue part of the inferslice policy as a Ray Serve custom autoscaling policy.

A Ray user adopts it without the rest of the platform:

    autoscaling_config={"min_replicas": 1, "max_replicas": 4,
        "policy": {"policy_function": "inferslice.control.actuators.rayserve_policy:QueuePolicy",
                   "policy_kwargs": {"queue_drain_s": 10}}}

Sizing (as ``control.policy`` does for a queue-limited tier, without the attribution): replicas =
ceil((arrivals + queued / queue_drain_s) / (per-replica service rate x target_utilisation)), where
arrivals = measured throughput + the queue's growth, and the service rate is the throughput per
replica measured while a queue stood (every replica busy). While a queue stands and the estimate
does not exceed the current count, one more replica is asked for (capacity is short, whatever the
estimate). Scale-in only after ``scale_in_after_s`` without a queue, one replica at a time, to the
count the arrivals need. Throughput comes from the replicas' ``finished_requests`` counter
(``record_autoscaling_stats``); a deployment without it is sized on ongoing requests per replica.

The estimates and the sizing are ``control.rates``, the same functions ``control.policy`` sizes with.
``decide`` is pure (state in, state out, clock passed in); ``QueuePolicy`` adapts it to Ray's
``AutoscalingContext`` (Ray instantiates a class policy once, with ``policy_kwargs``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from inferslice.control.rates import arrival_rate, replicas_for, service_rate, short_of_capacity

FINISHED_METRIC = "finished_requests"


@dataclass(frozen=True)
class QueuePolicySettings:
    queue_drain_s: float = 10.0  # drain the standing queue within this (control.policy's default horizon)
    target_utilisation: float = 0.8  # plan replicas below saturation so the queue does not re-form at once
    scale_in_after_s: float = 30.0  # no queue for this long before giving a replica back
    target_ongoing_requests: float = 2.0  # fallback sizing before a service rate is measured (Ray's default)
    service_rate_rps: float | None = None  # per-replica requests/s if known; None: measured
    rate_smoothing: float = 0.5  # EWMA weight of a new service-rate measurement
    sample_s: float = 2.0  # Ray calls the policy every 0.1 s; rates over shorter gaps are noise


@dataclass(frozen=True)
class Observation:
    now_s: float
    current: int  # replicas the deployment targets now
    running: int  # replicas running now (fewer than ``current`` while some start)
    queued: float  # requests waiting for a replica slot (Serve's handle queue)
    ongoing: float  # running + queued
    finished_total: float | None  # sum of the replicas' finished-request counters; None: not reported
    lo: int
    hi: int


@dataclass(frozen=True)
class PolicyState:
    last_s: float | None = None  # time of the last rate sample
    last_finished: float | None = None
    last_queued: float = 0.0
    service_rate_rps: float | None = None  # per replica, measured under a standing queue
    arrivals_rps: float | None = None
    queue_free_since_s: float | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PolicyState:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def _sample(obs: Observation, st: PolicyState, s: QueuePolicySettings) -> PolicyState:
    """Rates from the counters when a sampling interval has passed; else the state unchanged."""
    if obs.finished_total is None:
        return st
    if st.last_s is None or st.last_finished is None:
        return replace(st, last_s=obs.now_s, last_finished=obs.finished_total, last_queued=obs.queued)
    dt = obs.now_s - st.last_s
    if dt < s.sample_s:
        return st
    throughput = max(0.0, obs.finished_total - st.last_finished) / dt  # a replica that left takes its count: clamp
    mu = st.service_rate_rps
    if obs.queued > 0 and st.last_queued > 0:  # every running replica was busy for the whole interval
        mu = service_rate(mu, throughput, obs.running, s.rate_smoothing)
    arrivals = arrival_rate(throughput, obs.queued, st.last_queued, dt)
    return PolicyState(obs.now_s, obs.finished_total, obs.queued, mu, arrivals, st.queue_free_since_s)


def decide(obs: Observation, st: PolicyState, s: QueuePolicySettings) -> tuple[int, PolicyState, str]:
    """(replicas, new state, reason)."""
    st = _sample(obs, st, s)
    free_since = None if obs.queued > 0 else (st.queue_free_since_s if st.queue_free_since_s is not None else obs.now_s)
    st = replace(st, queue_free_since_s=free_since)
    starting = obs.running < obs.current

    def clamp(n: int) -> int:
        return max(obs.lo, min(obs.hi, n))

    mu = s.service_rate_rps or st.service_rate_rps
    if obs.queued > 0:
        if mu and st.arrivals_rps is not None:
            n = replicas_for(st.arrivals_rps, obs.queued, s.queue_drain_s, mu, s.target_utilisation)
            why = f"queue {obs.queued:.1f}: {st.arrivals_rps:.2f} req/s at {mu:.2f} req/s per replica"
        else:
            n = math.ceil(obs.ongoing / s.target_ongoing_requests - 1e-9)
            why = f"queue {obs.queued:.1f}, no service rate yet: {obs.ongoing:.1f} ongoing"
        n = short_of_capacity(n, obs.current, starting)
        return clamp(max(n, obs.current)), st, why
    if mu and st.arrivals_rps is not None and free_since is not None and obs.now_s - free_since >= s.scale_in_after_s:
        need = max(1, math.ceil(st.arrivals_rps / (mu * s.target_utilisation) - 1e-9))
        if need < obs.current:
            return clamp(obs.current - 1), replace(st, queue_free_since_s=obs.now_s), "no queue: one replica back"
    return clamp(obs.current), st, "hold"


class QueuePolicy:
    """Ray Serve class policy: ``QueuePolicy(**policy_kwargs)(ctx) -> (replicas, policy_state)``."""

    def __init__(self, **kwargs: Any) -> None:
        self.settings = QueuePolicySettings(**kwargs)

    def __call__(self, ctx: Any) -> tuple[int, dict[str, Any]]:
        metrics = ctx.aggregated_metrics or {}
        finished = metrics.get(FINISHED_METRIC)
        obs = Observation(
            now_s=float(ctx.current_time),
            current=int(ctx.target_num_replicas),
            running=int(ctx.current_num_replicas),
            queued=float(ctx.total_queued_requests or 0.0),
            ongoing=float(ctx.total_num_requests or 0.0),
            finished_total=float(sum(finished.values())) if finished else None,
            lo=int(ctx.capacity_adjusted_min_replicas),
            hi=int(ctx.capacity_adjusted_max_replicas),
        )
        n, st, why = decide(obs, PolicyState.from_dict(dict(ctx.policy_state or {})), self.settings)
        return n, {**asdict(st), "reason": why}
