"""The queue policy as a Ray Serve custom autoscaling policy: pure sizing, and Ray's context adapted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inferslice.control.actuators.rayserve_policy import Observation, PolicyState, QueuePolicy, QueuePolicySettings, decide

S = QueuePolicySettings(queue_drain_s=10.0, target_utilisation=0.8, scale_in_after_s=30.0, sample_s=2.0)


def obs(now: float, current: int, queued: float, finished: float | None, running: int | None = None, ongoing: float = 0.0) -> Observation:
    return Observation(now, current, current if running is None else running, queued, ongoing or queued, finished, 1, 8)


def test_sized_from_measured_service_rate_and_backlog() -> None:
    # 2 replicas, both busy, finishing 2 req/s each (4 req/s), 20 queued and growing by 1 req/s.
    st = PolicyState()
    n, st, _ = decide(obs(0.0, 2, 10.0, 0.0), st, S)
    n, st, _ = decide(obs(10.0, 2, 20.0, 40.0), st, S)
    assert st.service_rate_rps == 2.0
    assert st.arrivals_rps == 5.0
    # (5 arrivals + 20 queued / 10 s) / (2 x 0.8) = 4.375 -> 5
    assert n == 5


def test_a_queue_with_nothing_starting_always_gets_one_more() -> None:
    st = PolicyState(last_s=0.0, last_finished=0.0, service_rate_rps=10.0, arrivals_rps=1.0)
    n, _, _ = decide(obs(1.0, 3, 1.0, 1.0), st, S)  # the estimate says 1, but a queue stands
    assert n == 4
    n, _, _ = decide(obs(1.0, 3, 1.0, 1.0, running=2), st, S)  # one is starting: wait for it
    assert n == 3


def test_scale_in_one_at_a_time_after_a_quiet_period() -> None:
    st = PolicyState(last_s=0.0, last_finished=0.0, service_rate_rps=2.0, arrivals_rps=1.0, queue_free_since_s=0.0)
    n, _, _ = decide(obs(10.0, 4, 0.0, 10.0), st, S)
    assert n == 4  # quiet for 10 s only
    n, st3, _ = decide(obs(31.0, 4, 0.0, 31.0), st, S)
    assert n == 3 and st3.queue_free_since_s == 31.0  # the quiet period restarts after each step down
    n, _, _ = decide(obs(40.0, 3, 0.0, 40.0), st3, S)
    assert n == 3


def test_bounds_and_no_metrics_fallback() -> None:
    n, _, why = decide(Observation(0.0, 2, 2, 30.0, 34.0, None, 1, 5), PolicyState(), S)
    assert n == 5 and "no service rate" in why  # ceil(34 / 2) = 17, clamped to max 5


@dataclass
class FakeContext:
    """The AutoscalingContext attributes the adapter reads."""

    current_time: float
    target_num_replicas: int
    current_num_replicas: int
    total_queued_requests: float
    total_num_requests: float
    capacity_adjusted_min_replicas: int = 1
    capacity_adjusted_max_replicas: int = 6
    policy_state: dict[str, Any] = field(default_factory=dict)
    aggregated_metrics: dict[str, dict[str, float]] = field(default_factory=dict)


def test_ray_adapter_carries_state_between_calls() -> None:
    policy = QueuePolicy(sample_s=1.0, queue_drain_s=5.0)
    ctx = FakeContext(0.0, 1, 1, 4.0, 6.0, aggregated_metrics={"finished_requests": {"r1": 0.0}})
    n, state = policy(ctx)
    assert n == 3 and state["last_finished"] == 0.0  # no rate yet: ceil(6 ongoing / 2)
    ctx2 = FakeContext(2.0, 3, 3, 6.0, 12.0, policy_state=state, aggregated_metrics={"finished_requests": {"r1": 4.0, "r2": 0.0}})
    n2, state2 = policy(ctx2)
    assert state2["service_rate_rps"] == 4.0 / 2.0 / 3  # 2 req/s over 3 busy replicas
    assert n2 == 6 and "reason" in state2
