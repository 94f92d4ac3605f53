"""Read one group of snapshot fields into a tri-state verdict (True / False / None = cannot tell).

Each reader returns a ``Reading``: the verdict, the evidence it rests on and the fields it wanted but
did not get. The classifier combines readings; it never looks at raw fields itself, so every number
it uses appears in the evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferslice.bottleneck.attribution import LinkState, Refs
from inferslice.bottleneck.thresholds import Thresholds
from inferslice.diagnosis import Evidence, SloState
from inferslice.snapshot import SliceSnapshot

TTFT_FIELDS = ("ttft_p50_s", "ttft_p99_s", "ttft_mean_s")
TPOT_FIELDS = ("tpot_p50_s", "tpot_p99_s", "tpot_mean_s")
LINK_FIELDS = ("link_rx_bps", "link_cap_bps", "link_capacity_bps")
QUEUE_FIELDS = ("requests_waiting", "queue_time_p99_s", "replicas", "replicas_max")
COMPUTE_FIELDS = ("gpu_utilization", "kv_cache_usage", "preemptions_per_s", "gpu_share")


# slots, not frozen: six per window on the hot path (see attribution.LinkState). Treat as immutable.
@dataclass(slots=True)
class Reading:
    state: bool | None  # None: the fields present cannot tell
    evidence: tuple[Evidence, ...] = ()
    missing: tuple[str, ...] = ()
    used_reference: bool = False  # False: only absolute (SLO-derived) thresholds were available
    hits: int = 0  # confirming signals that crossed (queue, compute)
    strong_hits: int = 0  # confirmations that are not mere utilisation


def _any_crossed(ev: list[Evidence]) -> bool:
    """Has any piece of evidence crossed its threshold? (A loop: a generator costs more here.)"""
    for e in ev:  # noqa: SIM110
        if e.crossed:
            return True
    return False


def _absent(snap: SliceSnapshot, fields: tuple[str, ...]) -> tuple[str, ...]:
    """The fields of ``fields`` the snapshot lacks (a loop: on the hot path a generator costs more)."""
    out: list[str] = []
    for f in fields:
        if getattr(snap, f) is None:
            out.append(f)
    return tuple(out)


def _ratio_evidence(signal: str, value: float, ref: float, ratio: float, note: str, below: bool = False) -> Evidence:
    threshold = ref * ratio
    crossed = value < threshold if below else value >= threshold and value > ref
    return Evidence(signal, value, ref, threshold, crossed, note)  # positional: cheaper on the hot path


def slo_ttft_s(snap: SliceSnapshot, th: Thresholds) -> float:
    return snap.slo_ttft_p99_s if snap.slo_ttft_p99_s is not None and snap.slo_ttft_p99_s > 0 else th.default_slo_ttft_p99_s


def ttft(snap: SliceSnapshot, th: Thresholds, refs: Refs) -> Reading:
    """Is TTFT inflated, against the slice's reference (P99 against the P99) and/or its SLO?"""
    slo = slo_ttft_s(snap, th)
    ev: list[Evidence] = []
    used_ref = refs.ttft_kind != "fallback"
    if snap.ttft_p99_s is not None:
        ev.append(Evidence("ttft_p99_s", snap.ttft_p99_s, threshold=slo, crossed=snap.ttft_p99_s > slo, note="P99 TTFT vs SLO"))
    center = snap.ttft_p50_s if snap.ttft_p50_s is not None else snap.ttft_mean_s
    field = "ttft_p50_s" if snap.ttft_p50_s is not None else "ttft_mean_s"
    if center is not None and refs.ttft_p50 is not None:
        note = "TTFT vs reference" if used_ref else "no TTFT reference: vs SLO-derived fallback"
        ev.append(_ratio_evidence(field, center, refs.ttft_p50, th.ttft_inflation_ratio, note))
    if snap.ttft_p99_s is not None and refs.ttft_p99 is not None and used_ref:
        note = "P99 TTFT vs reference P99" + (" (tail prior)" if refs.ttft_tail_kind == "tail_prior" else "")
        ev.append(_ratio_evidence("ttft_p99_s_vs_ref", snap.ttft_p99_s, refs.ttft_p99, th.ttft_tail_inflation_ratio, note))
    if not ev:
        return Reading(None, missing=TTFT_FIELDS)
    return Reading(_any_crossed(ev), tuple(ev), used_reference=used_ref or snap.slo_ttft_p99_s is not None)


def tpot(snap: SliceSnapshot, th: Thresholds, refs: Refs) -> Reading:
    """Is TPOT inflated against the reference (like with like), the TPOT SLO or the absolute fallback?"""
    ev: list[Evidence] = []
    used_ref = refs.tpot_kind != "fallback" or (snap.slo_tpot_p99_s is not None and snap.slo_tpot_p99_s > 0)
    if snap.slo_tpot_p99_s is not None and snap.tpot_p99_s is not None and snap.slo_tpot_p99_s > 0:
        ev.append(
            Evidence(
                "tpot_p99_s",
                snap.tpot_p99_s,
                threshold=snap.slo_tpot_p99_s,
                crossed=snap.tpot_p99_s > snap.slo_tpot_p99_s,
                note="vs TPOT SLO",
            )
        )
    if refs.tpot_kind != "fallback":
        ref50 = refs.tpot_p50
        if ref50 is not None:
            if snap.tpot_p50_s is not None:
                ev.append(_ratio_evidence("tpot_p50_s", snap.tpot_p50_s, ref50, th.tpot_inflation_ratio, "TPOT vs reference"))
            if snap.tpot_mean_s is not None:
                ev.append(_ratio_evidence("tpot_mean_s", snap.tpot_mean_s, ref50, th.tpot_inflation_ratio, "TPOT vs reference"))
        if snap.tpot_p99_s is not None and refs.tpot_p99 is not None:
            note = "P99 TPOT vs reference P99" + (" (tail prior)" if refs.tpot_tail_kind == "tail_prior" else "")
            ev.append(_ratio_evidence("tpot_p99_s_vs_ref", snap.tpot_p99_s, refs.tpot_p99, th.tpot_tail_inflation_ratio, note))
    elif not used_ref:
        for field in TPOT_FIELDS:
            value = getattr(snap, field)
            if value is not None:
                ev.append(
                    Evidence(
                        field,
                        value,
                        threshold=th.fallback_tpot_s,
                        crossed=value > th.fallback_tpot_s,
                        note="no reference: absolute ceiling",
                    )
                )
    if not ev:
        return Reading(None, missing=TPOT_FIELDS)
    missing = () if refs.tpot_kind != "fallback" else ("ref_tpot_p50_s",)
    return Reading(_any_crossed(ev), tuple(ev), missing=missing, used_reference=used_ref)


def tokens(snap: SliceSnapshot, th: Thresholds) -> Reading:
    """Has output throughput fallen below the reference? (None without both numbers.)"""
    value, ref = snap.output_tokens_per_s, snap.ref_output_tokens_per_s
    if value is None:
        return Reading(None, missing=("output_tokens_per_s",))
    if ref is None or ref <= 0:
        return Reading(
            None, (Evidence("output_tokens_per_s", value, note="no reference throughput"),), missing=("ref_output_tokens_per_s",)
        )
    e = _ratio_evidence("output_tokens_per_s", value, ref, th.tokens_drop_ratio, "throughput vs reference", below=True)
    return Reading(e.crossed, (e,), used_reference=True)


def link(snap: SliceSnapshot, th: Thresholds, state: LinkState) -> Reading:
    """Is the link at its cap (or, uncapped, at the interface's physical rate)? Reported, never judged alone."""
    if not state.known or state.utilization is None:
        missing = tuple(
            f for f, v in (("link_rx_bps", snap.link_rx_bps), ("link_cap_bps", snap.link_cap_bps or snap.link_capacity_bps)) if v is None
        )
        return Reading(None, missing=missing)
    ev = []
    if state.against == "wan":
        cap, rx, what = snap.wan_capacity_bps, snap.wan_rx_bps, "the WAN path's busiest link, physical rate"
    else:
        cap, rx = (snap.link_cap_bps, snap.link_rx_bps) if state.against == "cap" else (snap.link_capacity_bps, snap.link_rx_bps)
        what = "cap" if state.against == "cap" else "physical capacity (uncapped)"
    ev.append(
        Evidence(
            "link_utilization",
            state.utilization,
            reference=cap,
            threshold=th.link_binding_ratio,
            crossed=state.binding,
            note=f"rx {rx or 0.0:.4g} bps of {what} {cap or 0.0:.4g} bps",
        )
    )
    if state.token_rate_max is not None and state.bits_per_token is not None:
        ev.append(
            Evidence(
                "link_token_rate_max",
                state.token_rate_max,
                reference=snap.output_tokens_per_s,
                note=f"tokens/s the link carries at {state.bits_per_token:.4g} bits per streamed token",
            )
        )
    if state.pacing_floor_s is not None:
        ev.append(Evidence("tpot_pacing_floor_s", state.pacing_floor_s, note="TPOT the link imposes on the streams in flight"))
    return Reading(state.binding, tuple(ev))


def wan(snap: SliceSnapshot, th: Thresholds, delay_s: float | None) -> tuple[Evidence, ...]:
    """The tier's WAN path as reported: its busiest link's utilisation and the RTT against its reference."""
    ev: list[Evidence] = []
    if snap.wan_rx_bps is not None and snap.wan_capacity_bps is not None and snap.wan_capacity_bps > 0:
        util = snap.wan_rx_bps / snap.wan_capacity_bps
        ev.append(
            Evidence(
                "wan_utilization",
                util,
                reference=snap.wan_capacity_bps,
                threshold=th.link_binding_ratio,
                crossed=util >= th.link_binding_ratio,
                note="all traffic on the path's busiest WAN link over its physical rate",
            )
        )
    if snap.wan_rtt_s is not None:
        base = snap.wan_base_rtt_s
        ev.append(
            Evidence(
                "wan_rtt_s",
                snap.wan_rtt_s,
                reference=base,
                threshold=base * (1.0 + th.wan_rtt_noise_ratio) if base is not None else None,
                crossed=bool(delay_s),
                note="path RTT vs its declared (base) RTT" if base is not None else "no base RTT: an added delay cannot be told",
            )
        )
    return tuple(ev)


def queue(snap: SliceSnapshot, th: Thresholds) -> Reading:
    """Queue confirmations: requests held back, queue time, autoscaler at its ceiling."""
    ev: list[Evidence] = []
    if snap.requests_waiting is not None:
        ev.append(
            Evidence(
                "requests_waiting",
                snap.requests_waiting,
                threshold=th.requests_waiting_min,
                crossed=snap.requests_waiting > th.requests_waiting_min,
                note="requests held back",
            )
        )
    if snap.queue_time_p99_s is not None:
        limit = th.queue_time_confirm_ratio * slo_ttft_s(snap, th)
        ev.append(
            Evidence(
                "queue_time_p99_s", snap.queue_time_p99_s, threshold=limit, crossed=snap.queue_time_p99_s > limit, note="P99 queue time"
            )
        )
    if snap.replicas is not None and snap.replicas_max is not None and snap.replicas_max > 0:
        ev.append(
            Evidence(
                "replicas",
                snap.replicas,
                reference=snap.replicas_max,
                threshold=snap.replicas_max,
                crossed=snap.replicas >= snap.replicas_max,
                note="replicas at the tier's ceiling",
            )
        )
    hits = 0
    for e in ev:
        hits += e.crossed
    missing = _absent(snap, QUEUE_FIELDS)
    return Reading(bool(hits) if ev else None, tuple(ev), missing, hits=hits, strong_hits=hits)


def compute(snap: SliceSnapshot, th: Thresholds) -> Reading:
    """Compute confirmations; GPU utilisation counts only as a weak one."""
    ev: list[Evidence] = []
    strong = 0
    if snap.gpu_utilization is not None:
        ev.append(
            Evidence(
                "gpu_utilization",
                snap.gpu_utilization,
                threshold=th.gpu_utilization_high,
                crossed=snap.gpu_utilization >= th.gpu_utilization_high,
                note="utilisation alone never decides",
            )
        )
    # Unrolled (one if a field): a tuple of five-tuples built every window costs more than the checks.
    kv, pre, share = snap.kv_cache_usage, snap.preemptions_per_s, snap.gpu_share
    if kv is not None:
        crossed = kv >= th.kv_cache_high
        ev.append(Evidence("kv_cache_usage", kv, threshold=th.kv_cache_high, crossed=crossed, note="KV cache nearly full"))
        strong += crossed
    if pre is not None:
        crossed = pre > th.preemptions_min_per_s
        ev.append(Evidence("preemptions_per_s", pre, threshold=th.preemptions_min_per_s, crossed=crossed, note="sequences preempted"))
        strong += crossed
    if share is not None:
        crossed = share < th.gpu_share_reduced
        ev.append(Evidence("gpu_share", share, threshold=th.gpu_share_reduced, crossed=crossed, note="effective/allocated GPU share"))
        strong += crossed
    hits = 0
    for e in ev:
        hits += e.crossed
    missing = _absent(snap, COMPUTE_FIELDS)
    return Reading(bool(hits) if ev else None, tuple(ev), missing, hits=hits, strong_hits=strong)


def _state_of(value: float | None, slo: float | None, th: Thresholds) -> SloState:
    if value is None or slo is None or slo <= 0:
        return SloState.UNKNOWN
    if value > slo:
        return SloState.BREACHED
    if value > th.slo_at_risk_ratio * slo:
        return SloState.AT_RISK
    return SloState.MET


def slo_state(snap: SliceSnapshot, th: Thresholds) -> SloState:
    """TTFT decides (the brief's SLO); a TPOT SLO, when set, can only make it worse."""
    slo = slo_ttft_s(snap, th)
    ttft_state = _state_of(snap.ttft_p99_s, slo, th)
    if ttft_state is SloState.UNKNOWN:
        # Without a P99, a median or mean already above the SLO proves a breach; nothing proves it met.
        center = max((v for v in (snap.ttft_p50_s, snap.ttft_mean_s) if v is not None), default=None)
        if center is not None and center > slo:
            ttft_state = SloState.BREACHED
    tpot_state = _state_of(snap.tpot_p99_s, snap.slo_tpot_p99_s, th)
    if SloState.BREACHED in (ttft_state, tpot_state):
        return SloState.BREACHED
    if ttft_state is SloState.UNKNOWN:
        return SloState.UNKNOWN
    if SloState.AT_RISK in (ttft_state, tpot_state):
        return SloState.AT_RISK
    return SloState.MET


def slo_signal(snap: SliceSnapshot, th: Thresholds, state: SloState) -> str | None:
    """With the SLO at risk or breached: the statistic nearest (or furthest over) its SLO."""
    if state not in (SloState.AT_RISK, SloState.BREACHED):
        return None
    slo = slo_ttft_s(snap, th)
    ratios: list[tuple[float, str]] = []
    for field, value, limit in (
        ("ttft_p99_s", snap.ttft_p99_s, slo),
        ("ttft_p50_s", snap.ttft_p50_s, slo),
        ("ttft_mean_s", snap.ttft_mean_s, slo),
        ("tpot_p99_s", snap.tpot_p99_s, snap.slo_tpot_p99_s),
    ):
        if value is not None and limit is not None and limit > 0:
            ratios.append((value / limit, field))
    return max(ratios)[1] if ratios else None
