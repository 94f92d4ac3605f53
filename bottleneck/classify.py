"""``classify``: which resource binds a slice in one window, read from TTFT, TPOT and the link together.

The rules follow the brief's signatures; no single utilisation metric decides anything:

- network-limited: the link runs at its cap (max(rx, tx) >= 0.9 x cap) AND token delivery suffers
  (TPOT inflated and/or output tokens/s below reference). A link at or above its cap while TPOT and
  throughput hold is healthy as far as the network goes.
- compute-limited: TPOT inflated while the link is known not to bind; KV cache pressure,
  preemptions, a reduced GPU share (and, weakly, high GPU utilisation) confirm it. With the link
  unknown, compute needs a strong confirmation, else the verdict is ``unknown``.
- queue-limited: TTFT inflated (against the reference and/or the SLO) while TPOT stays near its
  reference and the link does not bind; requests waiting, queue time and replicas at their ceiling
  confirm it. A standing queue at the replica ceiling (waiting >= ``queue_leading_ratio`` x running)
  is the same regime before TTFT shows it, since a queued request's TTFT is only observed when served.
- healthy: no binding signature and no SLO breach. unknown: the fields present cannot separate the
  cases; ``missing`` says what would have.

Regimes combine: when network or compute binds, queueing evidence (TTFT inflated plus a queue
confirmation) adds ``queue_limited`` as a secondary regime. The primary is the resource whose remedy
comes first: replicas never cure a bandwidth or a GPU-share bottleneck.

References: ``snapshot.ref_*`` first, then the ``Reference`` passed in, field by field. Without any,
TTFT is judged against the SLO only, TPOT against ``slo_tpot_p99_s`` or the absolute
``fallback_tpot_s`` (100 ms: the brief's unconstrained P99 TPOT is 26-38 ms, a throttled one
150-280 ms), and confidence is scaled by ``no_reference_confidence_factor``.
"""

from __future__ import annotations

from inferslice.bottleneck import signals
from inferslice.bottleneck.signals import Reading
from inferslice.bottleneck.thresholds import DEFAULT, Thresholds
from inferslice.diagnosis import Diagnosis, Evidence, Regime, SloState
from inferslice.snapshot import Reference, SliceSnapshot


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))


def _missing(*readings: Reading, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    out: list[str] = []
    for name in (*[m for r in readings for m in r.missing], *extra):
        if name not in out:
            out.append(name)
    return tuple(out)


def _queue_building(snap: SliceSnapshot, th: Thresholds) -> bool:
    """A standing queue at the replica ceiling (all three signals must be known)."""
    if snap.requests_waiting is None or snap.requests_running is None or snap.replicas is None or snap.replicas_max is None:
        return False
    at_ceiling = snap.replicas_max > 0 and snap.replicas >= snap.replicas_max
    return at_ceiling and snap.requests_waiting > 0 and snap.requests_waiting >= th.queue_leading_ratio * max(snap.requests_running, 1.0)


def classify(snapshot: SliceSnapshot, reference: Reference | None = None, thresholds: Thresholds = DEFAULT) -> Diagnosis:
    """Diagnose one snapshot. Pure; never raises for a snapshot built by ``snapshot_from_dict``."""
    th = thresholds
    snap = snapshot.with_reference(reference) if reference is not None else snapshot
    ttft = signals.ttft(snap, th)
    tpot = signals.tpot(snap, th)
    tokens = signals.tokens(snap, th)
    link = signals.link(snap, th)
    queue = signals.queue(snap, th)
    compute = signals.compute(snap, th)
    slo = signals.slo_state(snap, th)

    ref_source = "input" if snapshot.reference() is not None else (reference.source if reference is not None else "none")
    evidence: list[Evidence] = [
        *ttft.evidence,
        *tpot.evidence,
        *tokens.evidence,
        *link.evidence,
        *queue.evidence,
        *compute.evidence,
        Evidence(
            "reference_samples",
            float(reference.samples) if reference is not None and ref_source != "input" else None,
            note=f"reference source: {ref_source}",
        ),
    ]

    t_inflated, p_inflated = ttft.state, tpot.state
    delivery: bool | None
    if tpot.state is True or tokens.state is True:
        delivery = True
    elif tpot.state is False or tokens.state is False:
        delivery = False
    else:
        delivery = None
    queue_secondary = t_inflated is True and queue.hits > 0

    regime: Regime
    secondary: list[Regime] = []
    confidence: float
    missing: tuple[str, ...]

    if link.state is True and delivery is True:
        regime = Regime.NETWORK_LIMITED
        both = tpot.state is True and tokens.state is True
        confidence = 0.65 + (0.1 if both else 0.0) + (0.1 if t_inflated is True else 0.0)
        if queue_secondary:
            secondary.append(Regime.QUEUE_LIMITED)
        if p_inflated is True and compute.strong_hits > 0:
            secondary.append(Regime.COMPUTE_LIMITED)
        missing = _missing(tpot, tokens, ttft)
    elif p_inflated is True and (link.state is False or (link.state is None and compute.strong_hits > 0)):
        regime = Regime.COMPUTE_LIMITED
        # With the link unknown a strong compute confirmation carries the verdict, with less certainty.
        confidence = 0.55 + 0.1 * min(compute.hits, 3) if link.state is False else 0.35 + 0.1 * min(compute.strong_hits, 2)
        if queue_secondary:
            secondary.append(Regime.QUEUE_LIMITED)
        missing = _missing(link, compute, ttft)
    elif p_inflated is True:
        # TPOT inflated but nothing separates a bandwidth bottleneck from a compute one.
        regime, confidence = Regime.UNKNOWN, 0.0
        missing = _missing(link, tokens, compute)
        evidence.append(Evidence("verdict", None, note="TPOT inflated; link and compute signals cannot separate network from compute"))
    elif t_inflated is True and (p_inflated is False or (link.state is False and tokens.state is not True and queue.hits > 0)):
        # TPOT near its reference (or, without TPOT, link free and queue confirmed): requests wait for capacity.
        regime = Regime.QUEUE_LIMITED
        confidence = 0.6 if p_inflated is False else 0.45
        confidence += 0.1 if link.state is False else (0.0 if link.state is True else -0.1)
        confidence += 0.1 * min(queue.hits, 2)
        missing = _missing(tpot, link, queue)
        if link.state is True:
            evidence.append(
                Evidence("verdict", None, note="link at its cap but token delivery holds: utilisation alone is not a bottleneck")
            )
    elif t_inflated is True:
        regime, confidence = Regime.UNKNOWN, 0.0
        missing = _missing(tpot, link, queue)
        evidence.append(Evidence("verdict", None, note="TTFT inflated; without TPOT (or link and queue) the cause cannot be told"))
    elif link.state is not True and _queue_building(snap, th):  # TTFT and TPOT not (yet) inflated
        # Leading signature: requests wait at the replica ceiling; TTFT shows it as they are served.
        regime = Regime.QUEUE_LIMITED
        confidence = 0.5 + (0.1 if p_inflated is False else 0.0) + (0.1 if link.state is False else 0.0)
        missing = _missing(tpot, link, queue)
        evidence.append(
            Evidence(
                "verdict",
                None,
                note="requests wait at the replica ceiling: TTFT rises as they are served (queue leads the latency)",
            )
        )
    elif t_inflated is None and p_inflated is None:
        regime, confidence = Regime.UNKNOWN, 0.0
        missing = _missing(ttft, tpot, link)
        evidence.append(Evidence("verdict", None, note="no latency signal"))
    else:
        regime = Regime.HEALTHY
        known = sum(r.state is not None for r in (ttft, tpot, link))
        confidence = 0.45 + 0.15 * known
        if slo is SloState.AT_RISK:
            confidence -= 0.15
        elif slo is SloState.UNKNOWN:
            confidence -= 0.1
        missing = _missing(ttft, tpot, link)
        if link.state is True:
            evidence.append(
                Evidence("verdict", None, note="link at its cap but token delivery holds: utilisation alone is not a bottleneck")
            )

    if regime is not Regime.UNKNOWN:
        judged = [r for r in (ttft, tpot) if r.state is not None]
        if judged and not any(r.used_reference for r in judged):
            confidence *= th.no_reference_confidence_factor

    return Diagnosis(
        slice=snapshot.slice,
        regime=regime,
        secondary=tuple(secondary),
        confidence=round(_clamp(confidence), 4),
        slo=slo,
        evidence=tuple(evidence),
        missing=missing,
        id=snapshot.id,
        window_end_s=snapshot.window_end_s,
    )
