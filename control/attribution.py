"""Read the diagnosis' latency attribution (seconds of TTFT/TPOT per resource) for the controller.

The attribution is the diagnosis' own (``Diagnosis.attribution``: a ``LatencyShare`` per statistic,
seconds of median and P99 TTFT and TPOT attributed to ``queue``, ``network``, ``compute`` and
``base``). This module is the one place that reads it, and falls back to the regime and its
secondaries (in the classifier's order) when a diagnosis carries none.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferslice.diagnosis import BINDING_REGIMES, RESOURCE_OF, Diagnosis, Regime
from inferslice.snapshot import SliceSnapshot


@dataclass(frozen=True)
class Attributed:
    regime: Regime
    ttft_p99_s: float | None  # seconds of P99 TTFT this resource explains (None: not attributed)
    tpot_s: float | None


def attributed(diagnosis: Diagnosis, resource: str, statistic: str) -> float | None:
    """Seconds of ``statistic`` (one of ``ATTRIBUTION_STATS``) attributed to ``resource``; None without one."""
    att = diagnosis.attribution
    share = att.share(statistic) if att is not None else None
    return share.seconds(resource) if share is not None else None


def causes(diagnosis: Diagnosis) -> list[Attributed]:
    """Binding resources, the one whose remedy comes first first.

    With an attribution: the primary regime first (the classifier puts first the resource whose
    remedy must come first: replicas never cure a bandwidth or GPU-share bottleneck), then the
    secondaries by attributed seconds of P99 TTFT, largest first. Without one: primary, then
    secondaries as listed."""
    regimes: list[Regime] = []
    if diagnosis.regime in BINDING_REGIMES:
        regimes.append(diagnosis.regime)
    for r in diagnosis.secondary:
        if r in BINDING_REGIMES and r not in regimes:
            regimes.append(r)
    out = [
        Attributed(r, attributed(diagnosis, RESOURCE_OF[r], "ttft_p99"), attributed(diagnosis, RESOURCE_OF[r], "tpot_p50")) for r in regimes
    ]
    head, rest = out[:1], out[1:]
    rest.sort(key=lambda a: -(a.ttft_p99_s or 0.0))  # stable: without attribution the listed order stays
    return head + rest


def queue_delay_s(diagnosis: Diagnosis, snapshot: SliceSnapshot | None) -> float:
    """Seconds of P99 TTFT spent queueing: the attribution, else measured queue time, else the TTFT
    excess over the reference (or the SLO's share of it), else 0."""
    att = attributed(diagnosis, "queue", "ttft_p99")
    if att is not None:
        return max(0.0, att)
    if snapshot is None:
        return 0.0
    if snapshot.queue_time_p99_s is not None:
        return snapshot.queue_time_p99_s
    if snapshot.ttft_p99_s is not None:
        ref = snapshot.ref_ttft_p50_s if snapshot.ref_ttft_p50_s is not None else snapshot.ref_ttft_mean_s
        return max(0.0, snapshot.ttft_p99_s - (ref or 0.0))
    return 0.0
