"""The paper's two experiments as step lists, time-compressed but otherwise as published.

- ``differentiation``: client concurrency 2 -> 32 against each tier, no cap (the brief's service
  differentiation figure).
- ``client-bandwidth``: concurrency 10, 16, 32 x caps {uncapped, just above demand, 0.5 Mbit/s}
  per tier (the brief's network-limited signature). "Just above demand" is measured, not guessed:
  the uncapped step at the same concurrency runs first and the cap is set to ``demand_headroom``
  times the receive rate it measured (the paper's 1 Mbit/s for a 0.9 Mbit/s demand is 1.1x).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inferslice.errors import ConfigError

DIFFERENTIATION_CONCURRENCY = (2, 4, 8, 12, 16, 20, 24, 28, 32)
BANDWIDTH_CONCURRENCY = (10, 16, 32)
LOW_CAP_BPS = 0.5e6  # the paper's binding cap
SCENARIOS = ("differentiation", "client-bandwidth", "smoke")


@dataclass(frozen=True)
class Step:
    scenario: str
    tier: str
    concurrency: int
    cap: str  # "none" | "demand" | "fixed"
    cap_bps: float | None = None  # for cap == "fixed"


@dataclass(frozen=True)
class ScenarioSettings:
    step_duration_s: float = 24.0  # the 20-30 s per step; long enough for several P99 samples per tier
    warmup_s: float = 4.0  # requests started in the first seconds of a step see the previous step's state
    demand_headroom: float = 1.15  # "a cap just above demand": paper 1.0 Mbit/s over a 0.9 Mbit/s demand
    seed: int = 0  # workloads are seeded so reruns compare like with like
    tiers: tuple[str, ...] = field(default=())  # empty = every tier in the topology
    concurrency: tuple[int, ...] = field(default=())  # empty = the scenario's own sweep
    drain_timeout_s: float = 10.0  # in-flight streams may finish this long after the step (a cap makes them slow); later ones are cut
    settle_s: float = 2.0
    # None: pinned for client-bandwidth (a link experiment on settled tiers), autoscaling for the rest,
    # as the paper's differentiation tiers autoscaled.
    pin_replicas: bool | None = None  # pause between steps so in-flight streams of the last step drain


def steps_for(scenario: str, tiers: list[str], settings: ScenarioSettings) -> list[Step]:
    if scenario not in SCENARIOS:
        raise ConfigError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}", "scenario")
    chosen = [t for t in tiers if not settings.tiers or t in settings.tiers]
    if settings.tiers and len(chosen) != len(settings.tiers):
        unknown = sorted(set(settings.tiers) - set(tiers))
        raise ConfigError(f"unknown tiers {unknown}", "tiers")
    steps: list[Step] = []
    if scenario == "differentiation":
        levels = settings.concurrency or DIFFERENTIATION_CONCURRENCY
        for tier in chosen:
            steps.extend(Step(scenario, tier, c, "none") for c in levels)
    elif scenario == "client-bandwidth":
        levels = settings.concurrency or BANDWIDTH_CONCURRENCY
        for tier in chosen:
            for c in levels:
                steps.append(Step(scenario, tier, c, "none"))
                steps.append(Step(scenario, tier, c, "demand"))
                steps.append(Step(scenario, tier, c, "fixed", LOW_CAP_BPS))
    else:  # smoke: one short uncapped and one capped step per tier, for CI
        levels = settings.concurrency or (4,)
        for tier in chosen:
            for c in levels:
                steps.append(Step(scenario, tier, c, "none"))
                steps.append(Step(scenario, tier, c, "fixed", LOW_CAP_BPS))
    return steps
