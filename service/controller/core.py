"""The control loop: the I/O shell around ``decide`` and ``guard`` (clock, verdict source, actuator injected).

    ctl = Controller(topology, policies, actuator, AuditLog(path), source, clock=time.time, mode=Mode.AUTO)
    ctl.tick()        # one step: drive recorded actions, observe, decide, guard, record, apply

Modes: ``auto`` applies what the guard allows; ``approve`` records it as pending until an operator
approves (``AuditLog.decide_approval``, the API's ``POST /v1/actions/{id}/approve``); ``dry-run``
computes and records, applies nothing (the outcome checks of dry-run actions never judge).

Crash safety (``kill -9`` anywhere): a decision is recorded with the states it implies in one
transaction before anything is applied; an action is marked ``applying`` before the actuator is
called and ``applied`` (with its outcome check armed) after; at start and on every tick, actions
left ``approved``, ``applying`` or ``in_progress`` are applied again, which the actuator's
idempotence by id turns into a no-op where the change already happened. Nothing decided is lost,
nothing is applied twice.

With ``leadership`` (the Lease elector, ``--backend kubernetes`` with two replicas) the Lease is
re-checked at the start of every step, immediately before every action is applied and before every
write the actuator and the trail make (``NotLeader`` ends the step, leaving everything as recorded).
An action whose recorded fencing token is an earlier term's than ours was recorded by a deposed
leader after we took over (``resume`` adopts what was unfinished before): it is refused, not applied.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from inferslice import metric_names as m
from inferslice.actions import (
    JUDGED_OUTCOMES,
    OUTCOME_APPLIED,
    OUTCOME_FAILED,
    OUTCOME_PENDING,
    OUTCOME_REJECTED,
    Action,
    ActionKind,
)
from inferslice.control.actuators.base import (
    Actuator,
    ApplyStatus,
    PermanentActuatorError,
    RetryableActuatorError,
    TierObservation,
)
from inferslice.control.actuators.fencing import Deposed, FencingToken, Leadership
from inferslice.control.guardrails import GuardState, guard
from inferslice.control.policy import decide
from inferslice.control.settings import TierPolicy
from inferslice.control.state import ControlEvent, ControlState, drop_check, mark_applied
from inferslice.control.view import cluster_view, slice_state
from inferslice.diagnosis import Diagnosis
from inferslice.errors import RetryableError
from inferslice.service.controller.audit import (
    APPLIED,
    APPLYING,
    APPROVED,
    DRY_RUN,
    FAILED,
    IN_PROGRESS,
    PENDING,
    REFUSED,
    TO_DRIVE,
    ActionTrail,
    Decided,
    action_of,
)
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology

log = logging.getLogger(__name__)

Verdict = tuple[Diagnosis | None, SliceSnapshot | None]
Source = Callable[[], Mapping[str, Verdict]]
ALL_TIERS = "*"  # the tier of an event about the whole controller (a mode switch)
MAX_ATTEMPTS = 5  # a retryable failure five ticks running is an outage the operator must see, not a retry loop


class Mode(enum.StrEnum):
    AUTO = "auto"
    APPROVE = "approve"
    DRY_RUN = "dry-run"


_INITIAL_STATE = {Mode.AUTO: APPROVED, Mode.APPROVE: PENDING, Mode.DRY_RUN: DRY_RUN}


class ControllerMetrics:
    """/metrics of the controller: desired vs applied per tier and kind, the outcomes, forecast vs actual."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.actions = Counter(
            m.CONTROL_ACTIONS.removesuffix("_total"), "control actions by outcome", ["slice", "kind", "outcome"], registry=r
        )
        self.desired = Gauge(m.CONTROL_DESIRED, "latest decided target (replicas, cap bit/s)", ["slice", "kind"], registry=r)
        self.applied = Gauge(m.CONTROL_APPLIED, "latest applied target (replicas, cap bit/s)", ["slice", "kind"], registry=r)
        self.forecast = Gauge(m.CONTROL_FORECAST, "forecast arrival rate one cold start ahead", ["slice", "bound"], registry=r)
        self.arrivals = Gauge(m.CONTROL_ARRIVALS, "arrival rate measured in the latest window", ["slice"], registry=r)
        self.at_ceiling = Gauge(m.CONTROL_AT_CEILING, "1 while a tier binds at its replica ceiling or quota", ["slice"], registry=r)
        self.last_tick = Gauge(m.CONTROL_LAST_TICK, "unix time of the latest completed control step", registry=r)

    def outcome(self, a: Action, outcome: str) -> None:
        self.actions.labels(a.slice, a.kind.value, outcome).inc()


@dataclass
class TickReport:
    now_s: float
    decided: list[Action]
    refused: int
    applied: list[str]
    events: list[ControlEvent]


class Controller:
    def __init__(
        self,
        topology: Topology,
        policies: Mapping[str, TierPolicy],
        actuator: Actuator,
        audit: ActionTrail,
        source: Source,
        clock: Callable[[], float],
        mode: Mode = Mode.AUTO,
        metrics: ControllerMetrics | None = None,
        pop_headroom_bps: Callable[[], Mapping[str, float]] | None = None,
        leadership: Leadership | None = None,
        path_excess_s: Callable[[], Mapping[str, float]] | None = None,
    ) -> None:
        self.topology = topology
        self.policies = dict(policies)
        self.actuator = actuator
        self.audit = audit
        self.source = source
        self.clock = clock
        self.mode = mode
        self.metrics = metrics or ControllerMetrics()
        self.pop_headroom_bps = pop_headroom_bps
        self.leadership = leadership  # None: the only controller
        self.path_excess_s = path_excess_s  # PoP -> its WAN path's RTT above the configured one (the prober's); None: unmeasured
        self.states, self.guard_state = audit.states()
        self.last_tick_s: float | None = None
        self.last_error: str | None = None
        self._dry_guard: GuardState | None = None
        # A step and a mode switch (the API's PUT /v1/control/mode, from another thread) never interleave.
        self._lock = threading.RLock()

    def set_mode(self, mode: Mode, who: str = "api") -> Mode:
        """Switch mode between steps; returns the previous one. The switch is an event in the trail
        (who, from, to); the states carry on as across a restart: a pending action stays pending,
        dry-run proposals were never armed, and a new dry-run keeps its own cooldowns again."""
        with self._lock:
            previous, self.mode = self.mode, mode
            if mode is not previous:
                self._dry_guard = None
                now = self.clock()
                event = ControlEvent(now, ALL_TIERS, "mode", f"{who}: mode {previous.value} -> {mode.value}")
                self.audit.record_decision(now, mode.value, [], [], [event], {}, self.guard_state)
                log.warning("controller: %s", event.message)
            return previous

    # -- one step ----------------------------------------------------------------------------------
    def _check(self) -> FencingToken | None:
        """The current term's token, re-checked now (``NotLeader`` ends the step)."""
        return self.leadership.check() if self.leadership is not None else None

    def tick(self) -> TickReport:
        with self._lock:
            return self._tick()

    def _tick(self) -> TickReport:
        now = self.clock()
        self._check()
        applied = self.drive(now)  # what a previous step (or a crash) left to apply, approvals included
        try:
            observed = self.actuator.observe()
        except PermanentActuatorError as err:
            self.last_error = f"observe: {err}"
            log.error("controller: backend gone for good, deciding nothing: %s", err)
            return TickReport(now, [], 0, applied, [])
        except RetryableActuatorError as err:
            self.last_error = f"observe: {err}"
            log.warning("controller: cannot observe: %s", err)
            return TickReport(now, [], 0, applied, [])
        verdicts = self._verdicts()
        decided, refused_n, events = self._decide(now, observed, verdicts)
        if self.mode is Mode.AUTO:
            applied += self.drive(now)
        self.last_tick_s = now
        self.metrics.last_tick.set(now)
        return TickReport(now, decided, refused_n, applied, events)

    def _verdicts(self) -> Mapping[str, Verdict]:
        try:
            return self.source()
        except RetryableError as err:
            self.last_error = f"source: {err}"
            log.warning("controller: no verdicts this step: %s", err)
            return {}

    def _decide(
        self, now: float, observed: Mapping[str, TierObservation], verdicts: Mapping[str, Verdict]
    ) -> tuple[list[Action], int, list[ControlEvent]]:
        cluster = cluster_view(observed, self.policies)
        headroom = self.pop_headroom_bps() if self.pop_headroom_bps else None
        paths = self.path_excess_s() if self.path_excess_s else None
        relocatable = ActionKind.RELOCATE in self.actuator.kinds
        proposed: list[Action] = []
        new_states: dict[str, ControlState] = {}
        diag_of: dict[str, dict[str, Any] | None] = {}
        for tier, policy in self.policies.items():
            obs = observed.get(tier)
            if obs is None:
                continue
            diagnosis, snapshot = verdicts.get(tier, (None, None))
            ss = slice_state(tier, obs, snapshot, cluster, self.policies, self.topology, headroom, relocatable, paths)
            actions, st = decide(diagnosis, ss, policy, now, self.states.get(tier, ControlState()))
            proposed.extend(actions)
            new_states[tier] = st
            diag_of[tier] = diagnosis.to_dict() if diagnosis is not None else None
            self._observe_metrics(tier, st, snapshot)
        # The batch is judged in priority order: where two tiers' moves want the same free GPU, the tier
        # with the stricter SLO (higher priority) gets it; the other decides again on the next step.
        proposed.sort(key=lambda a: -self.policies[a.slice].priority if a.slice in self.policies else 0)
        if self.mode is Mode.DRY_RUN:
            # Dry-run decisions keep their own cooldowns and rate (in memory) and never count against
            # what a later auto or approve run may do; only their ids are remembered.
            allowed, refused, dry = guard(proposed, cluster, self.policies, self._dry_guard or self.guard_state, now)
            self._dry_guard = dry
            gstate = GuardState(self.guard_state.history, dry.seen_ids)
        else:
            allowed, refused, gstate = guard(proposed, cluster, self.policies, self.guard_state, now)
        initial = _INITIAL_STATE[self.mode]
        for r in refused:  # nothing refused is ever judged
            if r.action.slice in new_states:
                new_states[r.action.slice] = drop_check(new_states[r.action.slice], r.action.id)
        if self.mode is Mode.DRY_RUN:
            for a in allowed:
                new_states[a.slice] = drop_check(new_states[a.slice], a.id)
        events = [e for st in new_states.values() for e in st.events]
        decided = [Decided(a, initial, diag_of.get(a.slice)) for a in allowed]
        self.audit.record_decision(now, self.mode.value, decided, refused, events, new_states, gstate)
        self.states.update(new_states)
        self.guard_state = gstate
        for a in allowed:
            if isinstance(a.value, (int, float)):
                self.metrics.desired.labels(a.slice, a.kind.value).set(float(a.value))
            if self.mode is Mode.APPROVE:
                self.metrics.outcome(a, OUTCOME_PENDING)
        for e in events:
            if e.kind in JUDGED_OUTCOMES and e.action_id:  # ids are "<tier>-<decision>[-<n>]-<kind>[-rollback]"
                kind = next((c for c in ActionKind if c.value in e.action_id.split("-")), ActionKind.NOOP)
                self.metrics.actions.labels(e.tier, kind.value, e.kind).inc()
        return allowed, len(refused), events

    def _observe_metrics(self, tier: str, st: ControlState, snapshot: SliceSnapshot | None) -> None:
        if st.forecast_mean is not None and st.forecast_upper is not None:
            self.metrics.forecast.labels(tier, "mean").set(st.forecast_mean)
            self.metrics.forecast.labels(tier, "upper").set(st.forecast_upper)
        if snapshot is not None and snapshot.request_rate is not None:
            self.metrics.arrivals.labels(tier).set(snapshot.request_rate)
        self.metrics.at_ceiling.labels(tier).set(1.0 if st.at_ceiling else 0.0)

    # -- applying ----------------------------------------------------------------------------------
    def drive(self, now: float | None = None) -> list[str]:
        """Apply every action recorded as approved/applying/in progress; returns the ids now applied."""
        with self._lock:
            return self._drive(now)

    def _drive(self, now: float | None) -> list[str]:
        if self.mode is Mode.DRY_RUN:
            return []
        now = self.clock() if now is None else now
        done: list[str] = []
        for row in self.audit.actions(state=TO_DRIVE):
            action = action_of(row)
            if self._fenced_out(row, now):
                continue
            if row["state"] == APPROVED:
                self.audit.transition(action.id, APPLYING, now, attempt=True)
            self._check()  # immediately before the actuation (the actuator re-checks before each write)
            try:
                result = self.actuator.apply(action)
            except RetryableActuatorError as err:
                give_up = row["attempts"] + 1 >= MAX_ATTEMPTS
                self.audit.transition(
                    action.id,
                    FAILED if give_up else APPROVED,
                    now,
                    detail=f"retryable: {err}",
                    tier_state=self._dropped(action) if give_up else None,
                )
                if give_up:
                    self.metrics.outcome(action, OUTCOME_FAILED)
                continue
            except PermanentActuatorError as err:
                self.audit.transition(action.id, FAILED, now, detail=f"permanent: {err}", tier_state=self._dropped(action))
                self.metrics.outcome(action, OUTCOME_FAILED)
                continue
            if result.status is ApplyStatus.IN_PROGRESS:
                if row["state"] != IN_PROGRESS:
                    self.audit.transition(action.id, IN_PROGRESS, now, detail=result.detail)
                continue
            st = self.states.get(action.slice)
            st = mark_applied(st, action.id, now) if st is not None else None
            if st is not None:
                self.states[action.slice] = st
            self.audit.transition(action.id, APPLIED, now, detail=result.detail or result.status.value, tier_state=st)
            self.metrics.outcome(action, OUTCOME_APPLIED)
            if isinstance(action.value, (int, float)):
                self.metrics.applied.labels(action.slice, action.kind.value).set(float(action.value))
            done.append(action.id)
        return done

    def _fenced_out(self, row: Mapping[str, Any], now: float) -> bool:
        """Refuse (and skip) an action an earlier term recorded after this term took over; stop
        (``Deposed``) on one a later term owns."""
        token = self._check()
        theirs_text = row.get("fencing_token")
        if token is None or not theirs_text or self.leadership is None:
            return False
        theirs = FencingToken.parse(str(theirs_text))
        if theirs.transitions > token.transitions:
            reason = f"action {row['id']} is owned by term {theirs}, later than ours ({token})"
            self.leadership.step_down(reason)
            raise Deposed(reason)
        if theirs.transitions == token.transitions:
            return False
        detail = f"fenced: recorded by term {theirs} after term {token} took over; refused, not applied"
        self.audit.transition(str(row["id"]), REFUSED, now, detail=detail, tier_state=self._dropped(action_of(row)))
        self.metrics.outcome(action_of(row), OUTCOME_FAILED)
        log.warning("controller: %s", detail)
        return True

    def resume(self) -> list[str]:
        """Take over from whoever acted before (a newly elected leader, a restarted process): fence
        this term's objects (``claim``, when the actuator and trail fence), reload the tier and guard
        states from the trail, then apply what it left to apply."""
        self._check()
        for part in (self.actuator, self.audit):
            claim = getattr(part, "claim", None)
            if self.leadership is not None and callable(claim):
                claim()
        self.states, self.guard_state = self.audit.states()
        self._dry_guard = None
        return self.drive()

    def _dropped(self, action: Action) -> ControlState | None:
        st = self.states.get(action.slice)
        if st is None:
            return None
        st = drop_check(st, action.id)
        self.states[action.slice] = st
        return st

    # -- operator ----------------------------------------------------------------------------------
    def approve(self, action_id: str, who: str) -> dict[str, Any]:
        return self.audit.decide_approval(action_id, True, who, self.clock())

    def reject(self, action_id: str, who: str) -> dict[str, Any]:
        row = self.audit.decide_approval(action_id, False, who, self.clock())
        st = self.states.get(row["tier"])
        if st is not None:
            self.states[row["tier"]] = drop_check(st, action_id)
        self.metrics.actions.labels(row["tier"], row["kind"], OUTCOME_REJECTED).inc()
        return row

    def health(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "last_tick_s": self.last_tick_s,
            "last_error": self.last_error,
            "pending": len(self.audit.actions(state=PENDING)),
            "to_apply": len(self.audit.actions(state=TO_DRIVE)),
            "tiers": {t: {"at_ceiling": s.at_ceiling, "seq": s.seq, "checks": len(s.checks)} for t, s in self.states.items()},
        }
