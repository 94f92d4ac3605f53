"""Latency attribution: split one window's TTFT and TPOT excess over the reference by resource. Pure.

Each share comes from a physical relation the snapshot already carries, not from a threshold:

- load (not a resource): decode time per step grows with the batch, so TPOT at a higher token rate
  is expected to be higher. Decode is modelled as ``TPOT = a / (1 - rate / saturation)`` (a step of
  a batch ``B`` costs ``a + b B``; the rate is ``B / step``), anchored at the reference's TPOT and
  token rate; the saturation rate is learned from healthy windows (``Reference.tokens_per_s_saturation``)
  or a prior. Load only ever *explains* TPOT (the expected TPOT never drops below the reference), so
  a missing throughput can only make the verdict stricter, never laxer.
- network: bits per streamed token (``link_rx_bps / output_tokens_per_s``) give the token rate the
  link can carry (``cap / bits per token``) and the pacing floor it puts on each stream. When the
  link runs at its cap (a shaper delivers 85-95 % of nominal), the TPOT above the load-expected is
  the network's, shared with compute when a reduced GPU share is reported (in proportion to what
  each alone could explain: the network all of it, compute ``expected / share - expected``). The
  first chunk waits in the shaper's queue too: the TTFT the network explains is
  bounded by ``first_chunk_tpot_multiple`` of its TPOT share (a queue holds a bounded number of
  token times of every stream).
- compute: TPOT above the load-expected TPOT on a link that does not bind (co-tenant, preemptions,
  KV pressure, a reduced share). Prefill slows by the same factor, which sets its TTFT share.
- queue: the TTFT left after the prefill and the first-chunk delivery the other two explain.
  Measured by Little's law (wait = requests waiting / arrival rate) when the gauges and the arrival
  rate are present: at a full link the rest of TTFT then waited in the link's queue. Inferred from
  the residual otherwise. When the gauges show nothing waiting at a full link, the residual is
  the link's (the first chunk waits in its queue); at a free link with another resource binding it
  is left unexplained (``base``) rather than called a queue.

``queue + network + compute + base == observed`` for every statistic, and the three resource shares
never exceed the excess over the reference. ``settle`` (v16) is the reading of the verdict: at a
binding verdict the excess left unplaced, and any waiting no queue verdict names, are the primary's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferslice.bottleneck.rounding import unit_r4
from inferslice.bottleneck.thresholds import Thresholds
from inferslice.diagnosis import RESOURCES, Attribution, LatencyShare
from inferslice.snapshot import SliceSnapshot, edge_cap


# slots, not frozen: built on the classifier's hot path every window (a frozen dataclass costs ~2x to
# construct: object.__setattr__ per field). Treat as immutable all the same.
@dataclass(slots=True)
class LinkState:
    known: bool  # rx and a cap or the physical capacity are known
    binding: bool  # rx at (a shaper's delivery of) the cap
    utilization: float | None = None
    against: str = "none"  # "cap", "capacity" (uncapped: the interface's physical rate), "wan" (a WAN link of the path) or "none"
    bits_per_token: float | None = None
    token_rate_max: float | None = None  # the highest token rate the link can carry
    pacing_floor_s: float | None = None  # the TPOT the link imposes on the streams in flight
    # The window reports the edge's cap: one below the physical rate ("cap"), or one at or above it,
    # which is no cap (the collectors' reading of an uncapped edge). With "capacity" and no cap
    # reported, a cap the window does not show could still bind (``cap_unseen``).
    cap_reported: bool = False

    @property
    def cap_unseen(self) -> bool:
        """Judged against a physical rate with no cap reported: a cap the window does not show could bind."""
        return self.against != "cap" and not self.cap_reported


# slots, not frozen: built on the classifier's hot path every window (a frozen dataclass costs ~2x to
# construct: object.__setattr__ per field). Treat as immutable all the same.
@dataclass(slots=True)
class Refs:
    """The reference of each statistic and how it was obtained ("ref", "tail_prior", "fallback")."""

    ttft_p50: float | None
    ttft_p99: float | None
    tpot_p50: float | None
    tpot_p99: float | None
    ttft_kind: str
    ttft_tail_kind: str
    tpot_kind: str
    tpot_tail_kind: str


# slots, not frozen: built on the classifier's hot path every window (a frozen dataclass costs ~2x to
# construct: object.__setattr__ per field). Treat as immutable all the same.
@dataclass(slots=True)
class Physics:
    """What the attribution rests on; the classifier reports each in its evidence."""

    refs: Refs
    link: LinkState
    load_factor: float  # expected / reference TPOT at this token rate (>= 1)
    load_known: bool
    engine_slowdown: float  # 1 / GPU share when a reduced share is reported, else 1
    compute_factor: float  # engine TPOT over load-expected TPOT (prefill slows alike)
    queue_gauge: bool | None  # True: requests wait; False: the gauge shows none; None: no gauge
    little_wait_s: float | None  # requests_waiting / request_rate
    unseparated: bool  # TPOT above the load-expected with the link unknown: network vs compute untold
    tpot_contention_s: float  # median (or, without one, P99) TPOT above the load-expected TPOT
    tpot_threshold_s: float  # the contention that counts as material for that statistic
    tpot_stat: str | None  # the TPOT statistic judged: the median, or the P99 when the median collapsed (coalesced tokens)
    compute_confirmed: bool = False  # a reduced GPU share, preemptions or a full KV cache reported
    delay_s: float | None = None  # the WAN path's RTT above its reference (None: unknown)
    delay_ttft_s: float = 0.0  # the TTFT that added delay explains (delay_rtts_per_first_token of it)
    coalesced: bool = False  # median TPOT under ``tpot_coalesced_ratio`` of its reference: tokens held on the path


def ge(a: float, b: float) -> bool:
    """``a >= b`` up to float rounding: a verdict must not change with the unit of time."""
    if a > b:  # implies the tolerant test (its tolerance is >= 0); most calls answer here, without it
        return True
    return a >= b - 1e-9 * max(abs(a), abs(b))


def _pos(x: float | None) -> float | None:
    return x if x is not None and x > 0 else None


def _centre(median: float | None, mean: float | None) -> float | None:
    """The reference's centre: its median if positive, else its mean if positive (one call, not two)."""
    if median is not None and median > 0:
        return median
    return mean if mean is not None and mean > 0 else None


def references(snap: SliceSnapshot, th: Thresholds) -> Refs:
    slo = snap.slo_ttft_p99_s if snap.slo_ttft_p99_s is not None and snap.slo_ttft_p99_s > 0 else th.default_slo_ttft_p99_s
    t50 = _centre(snap.ref_ttft_p50_s, snap.ref_ttft_mean_s)
    t99 = _pos(snap.ref_ttft_p99_s)
    tk, ttk = "ref", "ref"
    if t50 is None and t99 is None:
        t99, tk, ttk = slo * th.fallback_ttft_ref_slo_fraction, "fallback", "fallback"
        t50 = t99 / th.ttft_tail_prior
    elif t99 is None:
        t99, ttk = (t50 or 0.0) * th.ttft_tail_prior, "tail_prior"
    elif t50 is None:
        t50, tk = t99 / th.ttft_tail_prior, "tail_prior"
    p50 = _centre(snap.ref_tpot_p50_s, snap.ref_tpot_mean_s)
    p99 = _pos(snap.ref_tpot_p99_s)
    pk, ptk = "ref", "ref"
    if p50 is None and p99 is None:
        ceiling = snap.slo_tpot_p99_s if snap.slo_tpot_p99_s is not None and snap.slo_tpot_p99_s > 0 else th.fallback_tpot_s
        p99, pk, ptk = ceiling / th.tpot_tail_inflation_ratio, "fallback", "fallback"
        p50 = p99 / th.tpot_tail_prior
    elif p99 is None:
        p99, ptk = (p50 or 0.0) * th.tpot_tail_prior, "tail_prior"
    elif p50 is None:
        p50, pk = p99 / th.tpot_tail_prior, "tail_prior"
    return Refs(t50, t99, p50, p99, tk, ttk, pk, ptk)


def load_factor(snap: SliceSnapshot, th: Thresholds, saturation_tokens_per_s: float | None) -> tuple[float, bool]:
    """Expected TPOT over the reference TPOT at the window's token rate (>= 1), and whether it is known."""
    rate, ref_rate = snap.output_tokens_per_s, _pos(snap.ref_output_tokens_per_s)
    if rate is None or not rate >= 0 or ref_rate is None:  # NaN is no measurement
        return 1.0, False
    if rate <= ref_rate:  # a measured zero included: no tokens delivered is no load, not an unknown one
        return 1.0, True
    sat = saturation_tokens_per_s if saturation_tokens_per_s is not None and saturation_tokens_per_s > ref_rate else None
    s = sat / ref_rate if sat is not None else 1.0 / th.decode_reference_utilization
    x = rate / ref_rate
    if x >= s:
        return th.load_factor_max, True
    return min(th.load_factor_max, (1.0 - 1.0 / s) / (1.0 - x / s)), True


def link_state(snap: SliceSnapshot, th: Thresholds) -> LinkState:
    """The link the tier's streams cross: its client edge (against the slice cap, or uncapped its
    physical rate) or, where the edge does not bind, the most utilised WAN link of its path."""
    edge = _edge_state(snap, th)
    if edge.binding:
        return edge
    wan_rx, wan_cap = snap.wan_rx_bps, _pos(snap.wan_capacity_bps)
    if wan_rx is not None and wan_cap is not None:
        util = wan_rx / wan_cap
        if ge(util, th.link_binding_ratio):
            # A full WAN link paces every stream across it (its buffer's queue and the losses it
            # drops): the slice's own bits per token do not set its rate, the link's share does.
            return LinkState(True, True, util, "wan", edge.bits_per_token, cap_reported=edge.cap_reported)
    return edge


def _edge_state(snap: SliceSnapshot, th: Thresholds) -> LinkState:
    rx = snap.link_rx_bps
    reported = _pos(snap.link_cap_bps) is not None
    # No cap reported, or one at or above the physical rate (an uncapped edge, as the collectors
    # report it: ``snapshot.edge_cap``): the link is judged against its physical rate.
    cap, against = _pos(edge_cap(snap.link_cap_bps, snap.link_capacity_bps)), "cap"
    if cap is None:
        cap, against = _pos(snap.link_capacity_bps), "capacity"
    if rx is None or cap is None:
        return LinkState(False, False, cap_reported=reported)
    util = rx / cap
    rate = _pos(snap.output_tokens_per_s)
    bpt = rx / rate if rate is not None and rx > 0 else None
    token_max = cap / bpt if bpt is not None and bpt > 0 else None
    floor = None
    if bpt is not None:
        streams = snap.requests_running
        if streams is None and snap.tpot_mean_s is not None:
            streams = rate * snap.tpot_mean_s if rate is not None else None  # Little: streams = tokens/s x s/token
        floor = streams * bpt / cap if streams is not None else None
    isfinite = math.isfinite
    return LinkState(
        True,
        ge(util, th.link_binding_ratio),
        util,
        against,
        bpt if bpt is not None and isfinite(bpt) else None,
        token_max if token_max is not None and isfinite(token_max) else None,
        floor if floor is not None and isfinite(floor) else None,
        reported,
    )


def added_delay_s(snap: SliceSnapshot, th: Thresholds) -> float | None:
    """The WAN path's RTT above its reference (0 within noise), or None without both."""
    rtt, ref = snap.wan_rtt_s, snap.wan_base_rtt_s
    if rtt is None or ref is None or not ref > 0:
        return None  # a base RTT of 0 (or NaN) is no base: the whole RTT would read as added delay
    return rtt - ref if rtt > ref * (1.0 + th.wan_rtt_noise_ratio) else 0.0


def _split_tpot(
    obs: float, ref: float, expected: float, engine: float, link: LinkState, confirmed: bool, held: bool
) -> tuple[float, float, float]:
    """(network, compute, base) seconds of one TPOT statistic (``held``: the link binds, or the
    tokens arrive coalesced, which only a buffer on the path does)."""
    excess = max(0.0, obs - ref)
    contention = max(0.0, obs - expected)
    if held:
        # Both could explain it: a full link always binds in part, so the contention is shared in
        # proportion to what each alone could explain (the network: all of it).
        slow = max(0.0, engine - expected)
        compute = contention * slow / (contention + slow) if contention > 0 else 0.0
        network = contention - compute
    elif link.known or confirmed:
        compute, network = contention, 0.0
    else:
        compute, network = 0.0, 0.0  # unseparated: left unexplained
    total = compute + network
    if total > excess > 0:
        scale = excess / total
        compute, network = compute * scale, network * scale
    elif excess <= 0:
        compute = network = 0.0
    return network, compute, obs - network - compute


def attribute(snap: SliceSnapshot, th: Thresholds, saturation_tokens_per_s: float | None = None) -> tuple[Attribution, Physics]:
    """Split the window's latency by resource (``snap`` carries its references in ``ref_*``)."""
    refs = references(snap, th)
    link = link_state(snap, th)
    lf, load_known = load_factor(snap, th, saturation_tokens_per_s)
    share = snap.gpu_share
    # A share under 1 % is no GPU at all: clamp so that the split stays finite.
    slowdown = 1.0 / max(share, 0.01) if share is not None and share < th.gpu_share_reduced else 1.0
    confirmed = (
        slowdown > 1.0
        or (snap.preemptions_per_s is not None and snap.preemptions_per_s > th.preemptions_min_per_s)
        or (snap.kv_cache_usage is not None and snap.kv_cache_usage >= th.kv_cache_high)
    )
    waiting = snap.requests_waiting
    gauge = None if waiting is None else waiting > th.requests_waiting_min
    rate = _pos(snap.request_rate)
    little = waiting / rate if waiting is not None and rate is not None else None

    tpot50 = snap.tpot_p50_s if snap.tpot_p50_s is not None else snap.tpot_mean_s
    tpot99 = snap.tpot_p99_s
    # The median decides, unless it collapsed below the reference while the tail grew: tokens then
    # arrive coalesced (held in a queue, delivered in bursts), and only the tail carries the pacing.
    collapsed = (
        tpot50 is not None
        and tpot99 is not None
        and refs.tpot_p50 is not None
        and not ge(tpot50 * th.tpot_inflation_ratio, refs.tpot_p50)
        and refs.tpot_p99 is not None
        and ge(tpot99, th.tpot_tail_inflation_ratio * refs.tpot_p99)
    )
    pace = "tpot_p99" if collapsed or tpot50 is None else "tpot_p50"
    # Decode never runs faster than its unloaded step: a median TPOT at half the reference's is
    # tokens held in a buffer on the path and released in bursts (a shaper's queue, the backlog of
    # a cap just lifted). The network holds them whatever the link's utilisation reads.
    coalesced = (
        tpot50 is not None
        and refs.tpot_p50 is not None
        and refs.tpot_kind == "ref"  # against a measured median only: a prior's is no engine's pace
        and th.tpot_coalesced_ratio > 0
        and tpot50 < th.tpot_coalesced_ratio * refs.tpot_p50
    )
    held = link.binding or coalesced
    shares: list[LatencyShare] = []
    net_tpot: dict[str, float] = {}
    cfactor = 1.0
    contention, c_thr, pace_binds = 0.0, 0.0, False
    for stat, obs, ref, ratio in (
        ("tpot_p50", tpot50, refs.tpot_p50, th.tpot_inflation_ratio),
        ("tpot_p99", tpot99, refs.tpot_p99, th.tpot_tail_inflation_ratio),
    ):
        if obs is None or ref is None:
            continue
        expected = ref * lf
        engine = expected * slowdown
        network, compute, base = _split_tpot(obs, ref, expected, engine, link, confirmed, held)
        net_tpot[stat] = network
        if stat == pace:
            contention, c_thr = max(0.0, obs - expected), (ratio - 1.0) * ref
            cfactor = (expected + compute) / expected if expected > 0 else 1.0
            pace_binds = c_thr > 0 and ge(max(network, compute), c_thr)
        shares.append(LatencyShare(stat, obs, ref, 0.0, network, compute, base))
    unseparated = not link.known and not confirmed and c_thr > 0 and ge(contention, c_thr)

    delay = added_delay_s(snap, th)
    delay_ttft = th.delay_rtts_per_first_token * delay if delay is not None else 0.0
    slo = snap.slo_ttft_p99_s if snap.slo_ttft_p99_s is not None and snap.slo_ttft_p99_s > 0 else th.default_slo_ttft_p99_s
    delay_bar = max(th.delay_material_slo_fraction * slo, 1e-12)  # the classifier's bar for a delay that binds
    ttft50 = snap.ttft_p50_s if snap.ttft_p50_s is not None else snap.ttft_mean_s
    tokens_short = (
        snap.output_tokens_per_s is not None
        and snap.ref_output_tokens_per_s is not None
        and snap.output_tokens_per_s < th.tokens_drop_ratio * snap.ref_output_tokens_per_s
    )
    for stat, obs, ref, pair in (
        ("ttft_p50", ttft50, refs.ttft_p50, pace),
        ("ttft_p99", snap.ttft_p99_s, refs.ttft_p99, "tpot_p99" if "tpot_p99" in net_tpot else pace),
    ):
        if obs is None or ref is None:
            continue
        excess = max(0.0, obs - ref)
        compute = min(excess, ref * (cfactor - 1.0))
        left = excess - compute
        # An added WAN delay costs every first token a fixed number of round trips: measured, so
        # taken before the residual is split between the link's queue and the engine's.
        delayed = min(left, delay_ttft) if delay_ttft > 0 else 0.0
        left -= delayed
        # Requests measured waiting (Little's law: waiting / arrival rate) are queue time the link cannot claim.
        measured = min(left, little) if little is not None and gauge else 0.0
        if link.binding and not net_tpot and tokens_short:
            network = left - measured  # no TPOT: the link at its cap starving delivery explains what is left
        elif held and little is not None:
            network = left - measured  # the queue is measured (Little's law); what it leaves waited in the full link
        elif held:
            network = min(left - measured, th.first_chunk_tpot_multiple * net_tpot.get(pair, 0.0))
        else:
            network = 0.0
        queue = left - network
        if gauge is False and held:
            network, queue = left, 0.0  # nothing waits at the engine: the link's queue holds the first chunk
        elif gauge is False and (pace_binds or delayed >= delay_bar):
            # Nothing waits and another resource binds (a material delay counts; RTT jitter of a few
            # ms beside seconds of TTFT does not): leave the rest unexplained.
            queue = 0.0
        network += delayed
        shares.append(LatencyShare(stat, obs, ref, queue, network, compute, obs - queue - network - compute))
    # Appended in the names' sorted order already (tpot_p50, tpot_p99, ttft_p50, ttft_p99), the
    # order every reader has always seen: no sort on the hot path.
    physics = Physics(
        refs,
        link,
        lf,
        load_known,
        slowdown,
        cfactor,
        gauge,
        little,
        unseparated,
        contention,
        c_thr,
        pace if net_tpot else None,
        confirmed,
        delay,
        delay_ttft,
        coalesced,
    )
    return Attribution(tuple(shares)), physics


def settle(attribution: Attribution, primary: str, queue_named: bool, material: frozenset[str]) -> Attribution:
    """The attribution as the verdict reads it (v16): ``primary`` binds, and the physics above left
    part of some excess placed nowhere. Two readings the verdict settles, and only those:

    - the excess no relation placed (``base_s`` above the reference) is the primary's: the verdict
      says it binds, and nothing else was found to. With a queue verdict that is decode slowed by the
      load (more streams per step), which the same demand causes.
    - at a network or compute verdict that names no queue (the judge found none material alone), the
      waiting is the backlog the binding resource leaves behind: removing that resource removes it.

    Each statistic keeps ``queue + network + compute + base == observed``; ``excess_share`` moves
    the same way over the ``material`` statistics (those the judge weighed), so a resource's
    fraction is still its largest over them. Verdicts, secondaries and confidence were decided before
    and are untouched."""
    absorb = not queue_named and primary != "queue"
    k = RESOURCES.index(primary)
    old = attribution.shares
    shares: list[LatencyShare] | None = None  # copied on the first statistic that moves
    top = 0.0
    for i, s in enumerate(old):
        ref, obs = s.reference_s, s.observed_s
        if ref is None or not obs > ref:  # no excess (``excess_s`` is 0): nothing to settle
            continue
        excess = obs - ref
        # The arithmetic (and its order) is v16's as frozen: the settled seconds are bit-identical.
        parts = [s.queue_s, s.network_s, s.compute_s]  # RESOURCES' order
        if absorb and parts[0] > 0:
            parts[k] += parts[0]
            parts[0] = 0.0
        rest = excess - (parts[0] + parts[1] + parts[2])
        if rest > 0:
            parts[k] += rest
        q, n, c = parts
        if q != s.queue_s or n != s.network_s or c != s.compute_s:
            if shares is None:
                shares = list(old)
            shares[i] = LatencyShare(s.stat, obs, ref, q, n, c, obs - q - n - c)
        if s.stat in material:
            own = parts[k] / excess
            if own > top:
                top = own
    fractions = dict(attribution.excess_share)
    if primary not in fractions:
        return attribution if shares is None else Attribution(tuple(shares), attribution.excess_share)
    if absorb:
        fractions[primary] = fractions[primary] + fractions.get("queue", 0.0)
        fractions["queue"] = 0.0
    own = top if top > fractions[primary] else fractions[primary]  # max(fractions[primary], top)
    fractions[primary] = unit_r4(own)  # own >= top, which rose from 0.0
    excess_share = tuple([(r, fractions[r]) for r in RESOURCES if r in fractions])
    if shares is None and excess_share == attribution.excess_share:
        return attribution
    return Attribution(tuple(shares) if shares is not None else old, excess_share)
