"""Healthy for the reclaim delay: give back one replica and/or half a cap's excess, one step per
period (pure). Never a replica while one runs below its nominal GPU share or within
``reclaim_share_hold_s`` after one did (``share_hold``)."""

from __future__ import annotations

from inferslice.actions import Action, ActionKind
from inferslice.control.demand import demand_bps
from inferslice.control.forecast import Forecast
from inferslice.control.remedies.base import RECLAIM, rate_per_replica
from inferslice.control.settings import TierPolicy
from inferslice.control.state import ControlState, SliceState


def share_hold(ss: SliceState, st: ControlState, p: TierPolicy, now_s: float) -> bool:
    """A replica runs below its nominal GPU share now (or the window saw one), or one did within
    ``reclaim_share_hold_s``: the tier's healthy latency rests on every replica it has, so scaling in
    would queue it (the testbed's gpu-share-drop scenario: Standard 3 -> 2, P99 TTFT 2-5 s until a
    cold start brought the third back)."""
    s = p.settings
    if any(r.state != "stopping" and r.gpu_share < s.contended_share for r in ss.replicas):
        return True
    snap = ss.snapshot
    if snap is not None and snap.gpu_share is not None and snap.gpu_share < s.contended_share:
        return True
    return st.contended_seen_s is not None and now_s - st.contended_seen_s < s.reclaim_share_hold_s


def reclaim_remedy(
    p: TierPolicy, ss: SliceState, st: ControlState, lam: float | None, fc: Forecast | None, now_s: float, hold: bool
) -> list[Action]:
    """One reclaim step: a replica (unless ``hold``) and/or half a cap's excess."""
    s = p.settings
    out: list[Action] = []
    target = ss.replicas_target
    mu = rate_per_replica(st, p)
    demand = max(lam or 0.0, fc.upper if fc is not None else 0.0)
    if (
        not hold
        and (RECLAIM, ActionKind.SET_REPLICAS.value) not in st.ineffective
        and target - 1 >= max(p.replicas_min, 1)
        and ss.replicas_ready >= target
        and demand <= (target - 1) * mu * s.reclaim_utilisation
    ):
        out.append(
            Action(
                ActionKind.SET_REPLICAS,
                p.tier,
                target - 1,
                reason=f"reclaim: healthy {s.reclaim_after_healthy_s:g} s; {demand:.2f} req/s fits {target - 1} replicas below"
                f" {s.reclaim_utilisation:.0%} utilisation",
                regime=RECLAIM,
                previous=target,
                decided_s=now_s,
                expected_by_s=now_s + s.reclaim_after_healthy_s / 2,
            )
        )
    wanted_bps = demand_bps(ss, p, st, lam)
    cap = ss.cap_bps
    if s.cap_raises and (RECLAIM, ActionKind.SET_CAP.value) not in st.ineffective and cap is not None and wanted_bps:
        keep = max(wanted_bps * s.cap_headroom * s.cap_reclaim_margin, p.base_cap_bps or 0.0)
        if cap > 2 * keep:
            lowered = cap - (cap - keep) / 2  # half the excess per reclaim period: slow, never below margin x demand
            out.append(
                Action(
                    ActionKind.SET_CAP,
                    p.tier,
                    round(lowered),
                    reason=f"reclaim: cap {cap / 1e6:.2f} Mbit/s is over twice {s.cap_reclaim_margin:g}x demand x headroom;"
                    " lowered by half the excess",
                    regime=RECLAIM,
                    previous=cap,
                    decided_s=now_s,
                    expected_by_s=now_s + s.reclaim_after_healthy_s / 2,
                )
            )
    return out
