"""``Action``: what a control policy asks an actuator to do.

An action carries its own idempotency key (``id``): the controller derives it from the decision that
produced it, records it before applying, and an actuator that sees the same id twice does the work
once. Values are absolute targets (replicas, cap in bit/s, destination PoP), never deltas, so that
applying one again changes nothing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

# Outcomes of an action as the controller's metric ``inferslice_control_actions_total{outcome}``, the
# audit log and the dashboards name them. Its life: pending (waiting for an operator's approval),
# applied, rejected, failed; then the outcome check's verdict on an applied action, judged only on a
# diagnosis window measured under it (the window starts after the action took effect and reports the
# actuated value) and before any later action on the same tier and knob:
OUTCOME_APPLIED = "applied"
OUTCOME_PENDING = "pending"
OUTCOME_REJECTED = "rejected"
OUTCOME_FAILED = "failed"
OUTCOME_EFFECTIVE = "effective"  # its cause no longer binds
# the right remedy, too little: the cause still binds at its value (a raised cap the link fills), or a
# further step of the same knob followed it before a window could judge it
OUTCOME_INSUFFICIENT = "insufficient"
# its cause still binds and it did not help (a cap the link leaves unused): rolled back where safe,
# not repeated in the episode
OUTCOME_INEFFECTIVE = "ineffective"
OUTCOME_SUPERSEDED = "superseded"  # the knob was turned back (a rollback, a reclaim) before a window measured it
OUTCOME_UNJUDGED = "unjudged"  # no window measured it in time (the source never reported the actuated value)
JUDGED_OUTCOMES: tuple[str, ...] = (OUTCOME_EFFECTIVE, OUTCOME_INSUFFICIENT, OUTCOME_INEFFECTIVE, OUTCOME_SUPERSEDED, OUTCOME_UNJUDGED)


class ActionKind(enum.StrEnum):
    SET_REPLICAS = "set_replicas"
    SET_CAP = "set_cap"
    RELOCATE = "relocate"
    SET_GPU_SHARE = "set_gpu_share"
    NOOP = "noop"


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    slice: str
    value: float | str | None = None  # replicas, cap_bps, target PoP, share
    reason: str = ""
    regime: str | None = None  # the cause the action answers ("queue_limited", "forecast", "reclaim")
    id: str = ""  # idempotency key; empty only for actions nobody will apply
    replica: str | None = None  # RELOCATE: the replica that moves
    previous: float | str | None = None  # the value before, for rollback and the audit trail
    decided_s: float | None = None  # clock of the decision (unix seconds)
    expected_by_s: float | None = None  # when the cause should have cleared if the action works

    def to_dict(self) -> dict[str, Any]:
        """The five original keys always; the control fields only when set (older readers compare dicts)."""
        out: dict[str, Any] = {
            "kind": self.kind.value,
            "slice": self.slice,
            "value": self.value,
            "reason": self.reason,
            "regime": self.regime,
        }
        extra = {
            "id": self.id or None,
            "replica": self.replica,
            "previous": self.previous,
            "decided_s": self.decided_s,
            "expected_by_s": self.expected_by_s,
        }
        out.update({k: v for k, v in extra.items() if v is not None})
        return out


def action_from_dict(data: dict[str, Any]) -> Action:
    """Inverse of ``Action.to_dict`` (the audit log and the API store actions as JSON)."""
    return Action(
        kind=ActionKind(data["kind"]),
        slice=str(data["slice"]),
        value=data.get("value"),
        reason=str(data.get("reason", "")),
        regime=data.get("regime"),
        id=str(data.get("id", "")),
        replica=data.get("replica"),
        previous=data.get("previous"),
        decided_s=data.get("decided_s"),
        expected_by_s=data.get("expected_by_s"),
    )
