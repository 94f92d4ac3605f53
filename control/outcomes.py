"""Outcome checks: what an applied action did, judged honestly (pure).

An action is judged only on a diagnosis window measured under it, and before any later action on
the same tier and knob (the replica count, the cap, one replica's placement):

- measured under it: the window starts after the action took effect and after the tier showed its
  value (its new replicas ready; the snapshot reporting the new cap; a move's old replica drained),
  and the window's snapshot reports the actuated cap (the exporter and Prometheus lag an actuation
  by a window or two: the demo once credited 0.86 Mbit/s with a window measured under 2.59);
- due: not before ``expected_by_s`` + ``outcome_grace_s`` (a queue takes its drain time to clear).

Verdicts (the vocabulary's ``OUTCOME_*``):

- effective: the cause no longer binds: no verdict at the controller's own bar (``min_confidence``,
  ``trust.named``) names it; the window after a move off a co-tenant may read its tail, compute
  under that bar (the classifier's v14), which says the cause has left;
- insufficient: the right remedy, too little: the cause still binds and the link fills the raised
  cap, or a further step of the same knob in the same direction was applied before any window
  could judge it (a raise followed by another raise on the same evidence); the later step
  inherits its ``previous``, so undoing the chain returns to the value before it;
- ineffective: the cause still binds and the action did not help (a cap the link leaves unused,
  replicas while the queue stands): recorded, rolled back where that is safe, never repeated for
  that cause in the episode;
- superseded: the knob was turned the other way (a rollback, a reclaim) before a window judged it;
- unjudged: no window measured it in time (the source never reported the actuated value).
"""

from __future__ import annotations

from dataclasses import replace

from inferslice.actions import (
    OUTCOME_EFFECTIVE,
    OUTCOME_INEFFECTIVE,
    OUTCOME_INSUFFICIENT,
    OUTCOME_SUPERSEDED,
    OUTCOME_UNJUDGED,
    Action,
    ActionKind,
)
from inferslice.control.remedies.base import FORECAST, RECLAIM, ROLLBACK, C, Q, cold_start_s
from inferslice.control.settings import TierPolicy
from inferslice.control.state import Check, ControlEvent, ControlState, SliceState
from inferslice.control.trust import CAP_MATCH, named
from inferslice.control.wan import slowed_pops
from inferslice.diagnosis import Diagnosis, Regime

__all__ = ["judge"]


def _knob(c: Check) -> tuple[ActionKind, str | None]:
    return c.kind, c.replica if c.kind is ActionKind.RELOCATE else None


def _num(v: float | str | None) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _same_direction(c: Check, later: Check) -> bool:
    """A further step of the knob the way ``c`` turned it (raise after raise, scale-out after scale-out)."""
    v, p, w = _num(c.value), _num(c.previous), _num(later.value)
    if c.kind is ActionKind.RELOCATE or v is None or p is None or w is None or c.cause == RECLAIM or later.cause == RECLAIM:
        return False
    return (w > v) == (v > p) and w != v


def in_force(c: Check, ss: SliceState) -> bool:
    """The tier shows the action's value now: a replica count once its replicas serve (or have gone).
    A cap acts from when it is applied (each window's snapshot must report it, ``measured_under``),
    a relocation once its old replica drained (when the actuator reports it applied)."""
    if c.kind is ActionKind.SET_REPLICAS:
        n, before = _num(c.value), _num(c.previous)
        if n is None:
            return False
        live = sum(1 for r in ss.replicas if r.state != "stopping")
        return ss.replicas_ready >= n if before is None or n >= before else live <= n
    return True  # a relocation is applied once the old replica drained


def measured_under(c: Check, d: Diagnosis, ss: SliceState, p: TierPolicy, now_s: float) -> bool:
    """The window behind ``d`` was measured under ``c``: it starts after ``c`` took effect and its value
    was in force, and (a cap) its snapshot reports the actuated cap."""
    snap = ss.snapshot
    end = d.window_end_s if d.window_end_s is not None else (snap.window_end_s if snap is not None and snap.window_end_s else now_s)
    length = snap.window_s if snap is not None and snap.window_s else p.settings.window_s
    since = max(c.applied_s if c.applied_s is not None else c.expected_by_s - c.delay_s, c.in_force_s or 0.0)
    if end - length < since - 1e-9:
        return False
    if c.kind is ActionKind.SET_CAP:
        v, seen = _num(c.value), snap.edge_cap_bps if snap is not None else None
        return v is not None and (seen is None or abs(seen - v) <= CAP_MATCH * v)
    return True


def judge(
    st: ControlState, d: Diagnosis | None, ss: SliceState, p: TierPolicy, now_s: float, events: list[ControlEvent]
) -> tuple[ControlState, list[Action]]:
    """Judge the applied checks that can be judged on this window; returns the state and any rollbacks."""
    present = named(d, p.settings)  # at the bar the controller acts on: a tail verdict (0.25) says the cause has left
    checks = list(st.checks)
    keep: list[Check] = []
    ineffective = list(st.ineffective)
    insufficient = list(st.insufficient)
    rollbacks: list[Action] = []
    stale_after_s = 10 * cold_start_s(st, p) + 60.0  # an action never applied (pending, dry-run) or never measured stops waiting

    def verdict(c: Check, outcome: str, note: str) -> None:
        events.append(ControlEvent(now_s, p.tier, outcome, note, c.cause, c.action_id))

    for i, c in enumerate(checks):
        if not c.applied:
            if now_s <= c.expected_by_s + stale_after_s:
                keep.append(c)
            continue
        later = next((k for k in range(i + 1, len(checks)) if checks[k].applied and _knob(checks[k]) == _knob(c)), None)
        if later is not None:  # the knob was turned again before any window judged this step
            if _same_direction(c, checks[later]):
                verdict(c, OUTCOME_INSUFFICIENT, f"{c.kind.value} -> {c.value} was not enough: {checks[later].value} followed")
                checks[later] = replace(checks[later], previous=c.previous)
            else:
                verdict(
                    c,
                    OUTCOME_SUPERSEDED,
                    f"{c.kind.value} -> {c.value} was undone by {checks[later].action_id} before a window measured it",
                )
            continue
        if c.kind is ActionKind.SET_REPLICAS and c.in_force_s is None and in_force(c, ss):
            c = replace(c, in_force_s=now_s)
        if (
            now_s < c.expected_by_s + p.settings.outcome_grace_s
            or d is None
            or d.regime is Regime.UNKNOWN
            or not measured_under(c, d, ss, p, now_s)
        ):
            if now_s > c.expected_by_s + stale_after_s:
                verdict(c, OUTCOME_UNJUDGED, f"{c.kind.value} -> {c.value}: no window measured under it within {stale_after_s:.0f} s")
            else:
                keep.append(c)  # not due, or no window measured under it yet: judge on a later one
            continue
        if c.cause == RECLAIM:
            failed = bool(present & {Q, C})
            note = f"reclaim {c.action_id} brought back {sorted(r.value for r in present)}"
            safe = failed and c.previous is not None
        else:
            cause = Q if c.cause == FORECAST else Regime(c.cause) if c.cause in Regime._value2member_map_ else None
            failed = cause is not None and cause in present
            if failed and c.kind is ActionKind.SET_CAP and _link_uses(ss, _num(c.value), p.settings.link_used_ratio):
                # The link fills the raised cap: demand hidden behind the old cap's queue shows once it drains.
                verdict(c, OUTCOME_INSUFFICIENT, f"cap {c.value:g} bit/s binds again: raise further")
                insufficient.append((c.cause, c.kind.value))
                continue
            if (
                failed
                and c.kind is ActionKind.RELOCATE
                and cause is Regime.NETWORK_LIMITED
                and slowed_pops(ss, p.settings) & {r.pop for r in ss.replicas if r.state == "ready"}
            ):
                # One replica moved off a slowed WAN path, others still behind it: the next move follows.
                verdict(c, OUTCOME_INSUFFICIENT, f"moved to {c.value}; replicas still behind a slowed path")
                continue
            note = f"{c.kind.value} -> {c.value} did not clear {cause.value if cause else c.cause}"
            safe = failed and _rollback_safe(c, present)
        if not failed:
            verdict(c, OUTCOME_EFFECTIVE, f"{c.kind.value} -> {c.value} answered {c.cause}")
            insufficient = [f for f in insufficient if f != (c.cause, c.kind.value)]
            continue
        verdict(c, OUTCOME_INEFFECTIVE, note)
        ineffective.append((c.cause, c.kind.value))
        if safe:
            rollbacks.append(_rollback(p, c, now_s))
    return (
        replace(st, checks=tuple(keep), ineffective=tuple(dict.fromkeys(ineffective)), insufficient=tuple(dict.fromkeys(insufficient))),
        rollbacks,
    )


def _link_uses(ss: SliceState, cap_bps: float | None, ratio: float) -> bool:
    snap = ss.snapshot
    rx = snap.link_rx_bps if snap is not None else None
    return cap_bps is not None and rx is not None and rx >= ratio * cap_bps


def _rollback_safe(c: Check, present: set[Regime]) -> bool:
    """Undoing must not worsen what binds now: an ineffective cap raise returns bandwidth nobody used;
    an ineffective scale-out is undone only if the tier does not queue; a relocation is never undone
    (it would cost another cold start)."""
    if c.previous is None:
        return False
    if c.kind is ActionKind.SET_CAP:
        return True
    if c.kind is ActionKind.SET_REPLICAS:
        return Q not in present
    return False


def _rollback(p: TierPolicy, c: Check, now_s: float) -> Action:
    return Action(
        c.kind,
        p.tier,
        c.previous,
        reason=f"roll back {c.action_id}: it did not help its cause ({c.cause})",
        regime=ROLLBACK,
        id=f"{c.action_id}-rollback",
        previous=c.value,
        decided_s=now_s,
    )
