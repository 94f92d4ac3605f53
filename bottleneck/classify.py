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
- a cause the window measures directly binds by itself: a WAN RTT step that adds at least
  ``delay_material_slo_fraction`` of the SLO to every first token (6 s windows' TTFT histogram
  quantiles cannot resolve it), and at a full link the P99 TTFT counts beside a median at its
  reference (first chunks wait in the link's buffer, the median's often do not), and the network
  binds through a TTFT statistic from 1.5x its reference (``ttft_link_inflation_ratio``, v11; the
  queue and compute keep their 3x);
- the window after a co-tenant left (``prior_gpu_share``, v14): compute at ``TAIL`` (0.25), under
  every bar that acts or pages, where the verdict would otherwise be healthy; and (v18) where it
  would be the queue: the queue is the backlog the slowed engines left, secondary to compute at
  ``TAIL`` (the next window, with no drop before it, reads the queue on its own if it still stands);
- a measured delay binds only where it is a material part of what the first tokens lost
  (``delay_excess_share`` of the TTFT excess, the P99's where measured, v18): a 130 ms step
  beside a queue that holds first tokens for seconds is not what binds;
- healthy: nothing binds. An SLO at risk shows in ``slo`` and ``slo_signal``, never in the regime.
  A tier with nothing served, running or waiting in the window is healthy (idle), not unknown
  (served: the TTFT histogram's count, or the SLO request rate before that series exists).
  A standing queue at the replica ceiling is the one binding signature read from gauges alone (a
  queued request's TTFT is only observed when it is served), at lower confidence, from three
  requests waiting (v18: one or two are arrivals between the engine's scheduling steps);
- unknown: the fields present cannot separate the causes (TPOT up with the link unknown and no
  compute confirmation; TTFT up without TPOT or a free link with a queue confirmation).

Confidence is calibrated (``confidence``): a margin (how far the primary's share passes its
threshold, less how near a resource whose remedy comes first is to binding) mapped through a table
fitted on the corpus's seen seeds. A verdict that a field the window lacks could overturn is capped
at ``UNSURE`` (0.55), below ``CONFIDENT`` (0.6), whatever its margin: throughput missing (load
cannot explain TPOT), the link unknown or judged against the physical rate only (a cap could take
the TPOT share), a fallback reference, a queue verdict with no queue seen (or, at a full link,
without the gauge and both TPOT statistics), a healthy TTFT past a full link's bar with the link's
state incomplete, too few requests for the quantile the verdict rests on (one binding through
several statistics rests on those its counts bound, v11), a full WAN link judged without both TTFT
statistics or a material WAN delay with none (v15), a delay that shows judged without the
measured P99 TTFT (v18). Removing a field therefore never turns a
confident verdict into a different confident one (property-tested, and tested over every committed
corpus window).
"""

from __future__ import annotations

import math

from inferslice.bottleneck import calibration, confidence, signals, unsure
from inferslice.bottleneck.attribution import Physics, Refs, attribute, ge, settle
from inferslice.bottleneck.judge import EPS, INDEX, ORDER, RATIO_MAX, Judge, binding_margin
from inferslice.bottleneck.rounding import r4
from inferslice.bottleneck.signals import Reading
from inferslice.bottleneck.thresholds import DEFAULT, Thresholds
from inferslice.diagnosis import CONFIDENT, REGIME_OF, RESOURCE_OF, Attribution, Diagnosis, Evidence, NetworkCause, Regime
from inferslice.snapshot import Reference, SliceSnapshot

__all__ = ["CONFIDENT", "TAIL", "UNSURE", "classify"]  # CONFIDENT lives in the vocabulary; re-exported for callers of old
UNSURE = 0.55  # the cap for a verdict a missing field could overturn
# A verdict on a cause that has already left (``_contention_tail``): it says why the window was slow,
# not what to do, so it sits under the controller's action bar (``ControlSettings.min_confidence``
# 0.4) and the episodes' (``HysteresisPolicy.min_confidence`` 0.3): it neither moves a knob nor opens,
# confirms or closes an episode (nobody is paged for a co-tenant that has gone).
TAIL = 0.25
TAIL_NOTE = "GPU share the window before reported (the co-tenant has left since)"
UNSEPARATED = "TPOT inflated beyond what load explains; link and compute signals cannot separate network from compute"


def regime_resource(regime: Regime) -> str:
    return next(r for r, g in REGIME_OF.items() if g is regime)


def _missing(*readings: Reading) -> tuple[str, ...]:
    """Every field the readings wanted and did not get, once each, in the readings' order."""
    names: list[str] | None = None
    for r in readings:
        if r.missing:
            if names is None:
                names = []
            names.extend(r.missing)
    return tuple(dict.fromkeys(names)) if names is not None else ()


def _idle(snap: SliceSnapshot) -> bool:
    """No request served, running or waiting in the window (every one of the three known), and no
    token delivered or TPOT observed where those are reported (tokens flowing are not idle). With no
    replica up nothing can run: the engines' running gauge is absent then, not unknown. Served:
    ``confidence.served`` (the TTFT histogram's count, or 0 before that series exists when the SLO
    request rate reads 0), the count the sampling caps read too."""
    running = snap.requests_running if snap.requests_running is not None or snap.replicas != 0 else 0.0
    gauges = (confidence.served(snap), running, snap.requests_waiting)
    flowing = (snap.tpot_request_count, snap.output_tokens_per_s)
    return all(g is not None and g <= 0 for g in gauges) and not any(f is not None and not f <= 0 for f in flowing)


def _delay_shown(attribution: Attribution, delay_ttft_s: float, th: Thresholds) -> list[str]:
    """The TTFT statistics whose excess over the reference shows the measured delay (enough of it)."""
    bar = th.delay_shown_fraction * delay_ttft_s
    return [
        s.stat
        for s in attribution.shares
        if s.stat.startswith("ttft") and s.reference_s is not None and ge(s.observed_s - s.reference_s, bar)
    ]


def _delay_judged(attribution: Attribution, refs: Refs) -> tuple[float | None, bool]:
    """The TTFT excess a delay that shows is judged against (v18), and whether it is the P99's against
    its measured reference: the P99 is the SLO's statistic and the truth's; without it (or with a
    reference the prior derived) the median's, or the mean's that stands in for a missing median.
    A delay under ``delay_excess_share`` of it does not bind: beside a 10 s queue a 130 ms step is not
    what the first tokens lost, and removing it would leave the breach. A verdict not judged on the
    measured P99 is capped: the P99 could say otherwise."""
    p50: float | None = None
    p99: float | None = None
    for s in attribution.shares:
        if s.reference_s is not None:
            if s.stat == "ttft_p99":
                p99 = s.observed_s - s.reference_s
            elif s.stat == "ttft_p50":
                p50 = s.observed_s - s.reference_s
    if p99 is not None and refs.ttft_tail_kind == "ref":
        return p99, True
    return (p50 if p50 is not None else p99), p50 is None and p99 is None


def _queue_building(snap: SliceSnapshot, th: Thresholds) -> bool:
    """A standing queue at the replica ceiling (all three signals must be known): more than the
    arrivals an engine's scheduling step holds at an instant (``queue_leading_min_waiting``, v18)."""
    if snap.requests_waiting is None or snap.requests_running is None or snap.replicas is None or snap.replicas_max is None:
        return False
    at_ceiling = snap.replicas_max > 0 and snap.replicas >= snap.replicas_max
    return at_ceiling and snap.requests_waiting >= max(th.queue_leading_min_waiting, th.queue_leading_ratio * snap.requests_running)


_REF_FIELDS = (
    "ref_ttft_p50_s",
    "ref_ttft_mean_s",
    "ref_tpot_p50_s",
    "ref_tpot_mean_s",
    "ref_output_tokens_per_s",
    "ref_ttft_p99_s",
    "ref_tpot_p99_s",
)


# The confidences a verdict takes (the calibration table's, the caps, 0 and 1) that ``round(x, 4)``
# returns unchanged: most windows' confidence is one of these, and rounding costs a decimal conversion.
_FIXED_R4 = frozenset(
    c
    for c in (0.0, 1.0, UNSURE, TAIL, calibration.UNCALIBRATED, *(p for steps in calibration.TABLE.values() for _, p in steps))
    if round(c, 4) == c
)


def _clamp_r4(conf: float) -> float:
    """``round(min(1.0, max(0.0, conf)), 4)``."""
    c = min(1.0, max(0.0, conf))
    return c if c in _FIXED_R4 else round(c, 4)


def _physics_evidence(ph: Physics, snap: SliceSnapshot) -> list[Evidence]:
    ev = [
        Evidence(
            "tpot_load_factor",
            r4(ph.load_factor),
            reference=snap.ref_output_tokens_per_s,
            note="expected/reference TPOT at this token rate (decode batching)"
            if ph.load_known
            else "throughput or its reference unknown: load explains nothing",
        ),
        Evidence("compute_factor", r4(ph.compute_factor), note="engine TPOT over the load-expected TPOT (prefill slows alike)"),
    ]
    if ph.engine_slowdown > 1.0:
        ev.append(Evidence("engine_slowdown", r4(ph.engine_slowdown), note="1 / GPU share: the engine's pace under the reduced share"))
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

    sn = snapshot
    inline = not (
        sn.ref_ttft_p50_s is None
        and sn.ref_ttft_mean_s is None
        and sn.ref_tpot_p50_s is None
        and sn.ref_tpot_mean_s is None
        and sn.ref_output_tokens_per_s is None
        and sn.ref_ttft_p99_s is None
        and sn.ref_tpot_p99_s is None
    )
    ref_source = "input" if inline else (reference.source if reference is not None else "none")
    evidence: list[Evidence] = [
        *ttft.evidence,
        *tpot.evidence,
        *tokens.evidence,
        *link.evidence,
        *queue.evidence,
        *compute.evidence,
        *signals.wan(snap, th, ph.delay_s),
        *_physics_evidence(ph, snap),
        Evidence(
            "reference_samples",
            float(reference.samples) if reference is not None and ref_source != "input" else None,
            note=f"reference source: {ref_source}",
        ),
    ]
    wan_quiet = _wan_tail_quiet(attribution, ph, th)
    held = ph.link.binding or ph.coalesced
    judge = Judge(attribution, snap, th, ph.tpot_stat, held, ph.compute_confirmed, False, wan_quiet, ph.link.binding)
    # The median's drift is read only where TPOT alone would decide: beside a material TTFT (a
    # queue binding, say) the median still says how much of it compute shares.
    drift = _median_drift(snap, ph, th) and not judge.any_material(tpot=False)
    if drift:
        judge = Judge(attribution, snap, th, ph.tpot_stat, held, ph.compute_confirmed, True, wan_quiet, ph.link.binding)
    fractions = judge.fractions()
    # RESOURCES' order (queue, network, compute), spelt out: a generator a window costs more.
    attribution = Attribution(
        attribution.shares, (("queue", fractions["queue"]), ("network", fractions["network"]), ("compute", fractions["compute"]))
    )
    missing = _missing(ttft, tpot, tokens, link, queue, compute)

    has_ttft = False
    for share in attribution.shares:
        if share.stat[1] == "t":  # ttft_*: the shares are named ttft_p50, ttft_p99, tpot_p50, tpot_p99
            has_ttft = True
            break
    has_tpot = judge.tpot_stat is not None
    ttft_up = judge.any_material(tpot=False)
    tpot_up = not drift and ph.tpot_threshold_s > 0 and ge(ph.tpot_contention_s, ph.tpot_threshold_s)
    regime: Regime
    secondary: list[Regime] = []
    note: str | None = None
    caps: list[str] = []
    margin = 0.0
    rests_on: list[str] = []  # the statistics the verdict rests on (their request counts must bound them)
    slack = False  # healthy, every resource slack by its gauges (``unsure.resources_slack``)
    tail = False  # compute read from the window before's GPU share (``_contention_tail``), held at TAIL
    tops = judge._top(False)
    binding: list[str] = []
    for r in ORDER:  # a loop: a comprehension costs a frame a window
        if tops[INDEX[r]] >= 1.0 - EPS:
            binding.append(r)
    # A measured delay binds the network whatever the quantiles resolve (``delay_material_slo_fraction``),
    # where the first tokens show it (``delay_shown_fraction`` of it in a TTFT statistic's excess).
    delay_bar = th.delay_material_slo_fraction * signals.slo_ttft_s(snap, th)
    material_delay = delay_bar > 0 and ge(ph.delay_ttft_s, delay_bar)
    # ... and only where it is a material part of the first tokens' excess (``_delay_judged``, v18).
    delay_shown_any = _delay_shown(attribution, ph.delay_ttft_s, th) if material_delay else []
    delay_excess, delay_on_p99 = _delay_judged(attribution, ph.refs) if delay_shown_any else (None, True)
    delay_counts = delay_excess is None or ge(ph.delay_ttft_s, th.delay_excess_share * delay_excess)
    delay_shown = delay_shown_any if delay_counts else []
    delay_margin = math.log2(min(ph.delay_ttft_s / delay_bar, RATIO_MAX)) if delay_shown else 0.0
    delay_rests = [st for st in delay_shown if st.endswith("p50")] or delay_shown  # a median needs fewer requests
    delay_binds = bool(delay_shown) and "network" not in binding
    if delay_binds:
        binding.insert(0, "network")
    idle = not has_ttft and not has_tpot and _idle(snap)
    if idle:
        # Nothing in flight, nothing waiting, nothing served: no request to be slow, no resource to
        # bind. A stalled tier shows requests running or waiting; without those gauges it stays unknown.
        regime, note = Regime.HEALTHY, "idle: no request in flight, waiting or served in the window"
        margin = math.log2(RATIO_MAX)
    elif not has_ttft and not has_tpot:
        regime, note = Regime.UNKNOWN, "no latency signal"
    elif ph.unseparated:
        regime, note = Regime.UNKNOWN, UNSEPARATED
    elif ttft_up and not has_tpot and not ("network" in binding or (ph.link.known and not ph.link.binding and queue.hits > 0)):
        regime, note = Regime.UNKNOWN, "TTFT inflated; without TPOT (or a free link and a queue confirmation) the cause cannot be told"
    else:
        named = False
        if not binding and (ttft_up or tpot_up):
            top = judge.largest()
            binding = [top] if top is not None else []
            named = bool(binding)
        share_cut = bool(binding) and binding[0] == "queue" and ph.engine_slowdown > 1.0 and "compute" not in binding
        if share_cut:
            # A reported GPU-share drop slows every replica of the tier by 1 / share: the queue is
            # what the slower engines leave behind, and moving them comes before adding replicas.
            binding.insert(0, "compute")
        # v18: a queue in the window after a GPU-share drop (the co-tenant has left since) is the backlog
        # the slowed engines left: compute's, read at TAIL like ``_contention_tail`` (nothing to remedy
        # that the drained queue will not); the queue stays secondary.
        backlog = not named and bool(binding) and binding[0] == "queue" and not share_cut and "compute" not in binding
        backlog = backlog and _share_left(snap, th)
        if backlog:
            binding.insert(0, "compute")
            tail = True
        if binding:
            primary = binding[0]
            regime = REGIME_OF[primary]
            secondary = [REGIME_OF[r] for r in ORDER if r != primary and (r in binding or judge.secondary(r, fractions))]
            secondary = [r for r in secondary if r is not Regime.QUEUE_LIMITED or judge.secondary("queue", fractions) or "queue" in binding]
            if named:
                caps.append("no resource's share is material alone: the largest is named")
                rests_on = [r[0] for r in judge.rows if r[4] and r[6]]
            elif backlog or share_cut:
                margin, rests_on = 0.0, [r[0] for r in judge.rows if r[4] and r[6]]
                if backlog:
                    note = (
                        f"the queue is the backlog of engines the window before slowed to a GPU share of {snap.prior_gpu_share:.2g}: "
                        "the co-tenant has left, and the queue drains at the full share"
                    )
                else:
                    note = (
                        f"requests queue behind replicas slowed {ph.engine_slowdown:.2g}x by their GPU share: "
                        "move them before adding replicas"
                    )
            elif delay_binds:
                margin, rests_on = delay_margin, delay_rests
                note = f"the path's RTT adds {ph.delay_ttft_s * 1e3:.0f} ms to every first token (measured, not inferred from TTFT)"
            else:
                margin, rests_on = binding_margin(judge, primary, snap)
                if primary == "network" and delay_margin > margin:  # the measured delay is the stronger evidence
                    margin, rests_on = delay_margin, delay_rests
            caps.extend(unsure.binding_caps(primary, ph, snap, th, judge, queue, compute, has_tpot))
        elif ph.link.binding is not True and _queue_building(snap, th):
            regime = Regime.QUEUE_LIMITED
            caps.append("queue read from the gauges alone (no latency shows it yet)")
            note = "requests wait at the replica ceiling: TTFT rises as they are served (queue leads the latency)"
        elif _contention_tail(snap, th):
            regime, tail = Regime.COMPUTE_LIMITED, True
            note = (
                f"the window before reported a GPU share of {snap.prior_gpu_share:.2g}: requests that decoded under the "
                "co-tenant finish here (their TPOT tail carries its slower steps); it has left, nothing to remedy"
            )
        else:
            regime = Regime.HEALTHY
            closest = judge.closest()
            # A statistic can pass its ratio with nothing binding (load explains TPOT): margin 0 then.
            margin = max(0.0, math.log2(1.0 / closest)) if closest > 1.0 / RATIO_MAX else math.log2(RATIO_MAX)
            rests_on = [r[0] for r in judge.rows if r[6]]
            slack = unsure.resources_slack(ph, snap, th)
            if not slack:  # slack gauges decide without the latency statistics (and their references)
                caps.extend(unsure.healthy_caps(ph, has_ttft, has_tpot))
            caps.extend(unsure.healthy_tail_caps(judge, ph, snap, material_delay, th, drift))
            if ph.link.binding:
                note = "link at its cap but token delivery holds: utilisation alone is not a bottleneck"
    p99_breached = judge.any_breached
    # log2 of a ratio carries float rounding (~1e-16): a margin at a bound (the cap's 1.0: a share at
    # exactly twice its threshold) must not fall either side of it with the unit of time (v17, found by
    # the scaling property: the same window in ms and in s, 0.55 and 0.64).
    margin = round(margin, 9)
    if regime is not Regime.UNKNOWN and not idle:  # an idle verdict rests on the three gauges alone
        if snap.tpot_p50_s is None:
            # Judged on the TPOT mean or tail: a median could tell otherwise. A full link starving
            # delivery while P99 TTFT breaches is the one verdict any median leaves standing.
            robust = (
                regime is Regime.NETWORK_LIMITED and snap.tpot_mean_s is None and p99_breached and judge.binds("network", ttft_only=True)
            )
            if not robust:
                caps.append("TPOT judged without its median")
        centre_missing = snap.ttft_p50_s is None and (snap.ttft_mean_s is not None or not p99_breached)
        if regime in (Regime.QUEUE_LIMITED, Regime.HEALTHY) and centre_missing and not slack:
            caps.append("TTFT judged without its median")
        if regime is Regime.HEALTHY and has_ttft and snap.ttft_p99_s is None and not slack and snap.requests_waiting != 0:
            # v18's review grid: a P99 TTFT past the SLO binds the queue by itself (a breach beside
            # a median under its bar); a healthy verdict read without it, while requests wait (or
            # the gauge is missing), could be that queue's (queue 0.86 whole, healthy 0.99 without).
            caps.append("TTFT judged without its P99 while requests wait: the tail could breach the SLO")
        if unsure.prior_decides(ph, judge, regime, snap, th, rests_on):
            caps.append("a reference statistic the window lacked (derived by a prior) decides")
        # Judged (a reading with evidence) and none of those against a reference.
        if (ttft.evidence or tpot.evidence) and not ((ttft.evidence and ttft.used_reference) or (tpot.evidence and tpot.used_reference)):
            caps.append("no reference: judged against absolute fallbacks")
        if regime is not Regime.NETWORK_LIMITED and (snap.wan_rtt_s is None) != (snap.wan_base_rtt_s is None):
            caps.append("the WAN path's RTT or its base is missing: an added delay could bind the network")
        if regime is Regime.NETWORK_LIMITED and ph.link.binding and ph.link.against == "wan" and _ttft_judged(attribution) < 2:
            # Both TTFT statistics at their references say a full WAN link delays no first token
            # (``_wan_tail_quiet``): without either, the window cannot rule that out (v15, found by
            # v14's blind score: s9156-all-standard-w03, compute 0.70 whole, network 0.80 without its P99 TTFT).
            caps.append("a full WAN link judged without both TTFT statistics, which could show it delays no first token")
        if not delay_on_p99:
            # v18's reviews: ``_delay_judged`` judges the delay on the P99's excess against its measured
            # reference, on the median's only without them. Beside a queue the P99's excess is the
            # larger, so removing the P99 (or its reference: the prior derives one) could turn a
            # confident queue (the delay under a quarter of it) into a confident network, or back. A
            # network binding without the delay is capped too: against a derived reference the delay's
            # own share of the TTFT can bind it (a review's counterexample), so it cannot be told apart.
            caps.append("a material WAN delay judged without the measured P99 TTFT, which could show it is under a quarter of the excess")
        if regime is not Regime.NETWORK_LIMITED and material_delay and not has_ttft:
            # The delay binds where a first token shows it (``delay_shown``): with no TTFT statistic
            # the window cannot say it does not (v15, a review's counterexample: network 0.68 through
            # the TTFT mean, a confident compute without it).
            caps.append("a material WAN delay is measured and no TTFT statistic could show it: the network could bind")
        if slack:
            # Every resource reads slack by its gauges: the verdict rests on them, not on quantiles
            # from a handful of requests nor on how close one sits to its materiality.
            evidence.append(Evidence("verdict", None, note="every resource slack by its gauges: none can bind"))
        else:
            caps.extend(confidence.sampling_caps(rests_on, snap))
        if not slack and not tail and margin < th.confident_margin_min and not any(c.startswith("no resource's share") for c in caps):
            caps.append(f"the verdict sits within 2x of the threshold that decides it (margin {margin:.2f} < {th.confident_margin_min:g})")
    if drift and regime is not Regime.COMPUTE_LIMITED:
        evidence.append(Evidence("verdict", None, note=DRIFT_NOTE))
    if note is not None:
        evidence.append(Evidence("verdict", None, note=note))
    if regime is Regime.QUEUE_LIMITED and ph.link.binding and "network" not in binding:
        evidence.append(Evidence("verdict", None, note="link at its cap but token delivery holds: utilisation alone is not a bottleneck"))
    conf = 0.0
    if regime is not Regime.UNKNOWN:
        conf = confidence.calibrated(regime, margin)
        evidence.append(Evidence("confidence_margin", r4(margin), note=confidence.MARGIN_NOTE))
        if caps:
            conf = min(conf, UNSURE)
            evidence.append(Evidence("confidence_cap", UNSURE, note="; ".join(dict.fromkeys(caps))))
        if tail:
            conf = min(conf, TAIL)
            evidence.append(Evidence("prior_gpu_share", snap.prior_gpu_share, threshold=th.gpu_share_reduced, crossed=True, note=TAIL_NOTE))
            evidence.append(Evidence("confidence_cap", TAIL, note="the cause has left: below the controller's action bar"))
    network_cause = _network_cause(ph) if regime is Regime.NETWORK_LIMITED or Regime.NETWORK_LIMITED in secondary else None
    resource = RESOURCE_OF.get(regime)
    if resource is not None and attribution.shares:
        queue_named = regime is Regime.QUEUE_LIMITED or Regime.QUEUE_LIMITED in secondary
        attribution = settle(attribution, resource, queue_named, judge.weighed())

    return Diagnosis(
        slice=snapshot.slice,
        regime=regime,
        secondary=tuple(secondary),
        confidence=_clamp_r4(conf),
        slo=slo,
        evidence=tuple(evidence),
        missing=missing,
        id=snapshot.id,
        window_end_s=snapshot.window_end_s,
        attribution=attribution if attribution.shares else None,
        slo_signal=signals.slo_signal(snap, th, slo),
        network_cause=network_cause,
        request_count=snapshot.request_count,
    )


def _share_left(snap: SliceSnapshot, th: Thresholds) -> bool:
    """The window before reported a GPU-share drop that this one no longer shows (or does not report)."""
    prior, now = snap.prior_gpu_share, snap.gpu_share
    return prior is not None and prior < th.gpu_share_reduced and (now is None or now >= th.gpu_share_reduced)


def _contention_tail(snap: SliceSnapshot, th: Thresholds) -> bool:
    """The window before reported a GPU-share drop this one no longer shows (or does not report), and
    requests were served, running or finished here: those that decoded under the co-tenant finish in
    this window, and their TPOT tail (the client's, whose excess is the SLO's) carries its slower
    steps, while the window's own gauges read clean and its P99 TPOT at or over its reference but
    under any bar (v14)."""
    if not _share_left(snap, th):
        return False
    # The excess it explains is the decode tail's: a window whose P99 TPOT sits under its measured
    # reference (or lacks either) shows no slower step finishing here.
    tail, ref = snap.tpot_p99_s, snap.ref_tpot_p99_s
    if tail is None or ref is None or tail < ref:
        return False
    return any(x is not None and x > 0 for x in (confidence.served(snap), snap.requests_running, snap.tpot_request_count))


DRIFT_NOTE = "median TPOT past its bar with its tail at the reference and no compute gauge confirming: the median's drift, not contention"


def _median_drift(snap: SliceSnapshot, ph: Physics, th: Thresholds) -> bool:
    """A median TPOT past its bar whose own tail sits at its measured reference, with a free link and
    no compute gauge confirming: not contention. A co-tenant or a full link slows every decode step
    and lifts the tail with the median (the confirmed-tail bar, ``tpot_tail_confirmed_ratio``, is
    where a confirmed drop's tail already counts); a median alone moving is the histogram's bucket
    between two neighbours. Needs the tail and its measured reference: without them it never applies."""
    if ph.compute_confirmed or ph.link.binding or ph.coalesced or not ph.link.known or ph.tpot_stat != "tpot_p50":
        return False
    tail, ref = snap.tpot_p99_s, ph.refs.tpot_p99
    if tail is None or ref is None or ph.refs.tpot_tail_kind != "ref":
        return False
    return tail < th.tpot_tail_confirmed_ratio * ref


def _ttft_judged(attribution: Attribution) -> int:
    """How many TTFT statistics the window reports beside their references (``_wan_tail_quiet`` needs both)."""
    return sum(1 for s in attribution.shares if s.stat[1] == "t" and s.reference_s is not None)


def _wan_tail_quiet(attribution: Attribution, ph: Physics, th: Thresholds) -> bool:
    """At a full WAN link (not the edge), both TTFT statistics reported and each under
    ``wan_tail_ttft_ratio`` of its reference or within ``wan_tail_ttft_floor_s`` of it: the link
    delays no first token the window shows."""
    if not ph.link.binding or ph.link.against != "wan":
        return False
    seen = 0
    for s in attribution.shares:
        if s.stat[1] == "t":  # ttft_p50, ttft_p99
            ref = s.reference_s
            if ref is None or (s.observed_s >= th.wan_tail_ttft_ratio * ref and s.observed_s - ref >= th.wan_tail_ttft_floor_s):
                return False
            seen += 1
    return seen == 2


_CAUSE_OF_LINK = {"cap": NetworkCause.EDGE_CAP, "capacity": NetworkCause.EDGE_CAPACITY, "wan": NetworkCause.WAN_LINK}


def _network_cause(ph: Physics) -> NetworkCause:
    """Which part of the network the verdict rests on (the remedy follows it): a full link, else the added delay."""
    if ph.link.binding:
        return _CAUSE_OF_LINK.get(ph.link.against, NetworkCause.EDGE_CAP)
    if ph.delay_ttft_s > 0:
        return NetworkCause.WAN_DELAY
    return NetworkCause.EDGE_CAP
