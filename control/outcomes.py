"""Outcome checks: was an applied action effective, and what to do when it was not (pure).

An action is judged at ``expected_by_s`` + grace on the first window with a verdict: effective when
its cause no longer binds, futile when it still does (recorded, rolled back where that is safe, not
repeated for that cause in the episode). A raised cap that binds again is insufficient, not futile.
"""

from __future__ import annotations

from dataclasses import replace

from inferslice.actions import Action, ActionKind
from inferslice.control.remedies.base import FORECAST, RECLAIM, ROLLBACK, C, Q, cold_start_s
from inferslice.control.settings import TierPolicy
from inferslice.control.state import Check, ControlEvent, ControlState, SliceState
from inferslice.control.trust import cap_unseen
from inferslice.diagnosis import BINDING_REGIMES, Diagnosis, Regime

__all__ = ["judge", "regimes_of"]


def regimes_of(d: Diagnosis | None) -> set[Regime]:
    """The binding regimes a verdict names (primary and secondaries)."""
    if d is None:
        return set()
    return {r for r in (d.regime, *d.secondary) if r in BINDING_REGIMES}


def judge(
    st: ControlState, d: Diagnosis | None, ss: SliceState, p: TierPolicy, now_s: float, events: list[ControlEvent]
) -> tuple[ControlState, list[Action]]:
    """Outcome checks: effective, futile (record, roll back where safe, never again for this cause).

    A cap raise is futile only if the link does not use it (it carries under 90 % of the new cap
    while the tier still reads network-limited): a link that binds again at the higher cap was
    raised too little, not in vain (demand hidden behind the old cap's queue shows up once it drains).

    A futile action followed by a later one of the same kind is not undone on its own: its
    ``previous`` passes to the later one, so undoing the chain returns to the value before it."""
    present = regimes_of(d)
    checks = list(st.checks)
    keep: list[Check] = []
    futile = list(st.futile)
    rollbacks: list[Action] = []
    stale_after_s = 10 * cold_start_s(st, p) + 60.0  # an action never applied (pending, dry-run) stops waiting
    for i, c in enumerate(checks):
        if not c.applied:
            if now_s <= c.expected_by_s + stale_after_s:
                keep.append(c)
            continue
        if now_s < c.expected_by_s + p.settings.outcome_grace_s or d is None or d.regime is Regime.UNKNOWN:
            keep.append(c)  # not due, or no verdict this window: judge on a later one
            continue
        if c.kind is ActionKind.SET_CAP and cap_unseen(d, ss, st, p.settings.window_s):
            keep.append(c)  # the window does not measure the cap in force yet
            continue
        later = next((k for k in range(i + 1, len(checks)) if checks[k].kind is c.kind and checks[k].applied), None)
        if c.cause == RECLAIM:
            failed = bool(present & {Q, C})
            note = f"reclaim {c.action_id} brought back {sorted(r.value for r in present)}"
            safe = failed and c.previous is not None
        else:
            cause = Q if c.cause == FORECAST else Regime(c.cause) if c.cause in Regime._value2member_map_ else None
            failed = cause is not None and cause in present
            if (
                failed
                and c.kind is ActionKind.SET_CAP
                and isinstance(c.value, (int, float))
                and _link_uses(ss, float(c.value), p.settings.link_used_ratio)
            ):
                events.append(
                    ControlEvent(now_s, p.tier, "insufficient", f"cap {c.value:g} bit/s binds again: raise further", c.cause, c.action_id)
                )
                continue
            note = f"{c.kind.value} -> {c.value} did not clear {cause.value if cause else c.cause}"
            safe = failed and _rollback_safe(c, present)
        if not failed:
            events.append(ControlEvent(now_s, p.tier, "effective", f"{c.kind.value} -> {c.value} answered {c.cause}", c.cause, c.action_id))
            continue
        events.append(ControlEvent(now_s, p.tier, "futile", note, c.cause, c.action_id))
        futile.append((c.cause, c.kind.value))
        if not safe:
            continue
        if later is not None:
            checks[later] = replace(checks[later], previous=c.previous)
        else:
            rollbacks.append(_rollback(p, c, now_s))
    return replace(st, checks=tuple(keep), futile=tuple(dict.fromkeys(futile))), rollbacks


def _link_uses(ss: SliceState, cap_bps: float, ratio: float) -> bool:
    snap = ss.snapshot
    rx = snap.link_rx_bps if snap is not None else None
    return rx is not None and rx >= ratio * cap_bps


def _rollback_safe(c: Check, present: set[Regime]) -> bool:
    """Undoing must not worsen what binds now: a futile cap raise returns bandwidth nobody used; a
    futile scale-out is undone only if the tier does not queue; a relocation is never undone (it
    would cost another cold start)."""
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
