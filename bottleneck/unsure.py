"""Why a verdict could be overturned by what its window lacks: each reason caps the confidence at
``UNSURE``. ``classify`` judges which resource binds; these functions only read its judgement (the
``Judge``), the physics and the snapshot, and list, per regime, the fields whose absence leaves the
verdict open. The caps common to every regime (a median missing, a fallback reference, too few
requests, a thin margin) stay beside the margin in ``classify``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from inferslice.bottleneck import signals
from inferslice.bottleneck.attribution import Physics, added_delay_s, ge
from inferslice.bottleneck.signals import Reading
from inferslice.bottleneck.thresholds import Thresholds
from inferslice.diagnosis import Regime
from inferslice.snapshot import SliceSnapshot

if TYPE_CHECKING:  # the judge is built by classify, which imports this module
    from inferslice.bottleneck.judge import Judge

__all__ = ["binding_caps", "healthy_caps", "healthy_tail_caps", "prior_decides", "resources_slack"]


def binding_caps(
    primary: str, ph: Physics, snap: SliceSnapshot, th: Thresholds, judge: Judge, queue: Reading, compute: Reading, has_tpot: bool
) -> list[str]:
    """Why a binding verdict could be overturned by a field the window lacks (each one caps the confidence)."""
    caps: list[str] = []
    if primary == "network":
        if not ph.load_known:
            caps.append("throughput or its reference unknown: load cannot be told from pacing")
        if not has_tpot:
            caps.append("no TPOT: the link's share of TTFT is unconfirmed")
        if ph.coalesced and not ph.link.binding:
            # The burst shows a buffer on the path, the window no link that fills it: the gauges
            # (a queue held at the router instead) or the reference could tell otherwise.
            caps.append("tokens arrive coalesced while no link reads full: a buffer the window does not show")
        return caps
    if primary == "compute":
        if not ph.link.known:
            caps.append("link unknown: a cap could take the TPOT share")
        elif ph.link.cap_unseen:
            caps.append("link judged against its physical rate only: a cap the window did not report could take the TPOT share")
        if not ph.load_known:
            caps.append("throughput or its reference unknown: load cannot be told from contention")
        if (snap.wan_rx_bps is None) != (snap.wan_capacity_bps is None):
            # One of the pair: the path has a WAN link the window cannot judge (both absent: no WAN
            # link on the path). A full one would take the TPOT share (v10, as the delay's pair).
            caps.append("the WAN link's rate or its physical rate is missing: a full WAN link could take the TPOT share")
        if compute.hits == 0:
            caps.append("no compute confirmation (GPU share, preemptions, KV cache, utilisation)")
        return caps
    network_could = ph.tpot_contention_s > 0 and th.first_chunk_tpot_multiple * ph.tpot_contention_s >= 0.5 * max(
        (r[2] for r in judge.rows if not r[1]), default=0.0
    )
    if not has_tpot:
        caps.append("no TPOT: a binding link could take this TTFT as first-chunk delivery")
    if not ph.link.known:
        caps.append("link unknown: a binding link could take this TTFT as first-chunk delivery")
    elif ph.link.cap_unseen and network_could:
        caps.append("link judged against its physical rate only while TPOT shows contention")
    elif not ph.link.binding and network_could and (snap.wan_rx_bps is None or snap.wan_capacity_bps is None):
        caps.append("WAN path unknown while TPOT shows contention: a full WAN link could take this TTFT")
    if ph.link.binding:
        # At a full link the gauges and both TPOT statistics decide how much of TTFT waited in the
        # link's queue rather than the engine's: without any of them the network could claim it.
        lacking = [f for f in ("requests_waiting", "tpot_p50_s", "tpot_p99_s") if getattr(snap, f) is None]
        if lacking:
            caps.append("link at its cap without " + ", ".join(lacking) + ": the link's queue could hold this TTFT")
    if ph.refs.ttft_kind == "fallback" and not _robust_ttft(snap, th):
        caps.append("no TTFT reference and TTFT not inflated against any reference that meets the SLO")
    tail = next((r for r in judge.rows if r[0] == "tpot_p99"), None)
    if tail is not None and tail[4] and not (judge.binds("network") or judge.binds("compute")):
        # Queueing keeps TPOT at its load-expected pace (the router holds requests back): a tail
        # past its materiality that no resource binds is a pacing cause the window does not show.
        caps.append("P99 TPOT inflated with nothing binding it: a cause the window does not show")
    # A queue verdict needs a queue seen: requests waiting now, or (without that gauge) a queue time
    # spending the budget. The gauge wins where both exist: the queue-time histogram's P99 keeps the
    # waits of a queue already drained (and sits at a bucket bound on the testbed's engines), and
    # replicas at the ceiling alone confirm no queue. A TTFT excess with nothing waiting is the
    # signature of a cap misreported as larger than it is (the first chunk waited in a shaper).
    waiting, qtime = snap.requests_waiting, snap.queue_time_p99_s
    if waiting is None and qtime is None:
        caps.append("no queue gauge (requests waiting, queue time)")
    elif waiting is not None and not waiting > th.requests_waiting_min:
        caps.append("the queue gauge shows nothing waiting")
    elif waiting is None and qtime is not None and not qtime > th.queue_time_confirm_ratio * signals.slo_ttft_s(snap, th):
        caps.append("the queue time shows no queueing")
    return caps


def _ambiguous(obs: float | None, ref: float | None, lo: float, hi: float, factor: float, ratio: float) -> bool:
    """Would the statistic's materiality change for a reference anywhere in ``[ref*lo, ref*hi]``?"""
    if obs is None or ref is None:
        return False
    at_hi = ge(obs - ref * hi * factor, (ratio - 1.0) * ref * hi)
    at_lo = ge(obs - ref * lo * factor, (ratio - 1.0) * ref * lo)
    return at_hi != at_lo


def _tpot_tail_flips(ph: Physics, snap: SliceSnapshot, th: Thresholds, ratio: float, span: float) -> bool:
    """Would the P99 TPOT's materiality (at ``ratio``) flip for a tail reference anywhere in the
    prior's range, 1 to ``span`` times the median (the reference P99 is the median's prior)?"""
    prior = th.tpot_tail_prior
    return _ambiguous(snap.tpot_p99_s, ph.refs.tpot_p99, 1.0 / prior, span / prior, ph.load_factor, ratio)


def prior_decides(ph: Physics, judge: Judge, regime: Regime, snap: SliceSnapshot, th: Thresholds, rests_on: Sequence[str] = ()) -> bool:
    """Does the verdict rest on a reference statistic the window lacked? A tail (or median) derived
    from the other one by a prior is checked across the plausible range of the tail ratio
    (1 to ``tail_prior_max``; 1 to ``tail_prior_max_beside_median`` for a tail that binds beside a
    median at its reference); a fallback reference always leaves the verdict unsure. ``rests_on``:
    the statistics a binding verdict rests on (a tail that binds beside a judged median is one)."""
    refs = ph.refs
    span = th.tail_prior_max
    if judge.tpot_stat == "tpot_p50" and "tpot_p99" in rests_on and refs.tpot_tail_kind != "ref":
        # v9: the P99 TPOT binds alone beside a judged median (a full link, or a reported share drop,
        # lets it count); its reference derived by the prior decides as much as the judged one would.
        # Found on v8's blind set: s9063--c1-premium-w03 without ref_tpot_p99_s read confident network.
        ratio = th.tpot_tail_confirmed_ratio if ph.compute_confirmed else th.tpot_tail_inflation_ratio
        if refs.tpot_tail_kind == "fallback" or _tpot_tail_flips(ph, snap, th, ratio, th.tail_prior_max_beside_median):
            return True
    if judge.tpot_stat is not None:
        kind = refs.tpot_tail_kind if judge.tpot_stat == "tpot_p99" else refs.tpot_kind
        if kind == "fallback":
            return True
        if kind == "tail_prior":
            if judge.tpot_stat == "tpot_p99":
                flips = _tpot_tail_flips(ph, snap, th, th.tpot_tail_inflation_ratio, span)
            else:
                tpot50 = snap.tpot_p50_s if snap.tpot_p50_s is not None else snap.tpot_mean_s
                flips = _ambiguous(
                    tpot50, refs.tpot_p50, th.tpot_tail_prior / span, th.tpot_tail_prior, ph.load_factor, th.tpot_inflation_ratio
                )
            if flips:
                return True
    if regime in (Regime.QUEUE_LIMITED, Regime.HEALTHY):
        ttft50 = snap.ttft_p50_s if snap.ttft_p50_s is not None else snap.ttft_mean_s
        if refs.ttft_kind == "tail_prior" and _ambiguous(
            ttft50, refs.ttft_p50, th.ttft_tail_prior / span, th.ttft_tail_prior, 1.0, th.ttft_inflation_ratio
        ):
            return True
        p99_judged = judge.judged_stat("ttft_p99")
        if (
            p99_judged
            and refs.ttft_tail_kind == "tail_prior"
            and _ambiguous(
                snap.ttft_p99_s, refs.ttft_p99, 1.0 / th.ttft_tail_prior, span / th.ttft_tail_prior, 1.0, th.ttft_tail_inflation_ratio
            )
        ):
            return True
    return False


def _robust_ttft(snap: SliceSnapshot, th: Thresholds) -> bool:
    """Without a TTFT reference: is TTFT inflated against any reference that meets the SLO?"""
    slo = signals.slo_ttft_s(snap, th)
    p50 = snap.ttft_p50_s if snap.ttft_p50_s is not None else snap.ttft_mean_s
    return (snap.ttft_p99_s is not None and snap.ttft_p99_s >= th.ttft_tail_inflation_ratio * slo) or (
        p50 is not None and p50 >= th.ttft_inflation_ratio * slo / th.ttft_tail_prior
    )


def healthy_tail_caps(
    judge: Judge, ph: Physics, snap: SliceSnapshot, material_delay: bool, th: Thresholds, drift: bool = False
) -> list[str]:
    """A healthy verdict a full link (through the P99 TTFT, which counts at a full link), a measured
    delay (through the TTFT statistic that would show it) or a GPU-share drop (through the P99 TPOT,
    which counts at the lower bar once a drop is reported, or through a median ``drift`` read as the
    histogram's bucket for want of a compute confirmation) could overturn."""
    caps: list[str] = []
    # v10: a reported share drop lets the P99 TPOT bind compute at ``tpot_tail_confirmed_ratio``; a
    # window without either side of that pair is open to it. Found when v10's uncapped compute
    # verdicts became confident: without the tail, or without the share, they read confident healthy.
    if ph.compute_confirmed and snap.tpot_p99_s is None and snap.tpot_p50_s is not None:
        caps.append("compute confirmed without the P99 TPOT, where contention shows first: the tail could bind it")
    elif snap.gpu_share is None and not ph.compute_confirmed:
        tail = next((r for r in judge.rows if r[0] == "tpot_p99"), None)
        ref = ph.refs.tpot_p99
        if tail is not None and ref is not None and ge(tail[2], (th.tpot_tail_confirmed_ratio - 1.0) * ref):
            caps.append("P99 TPOT past the bar a reported GPU-share drop sets, without the GPU share: a drop could bind it")
    if material_delay:
        ms = ph.delay_ttft_s * 1e3
        caps.append(f"a measured WAN delay of {ms:.0f} ms the window's TTFT does not show: another path's RTT, or a statistic missing")
    # Either tail counts at a full link (``judge.Judge._ratios``): a tail past its materiality beside a
    # median at its reference is what a full link the window does not show would bind, and a full
    # link without a tail is a window missing the statistic that would.
    # v11: at a full link the network binds through either TTFT statistic from the link's lower bar.
    # Where the link's state is incomplete (its rate unknown, the cap unreported, half the WAN pair)
    # a full link the window does not show could bind one past that bar.
    hideable = not ph.link.binding and (
        not ph.link.known or ph.link.cap_unseen or (snap.wan_rx_bps is None) != (snap.wan_capacity_bps is None)
    )
    if hideable and any(not r[1] and r[2] > 0 and ge(r[2], r[10]) for r in judge.rows):
        caps.append("TTFT past the bar a full link sets, with the link's state incomplete: a full link could bind it")
    for stat, field in (("ttft_p99", "ttft_p99_s"), ("tpot_p99", "tpot_p99_s")):
        name = "P99 " + stat[:4].upper()
        if any(r[0] == stat and r[4] and not r[6] for r in judge.rows):
            caps.append(f"{name} inflated beside a median at its reference: a full link the window does not show could bind it")
        elif ph.link.binding and getattr(snap, field) is None:
            caps.append(f"link at its cap without the {name}: the link could bind through it")
    if drift and snap.gpu_share is None:
        # v13 (v12's blind set, s9150-all-free-w06): the median's move was read as drift for want of a
        # compute confirmation; with the share reported (0.52) the same median read compute.
        caps.append("a median TPOT past its bar read as drift, without the GPU share: a reported drop would make it count")
    return caps


def healthy_caps(ph: Physics, has_ttft: bool, has_tpot: bool) -> list[str]:
    refs = ph.refs
    caps: list[str] = []
    if refs.ttft_kind == "fallback" or refs.tpot_kind == "fallback":
        caps.append("a reference the window lacks could show an inflation")
    if not has_ttft or not has_tpot:
        caps.append("TTFT or TPOT missing: the other could show an inflation")
    return caps


def resources_slack(ph: Physics, snap: SliceSnapshot, th: Thresholds) -> bool:
    """Does every resource the tier uses read slack by its gauges, each of them reported?

    Then no resource can bind, whatever the window's latency quantiles say: a healthy verdict rests
    on the gauges, as an idle one does, and too few requests to bound a quantile (or a quantile near
    its materiality) leave it standing. A gauge the window lacks is no evidence of slack, so removing
    a field only ever takes the rule away (the missing-field rule). The edge link counts against a
    reported cap or, without one, its physical rate; a cap the window does not report could bind
    unseen, so uncapped it also needs the decode pace at its reference (TPOT is what a binding shaper
    inflates first, from many tokens, not a handful of requests).
    """
    waiting, share, preempt = snap.requests_waiting, snap.gpu_share, snap.preemptions_per_s
    if waiting is None or waiting > th.requests_waiting_min:
        return False
    if share is None or share < th.gpu_share_reduced:
        return False
    if preempt is None or preempt > th.preemptions_min_per_s:
        return False
    if snap.kv_cache_usage is not None and snap.kv_cache_usage >= th.kv_cache_high:
        return False
    if snap.gpu_utilization is not None and snap.gpu_utilization >= th.gpu_utilization_high:
        return False  # a busy GPU is what confirms compute beside an inflated TPOT
    link = ph.link
    if not link.known or link.utilization is None or link.utilization > th.slack_utilization_max or link.against not in ("cap", "capacity"):
        return False
    if link.cap_unseen:  # a cap the window did not report could pace TPOT
        tpot50, ref = snap.tpot_p50_s, ph.refs.tpot_p50
        if tpot50 is None or ref is None or ph.refs.tpot_kind != "ref" or tpot50 > th.tpot_inflation_ratio * ref:
            return False
    wan_fields = (snap.wan_rx_bps, snap.wan_capacity_bps, snap.wan_rtt_s, snap.wan_base_rtt_s)
    if all(v is None for v in wan_fields):
        return True  # no WAN link on the tier's path (every replica at the gateway's PoP)
    if any(v is None for v in wan_fields):
        return False
    assert snap.wan_rx_bps is not None and snap.wan_capacity_bps is not None  # checked above; for mypy
    if not snap.wan_capacity_bps > 0 or snap.wan_rx_bps > th.slack_utilization_max * snap.wan_capacity_bps:
        return False
    # No added delay near the one that binds by itself (a millisecond or two of the prober's own
    # overhead reads as delay on the testbed's userspace delay line): under half of it.
    delay = added_delay_s(snap, th)
    return delay is not None and th.delay_rtts_per_first_token * delay < 0.5 * th.delay_material_slo_fraction * signals.slo_ttft_s(snap, th)
