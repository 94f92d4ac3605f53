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
# The "confident" bar: a verdict at or above it is a fact its consumers may act on, below it a hint
# (confidence is calibrated: of the verdicts at confidence c, a fraction c is right; docs/diagnosis.md).
CONFIDENT = 0.6


class NetworkCause(enum.StrEnum):
    """Where the network binds a network-limited tier: the remedy differs, so the diagnosis says which.

    - ``edge_cap``: the slice's own cap at its client edge (``link_cap_bps``) paces its streams:
      raise the cap (within the tier's budget). Replicas cure nothing.
    - ``edge_capacity``: the uncapped client-edge link at its physical rate (``link_capacity_bps``):
      no cap to raise; more link (or moving traffic off it) is the remedy.
    - ``wan_link``: a WAN link on the tier's path at its physical rate (``wan_rx_bps`` near
      ``wan_capacity_bps``: cross-traffic, a degraded link) while the slice's own cap does not bind:
      a cap raise or a scale-out in place is futile; moving replicas to a PoP on another path cures it.
    - ``wan_delay``: the path's RTT above its reference (``wan_rtt_s`` vs ``wan_base_rtt_s``) adds to
      every first token: move replicas to a nearer PoP or a path without the delay.
    """

    EDGE_CAP = "edge_cap"
    EDGE_CAPACITY = "edge_capacity"
    WAN_LINK = "wan_link"
    WAN_DELAY = "wan_delay"


class SloState(enum.StrEnum):
    MET = "met"
    BREACHED = "breached"
    AT_RISK = "at_risk"
    UNKNOWN = "unknown"


# Not frozen: the classifier builds ~20 of these per window on its hot path, and a frozen dataclass
# costs 3x as much to construct (object.__setattr__ per field). Treat them as immutable all the same.
@dataclass(slots=True)
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


RESOURCES: tuple[str, ...] = ("queue", "network", "compute")  # what a latency excess is attributed to
ATTRIBUTION_STATS: tuple[str, ...] = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99")
REGIME_OF: dict[str, Regime] = {
    "queue": Regime.QUEUE_LIMITED,
    "network": Regime.NETWORK_LIMITED,
    "compute": Regime.COMPUTE_LIMITED,
}
RESOURCE_OF: dict[Regime, str] = {r: k for k, r in REGIME_OF.items()}  # a binding regime's resource


@dataclass(slots=True)  # not frozen for the same reason as Evidence; treat as immutable
class LatencyShare:
    """One latency statistic of one window split by resource, in seconds.

    ``queue_s + network_s + compute_s + base_s == observed_s``: ``base_s`` is the reference level
    plus whatever no resource explains. The excess over the reference is ``observed_s -
    reference_s`` (0 when the statistic sits at or below it, or has no reference).
    """

    stat: str  # one of ATTRIBUTION_STATS
    observed_s: float
    reference_s: float | None = None
    queue_s: float = 0.0
    network_s: float = 0.0
    compute_s: float = 0.0
    base_s: float = 0.0

    @property
    def excess_s(self) -> float:
        return max(0.0, self.observed_s - self.reference_s) if self.reference_s is not None else 0.0

    def seconds(self, resource: str) -> float:
        value: float = getattr(self, resource + "_s")
        return value

    def to_dict(self) -> dict[str, Any]:
        return {
            "observed_s": self.observed_s,
            "reference_s": self.reference_s,
            "queue_s": self.queue_s,
            "network_s": self.network_s,
            "compute_s": self.compute_s,
            "base_s": self.base_s,
        }


# slots, not frozen: built once a window on the classifier's hot path (see Diagnosis). Treat as immutable.
@dataclass(slots=True)
class Attribution:
    """Where one window's latency goes: a ``LatencyShare`` per statistic the window carries, and
    each resource's fraction (0-1) of the latency excess (``excess_share``; the largest fraction over
    the statistics whose excess is material, so TTFT and TPOT are not averaged into each other; the
    network's against its own bar, lower at a full link, and through a tail a full link lets count)."""

    shares: tuple[LatencyShare, ...] = ()
    excess_share: tuple[tuple[str, float], ...] = ()  # (resource, fraction), in RESOURCES order

    def share(self, stat: str) -> LatencyShare | None:
        return next((s for s in self.shares if s.stat == stat), None)

    def fraction(self, resource: str) -> float:
        return dict(self.excess_share).get(resource, 0.0)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {s.stat: s.to_dict() for s in self.shares}
        out["excess_share"] = dict(self.excess_share)
        return out


# slots, not frozen: one a window on the classifier's hot path (a frozen dataclass costs ~4x to
# construct: object.__setattr__ per field). Treat as immutable all the same (``dataclasses.replace``).
@dataclass(slots=True)
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
    attribution: Attribution | None = None  # None: no latency statistic to split
    slo_signal: str | None = None  # with slo at_risk/breached: the statistic nearest (or over) its SLO, e.g. "ttft_p99_s"
    # With network_limited as the primary or a secondary regime: which part of the network binds (the remedy follows it).
    network_cause: NetworkCause | None = None
    request_count: float | None = None  # the requests the window's TTFT quantiles rest on (None: not reported)

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
            "attribution": self.attribution.to_dict() if self.attribution is not None else None,
            "slo_signal": self.slo_signal,
            "network_cause": self.network_cause.value if self.network_cause is not None else None,
            "request_count": self.request_count,
        }
