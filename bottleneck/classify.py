"""``classify``: which resource binds a slice in one window, derived from where its latency goes.

``attribution.attribute`` splits the excess of each latency statistic over the reference into queue,
network and compute (and an unexplained ``base``). The regimes follow from that split:

- a statistic's excess is *material* when it inflates the statistic past its ratio (TTFT x3, median
  TPOT x1.5, P99 TPOT x2, each against the same statistic of the reference), or when the P99 TTFT
  breaches the SLO. The median decides when the window has one: a P99 alone counts only when it
  breaches the SLO (TTFT) or there is no median;
- a resource *binds* when its own share of a judged statistic is material (or, for a breached
  statistic, when it explains most of the excess);
- the primary regime is the binding resource whose remedy comes first: network, then compute, then
  queue (replicas cure neither a cap nor a GPU share); ``secondary`` lists every other resource that
  explains at least ``secondary_share`` of a material excess;
- healthy: nothing binds. An SLO at risk shows in ``slo`` and ``slo_signal``, never in the regime.
  A standing queue at the replica ceiling is the one binding signature read from gauges alone (a
  queued request's TTFT is only observed when it is served), at lower confidence;
- unknown: the fields present cannot separate the causes (TPOT up with the link unknown and no
  compute confirmation; TTFT up without TPOT or a free link with a queue confirmation).

Confidence says how complete the evidence is. A verdict that a missing field could overturn is
capped below ``CONFIDENT`` (0.6): throughput missing (load cannot explain TPOT), the link unknown
or judged against the physical rate only (a cap could take the TPOT share), a fallback reference.
Removing a field therefore never turns a confident verdict into a different confident one.
"""

from __future__ import annotations

from inferslice.bottleneck import signals
from inferslice.bottleneck.attribution import Physics, attribute
from inferslice.bottleneck.signals import Reading
from inferslice.bottleneck.thresholds import DEFAULT, Thresholds
from inferslice.diagnosis import REGIME_OF, RESOURCES, Attribution, Diagnosis, Evidence, LatencyShare, Regime, SloState
from inferslice.snapshot import Reference, SliceSnapshot

CONFIDENT = 0.6  # the learner's bar too: a verdict below it is a hint, not a fact
UNSURE = 0.55  # the cap for a verdict a missing field could overturn
ORDER = ("network", "compute", "queue")  # remedies in the order they must come
UNSEPARATED = "TPOT inflated beyond what load explains; link and compute signals cannot separate network from compute"


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))


def _missing(*readings: Reading) -> tuple[str, ...]:
    out: list[str] = []
    for name in (m for r in readings for m in r.missing):
        if name not in out:
            out.append(name)
    return tuple(out)


def _queue_building(snap: SliceSnapshot, th: Thresholds) -> bool:
    """A standing queue at the replica ceiling (all three signals must be known)."""
    if snap.requests_waiting is None or snap.requests_running is None or snap.replicas is None or snap.replicas_max is None:
        return False
    at_ceiling = snap.replicas_max > 0 and snap.replicas >= snap.replicas_max
    return at_ceiling and snap.requests_waiting > 0 and snap.requests_waiting >= th.queue_leading_ratio * max(snap.requests_running, 1.0)


def _threshold(s: LatencyShare, th: Thresholds) -> float:
    ratio = {
        "ttft_p50": th.ttft_inflation_ratio,
        "ttft_p99": th.ttft_tail_inflation_ratio,
        "tpot_p50": th.tpot_inflation_ratio,
        "tpot_p99": th.tpot_tail_inflation_ratio,
    }[s.stat]
    return (ratio - 1.0) * (s.reference_s or 0.0)


class _Judge:
    """Materiality of each statistic and resource, from one attribution."""

    def __init__(self, attribution: Attribution, snap: SliceSnapshot, th: Thresholds, tpot_stat: str | None) -> None:
        slo = signals.slo_ttft_s(snap, th)
        self.th = th
        self.shares = attribution.shares
        self.thr = {s.stat: _threshold(s, th) for s in self.shares}
        self.breached = {s.stat: s.stat == "ttft_p99" and s.observed_s > slo and s.excess_s > 0 for s in self.shares}
        self.material = {s.stat: (s.excess_s > 0 and s.excess_s >= self.thr[s.stat]) or self.breached[s.stat] for s in self.shares}
        stats = {s.stat for s in self.shares}
        # The median decides when the window has one: a tail statistic alone never overrules it (a P99
        # TTFT still counts once it breaches the SLO: that is the promise the tier made).
        self.tpot_stat = tpot_stat
        self.ttft_median = "ttft_p50" in stats

    def judged(self, s: LatencyShare) -> bool:
        if s.stat.startswith("tpot"):
            return s.stat == self.tpot_stat
        return s.stat == "ttft_p50" or self.breached[s.stat] or not self.ttft_median

    def binds(self, resource: str) -> bool:
        for s in self.shares:
            if not self.judged(s) or (resource == "queue" and s.stat.startswith("tpot")):
                continue
            sec = s.seconds(resource)
            if sec > 0 and (sec >= self.thr[s.stat] or (self.breached[s.stat] and sec >= 0.5 * s.excess_s)):
                return True
        return False

    def fractions(self) -> dict[str, float]:
        out = dict.fromkeys(RESOURCES, 0.0)
        for s in self.shares:
            if self.material[s.stat] and s.excess_s > 0 and self.judged(s):
                for r in RESOURCES:
                    out[r] = max(out[r], s.seconds(r) / s.excess_s)
        return {r: round(min(1.0, v), 4) for r, v in out.items()}

    def secondary(self, resource: str, fractions: dict[str, float]) -> bool:
        if fractions[resource] < self.th.secondary_share:
            return False
        return any(self.material[s.stat] and s.seconds(resource) >= 0.5 * self.thr[s.stat] for s in self.shares if self.judged(s))

    def any_material(self, prefix: str) -> bool:
        return any(self.material[s.stat] for s in self.shares if s.stat.startswith(prefix) and self.judged(s))

    def largest(self) -> str | None:
        best: tuple[float, str] | None = None
        for s in self.shares:
            if self.material[s.stat] and self.judged(s):
                for r in ORDER:
                    if s.seconds(r) > 0 and (best is None or s.seconds(r) > best[0]):
                        best = (s.seconds(r), r)
        return best[1] if best else None


def _physics_evidence(ph: Physics, snap: SliceSnapshot) -> list[Evidence]:
    ev = [
        Evidence(
            "tpot_load_factor",
            round(ph.load_factor, 4),
            reference=snap.ref_output_tokens_per_s,
            note="expected/reference TPOT at this token rate (decode batching)"
            if ph.load_known
            else "throughput or its reference unknown: load explains nothing",
        ),
        Evidence("compute_factor", round(ph.compute_factor, 4), note="engine TPOT over the load-expected TPOT (prefill slows alike)"),
    ]
    if ph.engine_slowdown > 1.0:
        ev.append(
            Evidence("engine_slowdown", round(ph.engine_slowdown, 4), note="1 / GPU share: the engine's pace under the reduced share")
        )
    if ph.little_wait_s is not None:
        ev.append(Evidence("little_wait_s", ph.little_wait_s, note="Little's law: requests waiting / arrival rate"))
    return ev


def classify(snapshot: SliceSnapshot, reference: Reference | None = None, thresholds: Thresholds = DEFAULT) -> Diagnosis:
    """Diagnose one snapshot. Pure; never raises for a snapshot built by ``snapshot_from_dict``."""
    th = thresholds
    snap = snapshot.with_reference(reference) if reference is not None else snapshot
    attribution, ph = attribute(snap, th, reference.tokens_per_s_saturation if reference is not None else None)
    refs = ph.refs
    ttft = signals.ttft(snap, th, refs)
    tpot = signals.tpot(snap, th, refs)
    tokens = signals.tokens(snap, th)
    link = signals.link(snap, th, ph.link)
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
        *_physics_evidence(ph, snap),
        Evidence(
            "reference_samples",
            float(reference.samples) if reference is not None and ref_source != "input" else None,
            note=f"reference source: {ref_source}",
        ),
    ]
    judge = _Judge(attribution, snap, th, ph.tpot_stat)
    fractions = judge.fractions()
    attribution = Attribution(attribution.shares, tuple((r, fractions[r]) for r in RESOURCES))
    missing = _missing(ttft, tpot, tokens, link, queue, compute)

    has_ttft = any(s.stat.startswith("ttft") for s in attribution.shares)
    has_tpot = judge.tpot_stat is not None
    ttft_up = judge.any_material("ttft")
    tpot_up = ph.tpot_contention_s >= ph.tpot_threshold_s > 0
    regime: Regime
    secondary: list[Regime] = []
    confidence = 0.0
    note: str | None = None
    binding = [r for r in ORDER if judge.binds(r)]
    if not has_ttft and not has_tpot:
        regime, note = Regime.UNKNOWN, "no latency signal"
    elif ph.unseparated:
        regime, note = (
            Regime.UNKNOWN,
            UNSEPARATED,
        )
    elif ttft_up and not has_tpot and not ("network" in binding or (ph.link.known and not ph.link.binding and queue.hits > 0)):
        regime, note = Regime.UNKNOWN, "TTFT inflated; without TPOT (or a free link and a queue confirmation) the cause cannot be told"
    else:
        if not binding and (ttft_up or tpot_up):
            top = judge.largest()
            binding = [top] if top is not None else []
        if binding:
            primary = binding[0]
            regime = REGIME_OF[primary]
            secondary = [REGIME_OF[r] for r in ORDER if r != primary and (r in binding or judge.secondary(r, fractions))]
            secondary = [r for r in secondary if r is not Regime.QUEUE_LIMITED or judge.secondary("queue", fractions) or "queue" in binding]
            confidence = _confidence(primary, ph, snap, th, judge, ttft_up, tpot_up, tokens, queue, compute, has_tpot)
        elif ph.link.binding is not True and _queue_building(snap, th):
            regime = Regime.QUEUE_LIMITED
            confidence = 0.5
            note = "requests wait at the replica ceiling: TTFT rises as they are served (queue leads the latency)"
        else:
            regime = Regime.HEALTHY
            confidence = _healthy_confidence(ph, snap, slo, has_ttft, has_tpot, ttft)
            if ph.link.binding:
                note = "link at its cap but token delivery holds: utilisation alone is not a bottleneck"
    if note is not None:
        evidence.append(Evidence("verdict", None, note=note))
    if regime is Regime.QUEUE_LIMITED and ph.link.binding and "network" not in binding:
        evidence.append(Evidence("verdict", None, note="link at its cap but token delivery holds: utilisation alone is not a bottleneck"))
    if regime is not Regime.UNKNOWN:
        judged = [r for r in (ttft, tpot) if r.evidence]
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
        attribution=attribution if attribution.shares else None,
        slo_signal=signals.slo_signal(snap, th, slo),
    )


def _confidence(
    primary: str,
    ph: Physics,
    snap: SliceSnapshot,
    th: Thresholds,
    judge: _Judge,
    ttft_up: bool,
    tpot_up: bool,
    tokens: Reading,
    queue: Reading,
    compute: Reading,
    has_tpot: bool,
) -> float:
    refs = ph.refs
    if primary == "network":
        c = 0.6 + (0.1 if tpot_up and tokens.state is True else 0.0) + (0.1 if ttft_up else 0.0)
        c += 0.1 if ph.link.against == "cap" else 0.0
        return min(c, UNSURE) if not ph.load_known else c
    if primary == "compute":
        if not ph.link.known:
            return min(UNSURE, 0.35 + 0.1 * min(compute.strong_hits, 2))
        c = 0.55 + 0.1 * min(compute.hits, 3)
        # Judged against the physical rate, a cap the window did not report could take this share,
        # unless the reduced GPU share alone explains the TPOT.
        explained = ph.engine_slowdown >= ph.compute_factor > 1.0
        if not ph.load_known or (ph.link.against != "cap" and not explained):
            c = min(c, UNSURE)
        return c
    c = (0.6 if has_tpot else 0.45) + (0.1 if ph.link.known else -0.1) + 0.1 * min(queue.hits, 2)
    network_could = ph.tpot_contention_s > 0 and th.first_chunk_tpot_multiple * ph.tpot_contention_s >= 0.5 * max(
        (s.excess_s for s in judge.shares if s.stat.startswith("ttft")), default=0.0
    )
    if not ph.link.known or (ph.link.against != "cap" and network_could):
        c = min(c, UNSURE)  # a binding link would take this TTFT as first-chunk delivery
    if refs.ttft_kind == "fallback" and not _robust_ttft(snap, th):
        c = min(c, UNSURE)
    return c


def _robust_ttft(snap: SliceSnapshot, th: Thresholds) -> bool:
    """Without a TTFT reference: is TTFT inflated against any reference that meets the SLO?"""
    slo = signals.slo_ttft_s(snap, th)
    p50 = snap.ttft_p50_s if snap.ttft_p50_s is not None else snap.ttft_mean_s
    return (snap.ttft_p99_s is not None and snap.ttft_p99_s >= th.ttft_tail_inflation_ratio * slo) or (
        p50 is not None and p50 >= th.ttft_inflation_ratio * slo / th.ttft_tail_prior
    )


def _healthy_confidence(ph: Physics, snap: SliceSnapshot, slo: SloState, has_ttft: bool, has_tpot: bool, ttft: Reading) -> float:
    known = int(has_ttft) + int(has_tpot) + int(ph.link.known)
    c = 0.45 + 0.15 * known
    if slo is SloState.AT_RISK:
        c -= 0.15
    elif slo is SloState.UNKNOWN:
        c -= 0.1
    refs = ph.refs
    if refs.ttft_kind == "fallback" or refs.tpot_kind == "fallback" or not has_ttft or not has_tpot:
        c = min(c, UNSURE)  # a reference (or a statistic) the window lacks could show an inflation
    return c
