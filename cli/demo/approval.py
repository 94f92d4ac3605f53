"""The demo's approve-mode segment: an operator approves the controller's pending action through the API.

The segment is deterministic: the phase induces a condition that yields an action on one tier (a
squeeze of its edge), waits until that tier's action is pending (``GET /v1/actions?state=pending``),
approves it with the platform's bearer token (``POST /v1/actions/{id}/approve``), and waits until the
controller applied it (``GET /v1/actions?state=applied``). The phase is judged from that instant on,
so a short story still shows the approved remedy's effect. Other actions that come up pending meanwhile
are approved too (the operator approves what the controller proposes), but only the awaited one gates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

OPERATOR = "demo-operator"
WAIT_S = 40.0  # the longest the segment waits for the action (pending, then applied) before it gives up and says so


class Api(Protocol):
    def api_get(self, path: str, **params: Any) -> Any: ...

    def api_write(self, method: str, path: str, body: Any) -> Any: ...


@dataclass
class Approval:
    tier: str
    started_s: float
    action_id: str | None = None
    kind: str | None = None
    value: Any = None
    cause: str | None = None
    pending_s: float | None = None
    approved_s: float | None = None
    applied_s: float | None = None
    http_status: int | None = None
    others: list[str] = field(default_factory=list)  # further pending actions the operator approved

    @property
    def done(self) -> bool:
        return self.applied_s is not None

    def gave_up(self, now_s: float) -> bool:
        return not self.done and now_s - self.started_s > WAIT_S

    def step(self, api: Api, now_s: float) -> list[str]:
        """One poll: approve what is pending, notice when the awaited action is applied. Returns lines to print."""
        lines: list[str] = []
        for row in api.api_get("/v1/actions", state="pending") or []:
            aid = str(row["id"])
            awaited = self.action_id is None and row.get("tier") == self.tier
            r = api.api_write("POST", f"/v1/actions/{aid}/approve", {"by": OPERATOR})
            if awaited:
                a = row.get("action") or {}
                self.action_id, self.kind, self.value, self.cause = aid, a.get("kind"), a.get("value"), a.get("regime")
                self.pending_s = float(row.get("decided_s") or now_s)
                self.http_status = int(r.status_code)
                if r.status_code == 200:
                    self.approved_s = now_s
                lines.append(
                    f"  pending: {aid} ({self.kind} -> {_shown(self.kind, self.value)}, cause {self.cause});"
                    f" POST /v1/actions/{aid}/approve with the bearer token -> {r.status_code}"
                )
            elif r.status_code == 200:
                self.others.append(aid)
                lines.append(f"  approved through the API: {aid}")
        if self.approved_s is not None and self.applied_s is None:
            for row in api.api_get("/v1/actions", state="applied", slice=self.tier) or []:
                if str(row["id"]) == self.action_id:
                    self.applied_s = float(row.get("applied_s") or now_s)
                    into = self.applied_s - self.started_s
                    lines.append(f"  applied: {self.action_id} {row.get('detail') or ''} ({into:.1f} s into the segment)")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "action_id": self.action_id,
            "kind": self.kind,
            "value": self.value,
            "cause": self.cause,
            "state": "applied" if self.done else "approved" if self.approved_s is not None else "pending" if self.action_id else "none",
            "pending_after_s": None if self.pending_s is None else round(self.pending_s - self.started_s, 2),
            "approved_after_s": None if self.approved_s is None else round(self.approved_s - self.started_s, 2),
            "applied_after_s": None if self.applied_s is None else round(self.applied_s - self.started_s, 2),
            "http_status": self.http_status,
            "approved_by": OPERATOR if self.approved_s is not None else None,
            "others_approved": list(self.others),
        }


def _shown(kind: str | None, value: Any) -> str:
    if kind == "set_cap" and isinstance(value, (int, float)):
        return f"{float(value) / 1e6:.2f} Mbit/s"
    return str(value)


def report_lines(approval: dict[str, Any] | None) -> list[str]:
    """The report's account of the segment (what was pending, who approved, when applied)."""
    if not approval:
        return []
    a = approval
    if a["state"] != "applied":
        return ["", f"Approve segment ({a['tier']}): NOT completed — the awaited action is {a['state']} after {WAIT_S:g} s."]
    return [
        "",
        f"Approve segment ({a['tier']}): {a['action_id']} ({a['kind']} -> {_shown(a['kind'], a['value'])}, cause {a['cause']})"
        f" was pending {a['pending_after_s']:.1f} s into the segment, approved by {a['approved_by']} through"
        f" POST /v1/actions/{a['action_id']}/approve (bearer token, HTTP {a['http_status']}), applied at"
        f" {a['applied_after_s']:.1f} s; the phase's verdicts are judged from then (its effect is in the actions table).",
    ]
