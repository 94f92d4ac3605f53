"""What every remedy reads (``Step``) and returns (``Proposal``), and the small rules they share (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field

from inferslice.actions import Action
from inferslice.control.forecast import Forecast
from inferslice.control.settings import TierPolicy
from inferslice.control.state import ControlEvent, ControlState, SliceState
from inferslice.diagnosis import Diagnosis, Regime

Q, N, C = Regime.QUEUE_LIMITED, Regime.NETWORK_LIMITED, Regime.COMPUTE_LIMITED
FORECAST, RECLAIM, ROLLBACK = "forecast", "reclaim", "rollback"


@dataclass(frozen=True)
class Step:
    """One tier's window as every remedy sees it."""

    diagnosis: Diagnosis | None
    ss: SliceState
    p: TierPolicy
    st: ControlState  # after this window's observation and outcome checks
    now_s: float
    arrivals_rps: float | None  # the forecast's level: arrivals smoothed over windows
    forecast: Forecast | None  # one cold start ahead
    compound: bool  # the same window's verdict also names the network
    ineffective: frozenset[tuple[str, str]]  # (cause, action kind) that did not help in this episode: not repeated
    previous: ControlState | None = None  # the state before this window (the previous forecast, the level it moved from)

    @property
    def confidence(self) -> float:
        return self.diagnosis.confidence if self.diagnosis is not None else 0.0

    @property
    def target(self) -> int:
        return self.ss.replicas_target


@dataclass(frozen=True)
class ReplicaWish:
    """A remedy's replica count; the largest wish of the window is the one decided."""

    n: int
    cause: str
    reason: str
    delay_s: float  # how long after it applies its cause should have cleared


@dataclass
class Proposal:
    actions: list[Action] = field(default_factory=list)
    replicas: ReplicaWish | None = None
    events: list[ControlEvent] = field(default_factory=list)
    at_ceiling: bool = False  # the remedy wants capacity the ceiling or quota does not allow
    holding: bool = False  # a replica remedy waits this window: no forecast pre-scale in its place either


def cold_start_s(st: ControlState, p: TierPolicy) -> float:
    return st.cold_start_s if st.cold_start_s is not None else p.cold_start_s


def rate_per_replica(st: ControlState, p: TierPolicy) -> float:
    """The measured per-replica service rate (the configured prior until measured)."""
    # A stalled window (nothing served while a queue stands) measures ~0: never size from below a tenth of the prior.
    rate = st.service_rate_rps if st.service_rate_rps else p.service_rate_prior_rps
    return max(rate, 0.1 * p.service_rate_prior_rps)


def held_event(step: Step, r: Regime, why: str) -> ControlEvent | None:
    """Say once per episode (its first window) that a remedy waits, not every window it does."""
    if dict(step.st.streaks).get(r.value, 0) <= 1:
        return ControlEvent(step.now_s, step.p.tier, "held", why, r.value)
    return None


def at_ceiling_event(p: TierPolicy, ss: SliceState, now_s: float, cause: Regime) -> ControlEvent:
    n = ss.replicas_target
    return ControlEvent(
        now_s,
        p.tier,
        "at_ceiling",
        f"{p.tier} is {cause.value} at its ceiling: {n}/{p.replicas_max} replicas, {n * p.gpu_per_replica:g} of {p.gpu_quota:g} GPU quota;"
        f" admission policy {p.admission_policy}; not acting outside the tier's guarantee",
        cause.value,
    )
