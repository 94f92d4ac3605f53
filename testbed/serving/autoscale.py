"""Ray Serve's default autoscaling policy as a pure function of samples and a clock passed in.

desired = ceil(mean ongoing requests over look_back_period_s / target_ongoing_requests), clamped to
[replicas_min, replicas_max]; a change is applied only after the desire has pointed the same way
for upscale_delay_s (up) or downscale_delay_s (down), as Ray's decision counters do.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class AutoscaleSettings:
    target_ongoing_requests: float
    replicas_min: int
    replicas_max: int
    look_back_period_s: float
    upscale_delay_s: float
    downscale_delay_s: float


@dataclass
class AutoscaleState:
    samples: deque[tuple[float, float]] = field(default_factory=deque)  # (time_s, ongoing)
    direction: int = 0  # +1 wants more, -1 wants fewer, 0 content
    since_s: float = 0.0
    desired: int = 0


def observe(state: AutoscaleState, settings: AutoscaleSettings, now_s: float, ongoing: float) -> None:
    state.samples.append((now_s, ongoing))
    while state.samples and state.samples[0][0] < now_s - settings.look_back_period_s:
        state.samples.popleft()


def desired_replicas(state: AutoscaleState, settings: AutoscaleSettings) -> int:
    if not state.samples:
        return settings.replicas_min
    mean = sum(v for _, v in state.samples) / len(state.samples)
    want = math.ceil(mean / settings.target_ongoing_requests - 1e-9)
    return max(settings.replicas_min, min(settings.replicas_max, want))


def decide(state: AutoscaleState, settings: AutoscaleSettings, now_s: float, current: int) -> int:
    """The target to apply now (``current`` unless a consistent desire has outlasted its delay)."""
    want = desired_replicas(state, settings)
    state.desired = want
    direction = (want > current) - (want < current)
    if direction != state.direction:
        state.direction = direction
        state.since_s = now_s
    if direction > 0 and now_s - state.since_s >= settings.upscale_delay_s:
        state.direction = 0
        return want
    if direction < 0 and now_s - state.since_s >= settings.downscale_delay_s:
        state.direction = 0
        return want
    return current
