"""The controller's crash-safe audit log (SQLite): every action, why, who approved, when applied, outcome.

One row per action id (the primary key makes a repeated decision a no-op), the controller's state
per tier and the guard's state beside it. A decision (its actions, refusals, events and the new
states) is one transaction, and so is each state change of an action with the tier state it
implies: after ``kill -9`` at any point the file holds either all of a step or none of it. WAL mode
with ``synchronous=FULL`` makes a committed transaction survive the process (and the machine).

Action states:
    pending      waiting for an operator (approve mode)
    approved     to apply (auto mode starts here; an operator's approval moves pending here)
    applying     apply started: after a crash it is applied again (actuators are idempotent by id)
    in_progress  accepted by the actuator and advancing (make-before-break relocation)
    applied | failed | rejected | dry_run | refused (by a guardrail)
Outcome (the outcome check's verdict, ``inferslice.actions.JUDGED_OUTCOMES``): effective | insufficient |
ineffective | superseded | unjudged.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from inferslice.actions import JUDGED_OUTCOMES, Action, action_from_dict
from inferslice.control.guardrails import GuardState, Refusal, guard_state_from_dict
from inferslice.control.state import ControlEvent, ControlState, control_state_from_dict

SCHEMA = """
CREATE TABLE IF NOT EXISTS control_actions (
    id TEXT PRIMARY KEY,
    tier TEXT NOT NULL,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    cause TEXT,
    body TEXT NOT NULL,
    diagnosis TEXT,
    mode TEXT NOT NULL,
    decided_s REAL NOT NULL,
    approved_by TEXT,
    approved_s REAL,
    applied_s REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    outcome TEXT,
    outcome_s REAL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS control_actions_state ON control_actions (state, decided_s);
CREATE TABLE IF NOT EXISTS control_state (key TEXT PRIMARY KEY, body TEXT NOT NULL, updated_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS control_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tier TEXT NOT NULL,
    at_s REAL NOT NULL,
    kind TEXT NOT NULL,
    action_id TEXT,
    message TEXT NOT NULL
);
"""

PENDING, APPROVED, APPLYING, IN_PROGRESS = "pending", "approved", "applying", "in_progress"
APPLIED, FAILED, REJECTED, DRY_RUN, REFUSED = "applied", "failed", "rejected", "dry_run", "refused"
TO_DRIVE = (APPROVED, APPLYING, IN_PROGRESS)
GUARD_KEY = "__guard__"


class TransitionError(Exception):
    """An approve/reject of an action that is not pending (or does not exist)."""


@dataclass(frozen=True)
class Decided:
    action: Action
    state: str
    diagnosis: Mapping[str, Any] | None = None  # the verdict and its attribution, as the API shows it


class ActionTrail(Protocol):
    """What the controller and the API need of an audit trail: this SQLite log on one machine, the
    ``SliceAction`` objects on Kubernetes (``audit_cr.SliceActionAuditLog``)."""

    def record_decision(
        self,
        now_s: float,
        mode: str,
        decided: list[Decided],
        refused: list[Refusal],
        events: list[ControlEvent],
        states: Mapping[str, ControlState],
        guard: GuardState,
    ) -> None: ...

    def transition(
        self,
        action_id: str,
        new_state: str,
        now_s: float,
        *,
        detail: str | None = None,
        tier_state: ControlState | None = None,
        attempt: bool = False,
    ) -> None: ...

    def decide_approval(self, action_id: str, approve: bool, who: str, now_s: float) -> dict[str, Any]: ...

    def actions(self, state: str | Iterable[str] | None = None, tier: str | None = None, limit: int = 1000) -> list[dict[str, Any]]: ...

    def action(self, action_id: str) -> dict[str, Any] | None: ...

    def events(self, tier: str | None = None, limit: int = 1000) -> list[dict[str, Any]]: ...

    def states(self) -> tuple[dict[str, ControlState], GuardState]: ...

    def close(self) -> None: ...


class AuditLog:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        self._db.row_factory = sqlite3.Row
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def _tx(self, statements: Iterable[tuple[str, tuple[Any, ...]]]) -> list[int]:
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            counts: list[int] = []
            try:
                for sql, params in statements:
                    cur.execute(sql, params)
                    counts.append(cur.rowcount)
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            return counts

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
        """Actions, refusals, events and the states that follow from them, all or nothing."""
        stmts: list[tuple[str, tuple[Any, ...]]] = []
        for d in decided:
            a = d.action
            stmts.append(
                (
                    "INSERT OR IGNORE INTO control_actions (id, tier, kind, state, cause, body, diagnosis, mode, decided_s)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (a.id, a.slice, a.kind.value, d.state, a.regime, _dumps(a.to_dict()), _dumps(d.diagnosis), mode, now_s),
                )
            )
        for r in refused:
            a = r.action
            if not a.id:
                continue
            stmts.append(
                (
                    "INSERT OR IGNORE INTO control_actions (id, tier, kind, state, cause, body, mode, decided_s, detail)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (a.id, a.slice, a.kind.value, REFUSED, a.regime, _dumps(a.to_dict()), mode, now_s, f"{r.rule}: {r.message}"),
                )
            )
        for e in events:
            stmts.append(
                (
                    "INSERT INTO control_events (tier, at_s, kind, action_id, message) VALUES (?, ?, ?, ?, ?)",
                    (e.tier, e.at_s, e.kind, e.action_id, e.message),
                )
            )
            if e.action_id and e.kind in JUDGED_OUTCOMES:
                stmts.append(("UPDATE control_actions SET outcome = ?, outcome_s = ? WHERE id = ?", (e.kind, e.at_s, e.action_id)))
        stmts.extend(_state_stmts(states, guard, now_s))
        self._tx(stmts)

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
        """Move one action to ``new_state`` (with the tier state it implies, in the same transaction)."""
        sets = ["state = ?"]
        params: list[Any] = [new_state]
        if new_state == APPLIED:
            sets.append("applied_s = ?")
            params.append(now_s)
        if detail is not None:
            sets.append("detail = ?")
            params.append(detail)
        if attempt:
            sets.append("attempts = attempts + 1")
        stmts: list[tuple[str, tuple[Any, ...]]] = [(f"UPDATE control_actions SET {', '.join(sets)} WHERE id = ?", (*params, action_id))]
        if tier_state is not None:
            stmts.append(_state_stmt(tier_state.tier, tier_state.to_dict(), now_s))
        self._tx(stmts)

    def decide_approval(self, action_id: str, approve: bool, who: str, now_s: float) -> dict[str, Any]:
        """An operator's verdict on a pending action; ``TransitionError`` unless it is pending."""
        new = APPROVED if approve else REJECTED
        [n] = self._tx(
            [
                (
                    "UPDATE control_actions SET state = ?, approved_by = ?, approved_s = ? WHERE id = ? AND state = ?",
                    (new, who, now_s, action_id, PENDING),
                )
            ]
        )
        row = self.action(action_id)
        if n != 1:
            raise TransitionError(f"action {action_id!r} is {row['state'] if row else 'unknown'}, not pending")
        assert row is not None
        return row

    # -- reads -------------------------------------------------------------------------------------
    def actions(self, state: str | Iterable[str] | None = None, tier: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        where: list[str] = []
        params: list[Any] = []
        if state is not None:
            states = [state] if isinstance(state, str) else list(state)
            where.append(f"state IN ({', '.join('?' for _ in states)})")
            params.extend(states)
        if tier is not None:
            where.append("tier = ?")
            params.append(tier)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._lock:
            rows = self._db.execute(
                f"SELECT * FROM control_actions {clause} ORDER BY decided_s, rowid LIMIT ?", (*params, limit)
            ).fetchall()
        return [_row(r) for r in rows]

    def action(self, action_id: str) -> dict[str, Any] | None:
        with self._lock:
            r = self._db.execute("SELECT * FROM control_actions WHERE id = ?", (action_id,)).fetchone()
        return None if r is None else _row(r)

    def events(self, tier: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        sql = "SELECT * FROM control_events" + (" WHERE tier = ?" if tier else "") + " ORDER BY seq LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, (tier, limit) if tier else (limit,)).fetchall()
        return [dict(r) for r in rows]

    def states(self) -> tuple[dict[str, ControlState], GuardState]:
        with self._lock:
            rows = self._db.execute("SELECT key, body FROM control_state").fetchall()
        tiers: dict[str, ControlState] = {}
        guard = GuardState()
        for r in rows:
            body = json.loads(r["body"])
            if r["key"] == GUARD_KEY:
                guard = guard_state_from_dict(body)
            else:
                tiers[r["key"]] = control_state_from_dict(body)
        return tiers, guard


def action_of(row: Mapping[str, Any]) -> Action:
    return action_from_dict(row["action"])


def _state_stmt(key: str, body: Mapping[str, Any], now_s: float) -> tuple[str, tuple[Any, ...]]:
    return ("INSERT OR REPLACE INTO control_state (key, body, updated_s) VALUES (?, ?, ?)", (key, _dumps(body), now_s))


def _state_stmts(states: Mapping[str, ControlState], guard: GuardState, now_s: float) -> list[tuple[str, tuple[Any, ...]]]:
    out = [_state_stmt(tier, st.to_dict(), now_s) for tier, st in states.items()]
    out.append(_state_stmt(GUARD_KEY, guard.to_dict(), now_s))
    return out


def _dumps(obj: Any) -> str | None:
    return None if obj is None else json.dumps(obj, sort_keys=True, default=str)


def _row(r: sqlite3.Row) -> dict[str, Any]:
    out = dict(r)
    out["action"] = json.loads(out.pop("body"))
    out["diagnosis"] = json.loads(out["diagnosis"]) if out.get("diagnosis") else None
    return out
