"""The controller's audit trail as ``SliceAction`` objects (``inferslice control --backend kubernetes``).

The same interface as the SQLite ``AuditLog`` (``ActionTrail``), so the controller does not know
which one it writes: every decided action is one object (spec: the action and its cause; status:
the phase, who approved, who applied and when, attempts, outcome), so the trail survives a
controller restart without a volume and approve mode is
``kubectl patch sliceaction X --subresource=status --type=merge -p '{"status":{"phase":"Approved","approvedBy":"me"}}'``,
which the next ``drive`` of the leader applies.

What is not in the objects, and why:
- the tier states' forecasts, measured cold starts and pending outcome checks change every step;
  writing them each step would be one more write per tier per 2 s for a best-effort estimate.
  They live in this process's memory; a new process starts them afresh (an outcome check of an
  action applied before the restart is not judged).
- what is rebuilt from the objects instead, because it guards correctness: each tier's decision
  counter (part of every action id, so a new process never reuses an id), and the guard's
  cooldowns, rate history and seen ids (from the recorded actions and their decision times).
- the control events (decided, the outcome verdicts) stay in memory; the ones that matter are in the
  objects' status (outcome, Ineffective, RolledBack).

Writes are status patches with the object's resourceVersion as precondition; a conflict (someone,
an operator or another replica, changed it first) raises ``PhaseConflict``, retryable.

Fencing (with ``leadership``, the Lease elector): every write the controller makes re-checks the
Lease first (``NotLeader``) and stamps ``status.fencingToken`` with the current term; an object
stamped by a later term is never written (``Deposed``). ``claim`` (once per term, on takeover)
adopts every unfinished action; an action still carrying an earlier term after that was recorded
by a deposed leader, and the controller refuses it instead of applying it. Operators' approvals
are not fenced (they come through the API or kubectl, whoever leads).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from inferslice.actions import JUDGED_OUTCOMES, OUTCOME_INEFFECTIVE, Action, ActionKind
from inferslice.control.actuators.fencing import Deposed, FencingToken, Leadership
from inferslice.control.guardrails import GuardState, Refusal
from inferslice.control.settings import cooldown_key
from inferslice.control.state import ControlEvent, ControlState
from inferslice.deploy.custom_resources import Phase
from inferslice.service.controller.audit import (
    APPLIED,
    APPLYING,
    APPROVED,
    DRY_RUN,
    FAILED,
    IN_PROGRESS,
    PENDING,
    REFUSED,
    REJECTED,
    Decided,
    TransitionError,
)
from inferslice.service.controller.audit_store import Recorded, SliceActionStore

ROLLED_BACK = "rolled_back"  # a state only the objects know: the action's rollback has been applied
_PHASE_OF = {
    PENDING: Phase.PENDING,
    APPROVED: Phase.APPROVED,
    APPLYING: Phase.APPLYING,
    IN_PROGRESS: Phase.IN_PROGRESS,
    APPLIED: Phase.APPLIED,
    FAILED: Phase.FAILED,
    REJECTED: Phase.REJECTED,
    DRY_RUN: Phase.DRY_RUN,
    REFUSED: Phase.REFUSED,
}
_STATE_OF = {**{p: s for s, p in _PHASE_OF.items()}, Phase.INEFFECTIVE: APPLIED, Phase.ROLLED_BACK: ROLLED_BACK}
_SEEN_IDS_KEPT = 4096  # as many ids as the guard itself keeps
_EVENTS_KEPT = 10_000  # in memory only: enough for the API's recent view
_ROLLBACK_SUFFIX = "-rollback"  # control.policy names a rollback after the action it undoes
_UNFINISHED = (Phase.PENDING, Phase.APPROVED, Phase.APPLYING, Phase.IN_PROGRESS)


def token_of(rec: Recorded) -> FencingToken | None:
    text = rec.status.get("fencingToken")
    try:
        return FencingToken.parse(text) if text else None
    except ValueError:
        return None


class SliceActionAuditLog:
    def __init__(self, store: SliceActionStore, identity: str, leadership: Leadership | None = None) -> None:
        self.store = store
        self.identity = identity  # the Lease holder: recorded as appliedBy
        self.leadership = leadership  # None: one controller, nothing to fence
        self._tiers: dict[str, ControlState] = {}
        self._guard = GuardState()
        self._events: deque[dict[str, Any]] = deque(maxlen=_EVENTS_KEPT)

    def close(self) -> None:
        return None

    # -- fencing -----------------------------------------------------------------------------------
    def _token(self) -> FencingToken | None:
        return self.leadership.check() if self.leadership is not None else None

    def _fenced(self, current: Recorded) -> dict[str, Any]:
        """The status fields that stamp ``current`` with this term, checked now: ``NotLeader``, or
        ``Deposed`` if a later term stamped it."""
        token = self._token()
        if token is None or self.leadership is None:
            return {}
        theirs = token_of(current)
        if theirs is not None and theirs.transitions > token.transitions:
            reason = f"sliceaction {current.action.id} is owned by term {theirs}, later than ours ({token})"
            self.leadership.step_down(reason)
            raise Deposed(reason)
        return {"fencingToken": str(token)}

    def claim(self) -> int:
        """Adopt every unfinished action for this term (on takeover, before driving any); returns how
        many were re-stamped. A race with another term's write is a ``PhaseConflict`` (retryable)."""
        token = self._token()
        if token is None:
            return 0
        adopted = 0
        for rec in self.store.list():
            if rec.phase in _UNFINISHED and token_of(rec) != token:
                self.store.patch_status(rec, self._fenced(rec))
                adopted += 1
        return adopted

    # -- writes ------------------------------------------------------------------------------------
    def record_decision(
        self,
        now_s: float,
        mode: str,
        decided: list[Decided],
        refused: list[Refusal],
        events: list[ControlEvent],
        states: Mapping[str, ControlState],
        guard: GuardState,
    ) -> None:
        """One object per action, created before anything is applied. Not one transaction as in
        SQLite: a crash half way leaves the first objects, which a new leader drives, and loses the
        rest, which were not applied yet and are decided again (the counter resumes past the ids used)."""
        for d in decided:
            diagnosis_id = d.diagnosis.get("id") if d.diagnosis else None
            status = {"phase": _PHASE_OF[d.state].value, "mode": mode, "recordedUnixS": now_s, "attempts": 0, **self._stamp()}
            self.store.record(d.action, diagnosis_id if isinstance(diagnosis_id, str) else None, status)
        for r in refused:
            if not r.action.id or r.rule == "duplicate_id":  # a duplicate is already there under its id
                continue
            status = {
                "phase": Phase.REFUSED.value,
                "mode": mode,
                "recordedUnixS": now_s,
                "message": f"{r.rule}: {r.message}",
                **self._stamp(),
            }
            self.store.record(r.action, None, status)
        for e in events:
            self._events.append({"tier": e.tier, "at_s": e.at_s, "kind": e.kind, "action_id": e.action_id, "message": e.message})
            if e.action_id and e.kind in JUDGED_OUTCOMES:
                self._outcome(e.action_id, e.kind, e.at_s)
        self._tiers.update(states)
        self._guard = guard

    def _stamp(self) -> dict[str, Any]:
        token = self._token()
        return {"fencingToken": str(token)} if token is not None else {}

    def _outcome(self, action_id: str, outcome: str, at_s: float) -> None:
        try:
            current = self.store.get(action_id)
        except KeyError:
            return
        status: dict[str, Any] = {"outcome": outcome, "outcomeUnixS": at_s, **self._fenced(current)}
        if outcome == OUTCOME_INEFFECTIVE and current.phase == Phase.APPLIED:
            status["phase"] = Phase.INEFFECTIVE.value
        self.store.patch_status(current, status)

    def transition(
        self,
        action_id: str,
        new_state: str,
        now_s: float,
        *,
        detail: str | None = None,
        tier_state: ControlState | None = None,
        attempt: bool = False,
    ) -> None:
        current = self.store.get(action_id)
        status: dict[str, Any] = {"phase": _PHASE_OF[new_state].value, **self._fenced(current)}
        if detail is not None:
            status["message"] = detail
        if attempt:
            status["attempts"] = int(current.status.get("attempts", 0)) + 1
        if new_state == APPLIED:
            status.update({"appliedBy": self.identity, "appliedUnixS": now_s})
        self.store.patch_status(current, status)
        if tier_state is not None:
            self._tiers[tier_state.tier] = tier_state
        if new_state == APPLIED and action_id.endswith(_ROLLBACK_SUFFIX):
            self._rolled_back(action_id.removesuffix(_ROLLBACK_SUFFIX), action_id)

    def _rolled_back(self, action_id: str, by: str) -> None:
        try:
            original = self.store.get(action_id)
        except KeyError:
            return
        if original.phase in (Phase.APPLIED, Phase.INEFFECTIVE):
            self.store.patch_status(original, {"phase": Phase.ROLLED_BACK.value, "message": f"undone by {by}", **self._fenced(original)})

    def decide_approval(self, action_id: str, approve: bool, who: str, now_s: float) -> dict[str, Any]:
        try:
            current = self.store.get(action_id)
        except KeyError:
            raise TransitionError(f"action {action_id!r} is unknown, not pending") from None
        if current.phase != Phase.PENDING:
            raise TransitionError(f"action {action_id!r} is {_STATE_OF[current.phase]}, not pending")
        phase = Phase.APPROVED if approve else Phase.REJECTED
        return _row(self.store.patch_status(current, {"phase": phase.value, "approvedBy": who, "approvedUnixS": now_s}))

    # -- reads -------------------------------------------------------------------------------------
    def actions(self, state: str | Iterable[str] | None = None, tier: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        wanted = None if state is None else ({state} if isinstance(state, str) else set(state))
        rows = [_row(r) for r in self.store.list()]
        rows = [r for r in rows if (wanted is None or r["state"] in wanted) and (tier is None or r["tier"] == tier)]
        rows.sort(key=lambda r: (r["decided_s"], r["id"]))
        return rows[:limit]

    def action(self, action_id: str) -> dict[str, Any] | None:
        try:
            return _row(self.store.get(action_id))
        except KeyError:
            return None

    def events(self, tier: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        return [e for e in self._events if tier is None or e["tier"] == tier][:limit]

    def states(self) -> tuple[dict[str, ControlState], GuardState]:
        """This process's tier states, each counter moved past every id in the objects, and the
        guard's state rebuilt from the recorded actions (what another replica decided included)."""
        recs = self.store.list()
        tiers = dict(self._tiers)
        for tier, seq in _counters(recs).items():
            st = tiers.get(tier, ControlState(tier=tier))
            tiers[tier] = replace(st, seq=max(st.seq, seq))
        recs.sort(key=lambda r: _decided_s(r))
        history = [
            (r.action.slice, cooldown_key(r.action.kind, _up(r.action)), _decided_s(r))
            for r in recs
            if r.phase not in (Phase.REFUSED, Phase.DRY_RUN) and r.action.kind is not ActionKind.NOOP
        ]
        ids = dict.fromkeys((*self._guard.seen_ids, *(r.action.id for r in recs)))
        self._guard = GuardState(tuple(sorted(set(self._guard.history) | set(history), key=lambda h: h[2])), tuple(ids)[-_SEEN_IDS_KEPT:])
        self._tiers = tiers
        return dict(tiers), self._guard


def _counters(recs: list[Recorded]) -> dict[str, int]:
    """The highest decision counter per tier in the recorded ids (``{tier}-{seq}-{kind}``)."""
    out: dict[str, int] = {}
    for r in recs:
        m = re.match(re.escape(r.action.slice) + r"-(\d+)-", r.action.id)
        if m:
            out[r.action.slice] = max(out.get(r.action.slice, 0), int(m.group(1)))
    return out


def _up(a: Action) -> bool:
    # The guard's direction compares with the replicas observed then; the recorded previous value is that.
    if a.kind is not ActionKind.SET_REPLICAS or not isinstance(a.value, (int, float)) or not isinstance(a.previous, (int, float)):
        return True
    return a.value > a.previous


def _decided_s(r: Recorded) -> float:
    return float(r.status.get("recordedUnixS") or r.action.decided_s or 0.0)


def _row(r: Recorded) -> dict[str, Any]:
    """An object as the SQLite log's row (the API and the controller read one shape)."""
    st = r.status
    a = r.action
    return {
        "id": a.id,
        "tier": a.slice,
        "kind": a.kind.value,
        "state": _STATE_OF[r.phase],
        "phase": r.phase.value,
        "cause": a.regime,
        "action": a.to_dict(),
        "diagnosis": None,
        "mode": st.get("mode", ""),
        "decided_s": _decided_s(r),
        "approved_by": st.get("approvedBy"),
        "approved_s": st.get("approvedUnixS"),
        "applied_by": st.get("appliedBy"),
        "applied_s": st.get("appliedUnixS"),
        "attempts": int(st.get("attempts", 0)),
        "outcome": st.get("outcome"),
        "outcome_s": st.get("outcomeUnixS"),
        "detail": st.get("message", ""),
        "fencing_token": st.get("fencingToken"),
    }
