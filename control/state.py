"""What ``decide`` reads about a tier (``SliceState``) and what it carries between calls (``ControlState``).

``ControlState`` is plain data: the controller persists it (``to_dict`` / ``control_state_from_dict``)
in the same transaction as the actions it decided, so a restart resumes exactly where it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from inferslice.actions import ActionKind
from inferslice.control.forecast import HoltState, holt_from_dict
from inferslice.placement import ReplicaPlacement
from inferslice.snapshot import SliceSnapshot


@dataclass(frozen=True)
class SliceState:
    """One tier as the controller sees it this window: actuated state plus measurements."""

    tier: str
    replicas_target: int
    replicas: tuple[ReplicaPlacement, ...] = ()
    cap_bps: float | None = None  # the tier's client-edge cap now; None = uncapped
    snapshot: SliceSnapshot | None = None
    free_gpu: Mapping[str, float] = field(default_factory=dict)  # slot -> GPU fraction free AND guaranteed to no tier
    pop_rtt_s: Mapping[str, float] = field(default_factory=dict)  # PoP -> RTT to the client gateway
    pop_headroom_bps: Mapping[str, float] = field(default_factory=dict)  # PoP -> bandwidth this tier could get to clients from there
    pair_rtt_s: Mapping[str, float] = field(default_factory=dict)  # "a|b" (sorted) -> RTT between two PoPs
    relocatable: bool = True  # False: the backend cannot move replicas (compute then scales out within quota)
    path_excess_s: Mapping[str, float] = field(default_factory=dict)  # PoP -> its WAN path's measured RTT above the configured one

    @property
    def replicas_ready(self) -> int:
        return sum(1 for r in self.replicas if r.state == "ready")


@dataclass(frozen=True)
class Check:
    """An applied action awaiting its outcome check."""

    action_id: str
    kind: ActionKind
    cause: str  # the regime it answered, "forecast" or "reclaim"
    value: float | str | None
    previous: float | str | None
    expected_by_s: float
    delay_s: float  # how long after it takes effect the cause should have cleared
    applied: bool = False  # the shell marks it; unapplied (dry-run, pending approval) checks never judge
    applied_s: float | None = None  # when it took effect (the shell marks it)
    in_force_s: float | None = None  # when the tier first showed its value (replicas ready, the cap reported): windows judge it from then
    replica: str | None = None  # a relocation's replica: the knob it turned


@dataclass(frozen=True)
class ControlEvent:
    at_s: float
    tier: str
    kind: str  # at_ceiling | effective | insufficient | ineffective | superseded | unjudged | held | budget_exhausted | measured | mode
    message: str
    cause: str | None = None
    action_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ControlState:
    tier: str = ""
    seq: int = 0  # decisions made; part of every action id, so a re-run after a crash yields the same ids
    forecast: HoltState = field(default_factory=HoltState)
    forecast_for_s: float | None = None  # the last forecast, for "forecast vs actual"
    forecast_mean: float | None = None
    forecast_upper: float | None = None
    service_rate_rps: float | None = None  # measured requests/s per ready replica while saturated
    cold_start_s: float | None = None  # measured: scale-out decided -> replicas ready
    scale_out_since_s: float | None = None
    scale_out_to: int | None = None
    healthy_since_s: float | None = None
    last_waiting: float | None = None  # for arrivals = served + d(waiting)/dt while a queue hides demand
    last_window_s: float | None = None
    checks: tuple[Check, ...] = ()
    ineffective: tuple[tuple[str, str], ...] = ()  # (cause, action kind) that did not help: never repeated within this episode
    # (cause, action kind) whose last step was too little (a raise the link fills): the next step
    # finishes it even where a met SLO would hold a first one (an estimate under a binding cap is low)
    insufficient: tuple[tuple[str, str], ...] = ()
    finished: tuple[tuple[str, str], ...] = ()  # those finished once this episode: a second fill is held again (no chain to the budget)
    at_ceiling: bool = False
    streaks: tuple[tuple[str, int], ...] = ()  # (regime, consecutive diagnosis windows it has been binding)
    streak_window_s: float | None = None  # the diagnosis window the streaks last counted
    network_seen_s: float | None = None  # when the link last bound (pinned at its cap or a network verdict)
    contended_seen_s: float | None = None  # when a ready replica last reported a reduced GPU share
    bits_per_token: float | None = None  # learned on the wire from windows whose link does not bind
    tokens_per_request: float | None = None  # likewise
    events: tuple[ControlEvent, ...] = ()  # produced by the latest decision only

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["checks"] = [{**asdict(c), "kind": c.kind.value} for c in self.checks]
        out["ineffective"] = [list(f) for f in self.ineffective]
        out["insufficient"] = [list(f) for f in self.insufficient]
        out["finished"] = [list(f) for f in self.finished]
        out["streaks"] = [list(x) for x in self.streaks]
        return out


def control_state_from_dict(data: Mapping[str, Any]) -> ControlState:
    return ControlState(
        tier=str(data.get("tier", "")),
        seq=int(data.get("seq", 0)),
        forecast=holt_from_dict(dict(data.get("forecast") or {})),
        forecast_for_s=data.get("forecast_for_s"),
        forecast_mean=data.get("forecast_mean"),
        forecast_upper=data.get("forecast_upper"),
        service_rate_rps=data.get("service_rate_rps"),
        cold_start_s=data.get("cold_start_s"),
        scale_out_since_s=data.get("scale_out_since_s"),
        scale_out_to=data.get("scale_out_to"),
        healthy_since_s=data.get("healthy_since_s"),
        last_waiting=data.get("last_waiting"),
        last_window_s=data.get("last_window_s"),
        checks=tuple(Check(**{**c, "kind": ActionKind(c["kind"])}) for c in data.get("checks", [])),
        # "futile": what a trail written before the outcome names changed calls it
        ineffective=tuple((str(a), str(b)) for a, b in data.get("ineffective", data.get("futile", []))),
        insufficient=tuple((str(a), str(b)) for a, b in data.get("insufficient", [])),
        finished=tuple((str(a), str(b)) for a, b in data.get("finished", [])),
        at_ceiling=bool(data.get("at_ceiling", False)),
        streaks=tuple((str(r), int(n)) for r, n in data.get("streaks", [])),
        streak_window_s=data.get("streak_window_s"),
        network_seen_s=data.get("network_seen_s"),
        contended_seen_s=data.get("contended_seen_s"),
        bits_per_token=data.get("bits_per_token"),
        tokens_per_request=data.get("tokens_per_request"),
        events=tuple(ControlEvent(**e) for e in data.get("events", [])),
    )


def mark_applied(state: ControlState, action_id: str, applied_s: float) -> ControlState:
    """The shell applied ``action_id`` at ``applied_s``: arm its outcome check from then on (an
    action approved late is judged from when it took effect, not from when it was proposed)."""
    checks = tuple(
        replace(c, expected_by_s=applied_s + c.delay_s, applied=True, applied_s=applied_s)
        if c.action_id == action_id and not c.applied
        else c
        for c in state.checks
    )
    scaling = any(c.action_id == action_id and c.kind is ActionKind.SET_REPLICAS for c in state.checks)
    since = applied_s if scaling and state.scale_out_to is not None else state.scale_out_since_s
    return replace(state, checks=checks, scale_out_since_s=since)


def drop_check(state: ControlState, action_id: str) -> ControlState:
    """The action was rejected, refused or only dry-run: nothing to judge."""
    return replace(state, checks=tuple(c for c in state.checks if c.action_id != action_id))
