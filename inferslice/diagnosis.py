"""``Diagnosis``: the classifier's verdict on one snapshot, with its evidence."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Regime(enum.StrEnum):
    HEALTHY = "healthy"
    QUEUE_LIMITED = "queue_limited"
    NETWORK_LIMITED = "network_limited"
    COMPUTE_LIMITED = "compute_limited"
    UNKNOWN = "unknown"


BINDING_REGIMES: tuple[Regime, ...] = (Regime.QUEUE_LIMITED, Regime.NETWORK_LIMITED, Regime.COMPUTE_LIMITED)


class SloState(enum.StrEnum):
    MET = "met"
    BREACHED = "breached"
    AT_RISK = "at_risk"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Evidence:
    """One signal the verdict rests on: its value, what it was compared with, and the outcome."""

    signal: str
    value: float | None
    reference: float | None = None
    threshold: float | None = None
    crossed: bool = False
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "value": self.value,
            "reference": self.reference,
            "threshold": self.threshold,
            "crossed": self.crossed,
            "note": self.note,
        }


@dataclass(frozen=True)
class Diagnosis:
    slice: str
    regime: Regime
    secondary: tuple[Regime, ...] = ()
    confidence: float = 0.0
    slo: SloState = SloState.UNKNOWN
    evidence: tuple[Evidence, ...] = ()
    missing: tuple[str, ...] = field(default=())  # signals the classifier wanted but did not get
    id: str | None = None
    window_end_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "slice": self.slice,
            "regime": self.regime.value,
            "secondary": [r.value for r in self.secondary],
            "confidence": round(self.confidence, 4),
            "slo": self.slo.value,
            "evidence": [e.to_dict() for e in self.evidence],
            "missing": list(self.missing),
            "window_end_s": self.window_end_s,
        }
