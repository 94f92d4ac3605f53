"""The judge (pure): which statistic's excess is material, and which resource binds through it, from
one window's attribution; and the margin a binding verdict rests on (``classify`` reads both).

Each row is one latency statistic with its materiality thresholds (the queue's and compute's; the
network's, lower at a full link since v11; the link's, for a window whose link state is incomplete)
and the seconds each resource takes of its excess. ``binds``, ``fractions``, ``secondary`` and
``closest`` ask the rows; ``binding_margin`` turns the primary's ratio into the margin confidence
is calibrated on.
"""

from __future__ import annotations

import math

from inferslice.bottleneck import confidence, signals
from inferslice.bottleneck.rounding import unit_r4
from inferslice.bottleneck.thresholds import Thresholds
from inferslice.diagnosis import Attribution
from inferslice.snapshot import SliceSnapshot

ORDER = ("network", "compute", "queue")  # remedies in the order they must come

EPS = 1e-9  # relative: materiality must not change with the unit of time (float rounding)
RATIO_MAX = 64.0  # a share 64x past its threshold is as sure as it gets: the margin saturates (log2 = 6)


class Judge:
    """Materiality of each statistic and resource, from one attribution.

    Rows: ``(stat, is_tpot, excess, threshold, material, breached, judged, (queue, network, compute),
    network threshold, material to it, link threshold, at link)``: the network's threshold is the
    link's (v11: TTFT from ``ttft_link_inflation_ratio``) where a link reads full (``link_full``),
    else the same; the link threshold is what it would be at a full link (``unsure`` asks it of a
    window whose link state is incomplete); ``at link``: a tail that counts for the network at a
    full link although unjudged. The median decides when the window has one: a tail statistic alone
    never overrules it (a P99 TTFT still counts once it breaches the SLO: that is the promise the
    tier made).
    """

    def __init__(
        self,
        attribution: Attribution,
        snap: SliceSnapshot,
        th: Thresholds,
        tpot_stat: str | None,
        link_binding: bool,
        compute_confirmed: bool,
        median_drift: bool = False,
        wan_tail_quiet: bool = False,
        link_full: bool = False,
    ) -> None:
        self.compute_confirmed = compute_confirmed
        self.wan_tail_quiet = wan_tail_quiet
        slo = signals.slo_ttft_s(snap, th)
        self.th = th
        self.tpot_stat = tpot_stat
        self.link_binding = link_binding
        # Each statistic's materiality ratio. A neighbour's GPU share shows first in the decode tail:
        # once the drop is measured, a smaller P99 excess is its symptom rather than noise.
        tpot_tail_ratio = th.tpot_tail_confirmed_ratio if compute_confirmed else th.tpot_tail_inflation_ratio
        shares = attribution.shares
        ttft_median = False
        for s in shares:
            if s.stat == "ttft_p50":
                ttft_median = True
                break
        rows = []
        br_any = False
        floor, link_ratio = th.delay_material_slo_fraction * slo, th.ttft_link_inflation_ratio
        for s in shares:
            ref = s.reference_s
            ex = s.observed_s - ref if ref is not None and s.observed_s > ref else 0.0
            stat = s.stat
            is_tpot = stat[1] == "p"
            if is_tpot:
                ratio = th.tpot_inflation_ratio if stat == "tpot_p50" else tpot_tail_ratio
            else:
                ratio = th.ttft_inflation_ratio if stat == "ttft_p50" else th.ttft_tail_inflation_ratio
            thr = (ratio - 1.0) * (ref or 0.0)
            # v11: at a full link the network binds through a TTFT statistic from a lower bar (the
            # link's gauge corroborates what a noisier quantile alone could not); the queue's and
            # compute's stay. Never under a tenth of the SLO (``delay_material_slo_fraction``: 50 ms
            # of a 500 ms SLO, the corpus truth's TTFT floor; a share, so the rule scales with the SLO).
            if is_tpot:
                thr_link = thr_net = thr
            else:
                thr_link = (link_ratio - 1.0) * (ref or 0.0)
                if thr_link < floor:
                    thr_link = floor
                if thr_link > thr:
                    thr_link = thr
                thr_net = thr_link if link_full else thr
            br = not is_tpot and stat == "ttft_p99" and s.observed_s > slo and ex > 0
            mat = (ex > 0 and ex >= thr * (1.0 - EPS)) or br
            mat_net = mat or (thr_net < thr and ex > 0 and ex >= thr_net * (1.0 - EPS))
            judged = stat == tpot_stat and not median_drift if is_tpot else (stat == "ttft_p50" or br or not ttft_median)
            # At a full link the P99 TPOT counts even beside a median at its reference: the link
            # corroborates the tail (the first window after a cap cut shows it before the median).
            # So does the P99 TTFT: first chunks wait in the full link's queue, the median's often do not.
            # A full WAN link's token-gap tail with first tokens at their reference is bursts the
            # requests' pace absorbs (``wan_tail_quiet``): it does not count alone.
            at_link = link_binding and (stat == "ttft_p99" or (stat == "tpot_p99" and not wan_tail_quiet))
            secs = (s.queue_s, s.network_s, s.compute_s)
            rows.append((stat, is_tpot, ex, thr, mat, br, judged, secs, thr_net, mat_net, thr_link, at_link))
            br_any = br_any or br
        self.rows = rows
        self.any_breached = br_any  # only the P99 TTFT can breach (the SLO's)
        self._bound: dict[bool, tuple[list[tuple[str, float]], ...]] = {}  # per ttft_only
        self._tops: dict[bool, list[float]] = {}

    def judged_stat(self, stat: str) -> bool:
        return any(r[0] == stat and r[6] for r in self.rows)

    def binds(self, resource: str, ttft_only: bool = False) -> bool:
        return self._top(ttft_only)[INDEX[resource]] >= 1.0 - EPS

    def binding_rows(self, resource: str, ttft_only: bool = False, at_least: float = 1.0) -> list[tuple[str, float]]:
        """``(stat, ratio)`` of every statistic through which the resource binds: its share over the
        materiality threshold (>= 1; for a breached P99 TTFT, over half the excess if that is larger).
        ``at_least`` below 1 also returns the statistics where it comes that close."""
        bar = at_least * (1.0 - EPS)
        return [(stat, r) for stat, r in self._ratios(ttft_only)[INDEX[resource]] if r >= bar]

    def _top(self, ttft_only: bool) -> list[float]:
        """The largest ratio of each resource (queue, network, compute; 0 where it binds through nothing)."""
        self._ratios(ttft_only)
        return self._tops[ttft_only]

    def _ratios(self, ttft_only: bool) -> tuple[list[tuple[str, float]], ...]:
        """Per resource (queue, network, compute), every statistic it may bind through, with its
        share over the threshold: one pass over the rows, once per question (the verdict asks the
        same question several times)."""
        cached = self._bound.get(ttft_only)
        if cached is not None:
            return cached
        out: tuple[list[tuple[str, float]], ...] = ([], [], [])
        tops = [0.0, 0.0, 0.0]
        link_binding, confirmed = self.link_binding, self.compute_confirmed
        for stat, is_tpot, ex, thr, _mat, br, judged, secs, thr_net, _mat_net, _thr_link, at_link in self.rows:
            if is_tpot and ttft_only:
                continue
            for k in (0, 1, 2) if not is_tpot else (1, 2):  # the queue never binds through TPOT
                tail_at_link = k == 1 and at_link
                tail_confirmed = k == 2 and confirmed and stat == "tpot_p99"  # likewise a reported GPU-share drop
                if not judged and not tail_at_link and not tail_confirmed:
                    continue
                sec = secs[1] + secs[2] if k == 1 and is_tpot and link_binding else secs[k]  # a full link takes part in any contention
                if sec <= 0:
                    continue
                bar = thr_net if k == 1 else thr
                ratio = sec / bar if bar > 0 else RATIO_MAX
                if br and ex > 0:
                    ratio = max(ratio, sec / (0.5 * ex))
                if ratio > RATIO_MAX:
                    ratio = RATIO_MAX
                out[k].append((stat, ratio))
                if ratio > tops[k]:
                    tops[k] = ratio
        self._bound[ttft_only] = out
        self._tops[ttft_only] = tops
        return out

    def closest(self) -> float:
        """The largest judged excess over its materiality threshold (< 1 when nothing is material)."""
        best = 0.0
        for _stat, _tp, ex, _thr, _mat, _br, judged, _secs, thr_net, _mat_net, _thr_link, _at_link in self.rows:
            if judged and ex > 0:  # against the lowest bar any resource binds from
                best = max(best, ex / thr_net if thr_net > 0 else RATIO_MAX)
        return best

    def weighed(self) -> frozenset[str]:
        """The statistics a resource's fraction is weighed over (``fractions``): a material excess it
        judged, or one material to the network's bar that it judged or a full link lets count."""
        out: list[str] = []
        for r in self.rows:  # a loop: a generator costs more on the hot path (settle asks it of most windows)
            if r[2] > 0 and ((r[4] and r[6]) or (r[9] and (r[6] or r[11]))):
                out.append(r[0])
        return frozenset(out)

    def fractions(self) -> dict[str, float]:
        q = n = c = 0.0
        for _stat, _tp, ex, _thr, mat, _br, judged, secs, _thr_net, mat_net, _thr_link, at_link in self.rows:
            if mat_net and ex > 0 and (judged or at_link):
                y = secs[1] / ex
                if y > n:
                    n = y
                if not mat or not judged:
                    continue  # material to the network's bar only, or a tail only the link lets count (v11)
                x, z = secs[0] / ex, secs[2] / ex
                if x > q:
                    q = x
                if z > c:
                    c = z
        return {"queue": unit_r4(q), "network": unit_r4(n), "compute": unit_r4(c)}  # each rose from 0.0

    def secondary(self, resource: str, fractions: dict[str, float]) -> bool:
        if fractions[resource] < self.th.secondary_share * (1.0 - EPS):
            return False
        k = INDEX[resource]
        if k == 1:
            return any(r[9] and (r[6] or r[11]) and r[7][1] >= 0.5 * r[8] * (1.0 - EPS) for r in self.rows)
        return any(r[4] and r[6] and r[7][k] >= 0.5 * r[3] * (1.0 - EPS) for r in self.rows)

    def any_material(self, tpot: bool) -> bool:
        for r in self.rows:  # noqa: SIM110 (a loop: a generator costs more on the hot path)
            if r[1] is tpot and r[4] and r[6]:
                return True
        return False

    def largest(self) -> str | None:
        best, name = 0.0, None
        for r in self.rows:
            if r[4] and r[6]:
                for res in ORDER:
                    sec = r[7][INDEX[res]]
                    if sec > best:
                        best, name = sec, res
        return name


INDEX = {"queue": 0, "network": 1, "compute": 2}


def binding_margin(judge: Judge, primary: str, snap: SliceSnapshot) -> tuple[float, list[str]]:
    """log2 of how far the primary's share passes materiality, less how close a resource whose remedy
    comes first is to binding (it would take the verdict over), and the statistics it rests on: the
    medians it binds through (else every statistic), those of them the window's request counts
    bound where any are (v11)."""
    bar = 1.0 - EPS
    medians: list[tuple[str, float]] = []
    every: list[tuple[str, float]] = []
    for stat, r in judge._ratios(False)[INDEX[primary]]:
        if r >= bar:
            every.append((stat, r))
            # Through a median the verdict stands on the robust statistic (a tail beside it adds nothing
            # it needs); only a verdict binding through tails alone rests on them, and on their request counts.
            if stat.endswith("p50"):
                medians.append((stat, r))
    pool = medians or every
    # v11: a verdict that binds through several statistics stands on any one of them: where some
    # rest on enough requests to bound them (``sampling``), it rests on those (a network verdict at
    # a pinned cap has its TPOT median from the streams in flight while few first tokens arrive).
    if len(pool) > 1:
        sampled = [(stat, r) for stat, r in pool if not confidence.undersampled(stat, snap)]
        if sampled:
            pool = sampled
    stats = [stat for stat, _r in pool]
    top = 0.0
    for _stat, r in pool:
        if r > top:
            top = r
    margin = math.log2(top) if stats else 0.0
    tops = judge._top(False)
    for ahead in ORDER[: ORDER.index(primary)]:
        near = tops[INDEX[ahead]]  # the largest ratio it binds through (0: none)
        if near >= (1.0 / RATIO_MAX) * bar:
            margin = min(margin, max(0.0, math.log2(1.0 / near)))
    return max(0.0, margin), stats
