"""The actuator interface every backend implements (testbed, Ray Serve, Kubernetes).

An actuator turns an ``Action`` into a change of the serving system and reports what the system
looks like now. Three rules every implementation keeps, because the controller relies on them to
survive a crash without losing or duplicating work:

- ``apply`` is idempotent by ``action.id``: values are absolute targets (replicas N, cap C bit/s,
  replica R at PoP P), so a second call with the same action finds the target already reached and
  returns ``ApplyStatus.ALREADY_APPLIED`` without touching anything. The controller re-applies every
  action that was recorded but not confirmed when it restarts.
- A change that takes time (a relocation is make-before-break: the new replica must serve before the
  old one drains) returns ``ApplyStatus.IN_PROGRESS``; calling ``apply`` again with the same action
  advances it and eventually returns ``APPLIED``. An actuator never blocks for a cold start.
- Failures are typed: ``RetryableActuatorError`` (timeout, refused connection, conflict that will
  clear: try the same action again later) or ``PermanentActuatorError`` (unknown tier, value out of the
  backend's bounds, unsupported kind: retrying only hides the bug; the controller records it as failed).

``observe`` reads the actuated state of every tier the backend serves (replica targets and
placements, caps), so the controller decides from what is, not from what it last asked for.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from inferslice.actions import Action, ActionKind
from inferslice.errors import PermanentError, RetryableError
from inferslice.placement import ReplicaPlacement

__all__ = ["ReplicaPlacement"]  # re-exported: observations carry the vocabulary's one placement type


class ActuatorError(Exception):
    """Base of the actuator errors; always raised as one of the two subclasses below."""


class RetryableActuatorError(ActuatorError, RetryableError):
    """The same action may succeed later (backend busy, unreachable, timed out)."""


class PermanentActuatorError(ActuatorError, PermanentError):
    """The action cannot succeed as given (unknown tier, out of bounds, unsupported kind)."""


class ApplyStatus(enum.StrEnum):
    APPLIED = "applied"  # the target is reached by this call
    ALREADY_APPLIED = "already_applied"  # the target was already reached (a repeat of the same id)
    IN_PROGRESS = "in_progress"  # accepted; call apply again with the same action to advance it


@dataclass(frozen=True)
class TierObservation:
    """What one tier looks like in the backend right now."""

    tier: str
    replicas_target: int
    replicas: tuple[ReplicaPlacement, ...] = ()
    cap_bps: float | None = None  # client-edge (receive) cap; None = uncapped
    externally_controlled: bool = True  # False while the backend's own autoscaler owns the count

    @property
    def replicas_ready(self) -> int:
        return sum(1 for r in self.replicas if r.state == "ready")

    def to_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "replicas_target": self.replicas_target,
            "replicas_ready": self.replicas_ready,
            "replicas": [r.__dict__ for r in self.replicas],
            "cap_bps": self.cap_bps,
            "externally_controlled": self.externally_controlled,
        }


@dataclass(frozen=True)
class ApplyResult:
    action_id: str
    status: ApplyStatus
    detail: str = ""
    observed: TierObservation | None = field(default=None)  # the tier after the call, when cheap to read


@runtime_checkable
class Actuator(Protocol):
    """One backend. ``kinds`` says which ``ActionKind`` it can apply (others are a permanent error)."""

    name: str
    kinds: frozenset[ActionKind]

    def observe(self) -> Mapping[str, TierObservation]:
        """Every tier's actuated state; ``RetryableActuatorError`` when the backend cannot be read now."""
        ...

    def apply(self, action: Action) -> ApplyResult:
        """Drive the backend toward ``action``'s target; idempotent by ``action.id`` (see module doc)."""
        ...


def require_kind(actuator: Actuator, action: Action) -> None:
    """Shared guard: refuse kinds the backend does not implement, permanently."""
    if action.kind not in actuator.kinds:
        supported = sorted(k.value for k in actuator.kinds)
        raise PermanentActuatorError(f"{actuator.name}: cannot apply {action.kind.value} (supports {supported})")
    if not action.id:
        raise PermanentActuatorError(f"{actuator.name}: action without an id cannot be applied idempotently")
