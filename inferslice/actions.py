"""``Action``: what a control policy asks an actuator to do."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


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
    regime: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "slice": self.slice, "value": self.value, "reason": self.reason, "regime": self.regime}
