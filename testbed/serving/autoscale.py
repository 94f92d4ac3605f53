"""Ray Serve's default autoscaling policy as a pure function of samples and a clock passed in.

desired = ceil(mean ongoing requests over look_back_period_s / target_ongoing_requests), clamped to
[replicas_min, replicas_max]; a change is applied only after the desire has pointed the same way
for upscale_delay_s (up) or downscale_delay_s (down), as Ray's decision counters do.

Every function returns a new state (like ``bottleneck.episodes.step``); none mutates its input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class AutoscaleSettings:
    target_ongoing_requests: float
    replicas_min: int
    replicas_max: int
    look_back_period_s: float
    upscale_delay_s: float
    downscale_delay_s: float


@dataclass(frozen=True)
class AutoscaleState:
    samples: tuple[tuple[float, float], ...] = ()  # (time_s, ongoing), oldest first, within the look-back
    direction: int = 0  # +1 wants more, -1 wants fewer, 0 content
    since_s: float = 0.0
    desired: int = 0


def observe(state: AutoscaleState, settings: AutoscaleSettings, now_s: float, ongoing: float) -> AutoscaleState:
    """The state with one more sample, samples older than the look-back period dropped."""
    horizon = now_s - settings.look_back_period_s
    kept = tuple(s for s in (*state.samples, (now_s, ongoing)) if s[0] >= horizon)
    return replace(state, samples=kept)


def desired_replicas(state: AutoscaleState, settings: AutoscaleSettings) -> int:
    if not state.samples:
        return settings.replicas_min
    mean = sum(v for _, v in state.samples) / len(state.samples)
    want = math.ceil(mean / settings.target_ongoing_requests - 1e-9)
    return max(settings.replicas_min, min(settings.replicas_max, want))


def decide(state: AutoscaleState, settings: AutoscaleSettings, now_s: float, current: int) -> tuple[int, AutoscaleState]:
    """The target to apply now (``current`` unless a consistent desire has outlasted its delay), and the new state."""
    want = desired_replicas(state, settings)
    direction = (want > current) - (want < current)
    since = now_s if direction != state.direction else state.since_s
    new = replace(state, desired=want, direction=direction, since_s=since)
    delay = settings.upscale_delay_s if direction > 0 else settings.downscale_delay_s
    if direction != 0 and now_s - since >= delay:
        return want, replace(new, direction=0)
    return current, new


def step(
    state: AutoscaleState, settings: AutoscaleSettings, now_s: float, ongoing: float, current: int
) -> tuple[int, AutoscaleState]:
    """One tick: observe ``ongoing`` at ``now_s``, then decide from ``current``."""
    return decide(observe(state, settings, now_s, ongoing), settings, now_s, current)
