"""Network-limited: the client-edge cap to measured demand x headroom within the budget; the budget
spent, a move toward a PoP with more headroom toward the client. When the network that binds is a
WAN link (the diagnosis's ``network_cause``), a move off it instead (``control.wan``). Never replicas
(pure). ``ControlSettings.cap_raises`` off: no cap raise (someone else owns the cap).

A raise needs evidence that the cap holds back what the tier's SLO needs: the link pinned at its cap
(what it hides is unknown: probe), or a demand estimate above the cap. An estimate within the cap on a
link with headroom is no such evidence (before, it probed x3: the model's ``overlap`` raised Standard
1.5 -> 4.0 Mbit/s while a co-tenant's GPU share, not the link, slowed it); nor is a pinned link on a
tier meeting its SLO (``SloState.MET``: P99 TTFT under 80 % of it): a probe then spends budget other
tiers' guarantees share and cures nothing the tier misses (``overlap``, seed 1: 1.24 -> 3.7 Mbit/s at
P99 TTFT 0.11 s).

Except after our own raise judged insufficient (the link fills the raised cap): that raise was sized
on an estimate taken under a binding cap, which is a lower bound, and it left the tier with no
headroom for the next load step. The next step finishes it, once an episode, to demand x the
headroom (at least the cap x the headroom) rather than a probe when the SLO is met (the demo's
approval segment: 0.5 -> 0.86 Mbit/s on a ~0.9 Mbit/s demand met the SLO at P99 TTFT 0.25 s with
the link pinned, and was held there, still network-limited). A refused step is not proposed again."""

from __future__ import annotations

from inferslice.actions import Action, ActionKind
from inferslice.control.demand import demand_bps
from inferslice.control.remedies.base import N, Proposal, Step, held_event
from inferslice.control.remedies.relocate import relocation
from inferslice.control.state import ControlEvent, SliceState
from inferslice.control.trust import cap_unseen, link_pinned
from inferslice.control.wan import wan_bound, wan_remedy
from inferslice.diagnosis import SloState


def network_remedy(step: Step, decided: frozenset[ActionKind]) -> Proposal:
    """``decided``: kinds already decided this window (a rollback, an earlier cause's move)."""
    out = Proposal()
    p, ss, st, s, now = step.p, step.ss, step.st, step.p.settings, step.now_s
    if wan_bound(step.diagnosis, ss, s):
        return wan_remedy(step, decided)
    if ActionKind.SET_CAP in decided or cap_unseen(step.diagnosis, ss, st, s.window_s):
        return out  # a cap decided already, or the verdict predates the cap in force: wait for a window measured at it
    demand = demand_bps(ss, p, st, step.arrivals_rps)
    cap = ss.cap_bps
    if (
        s.cap_raises
        and (N.value, ActionKind.SET_CAP.value) not in step.ineffective
        and demand is not None
        and cap is not None
        and cap < p.bandwidth_budget_bps
    ):
        pinned = link_pinned(ss, s.link_pinned_ratio)
        slo_met = step.diagnosis is not None and step.diagnosis.slo is SloState.MET
        key = (N.value, ActionKind.SET_CAP.value)
        unfinished = key in st.insufficient and key not in st.finished
        fits = not pinned and demand <= cap * 1.05
        why = "but the SLO is met" if slo_met and not unfinished else "and demand fits under it" if fits else None
        if why is not None:
            ev = held_event(step, N, f"the link carries {_share(ss, cap)} of its cap {why}: no raise")
            out.events += [ev] if ev is not None else []
            return out
        # A pinned link hides the demand: probe, unless the SLO is met (finishing an insufficient raise).
        factor = s.cap_probe_factor if pinned and not slo_met else s.cap_headroom
        new_cap = min(max(demand * s.cap_headroom, cap * factor), p.bandwidth_budget_bps)
        out.actions.append(
            Action(
                ActionKind.SET_CAP,
                p.tier,
                round(new_cap),
                reason=f"network_limited: demand ~{demand / 1e6:.2f} Mbit/s x {s.cap_headroom:g} headroom,"
                f" cap {cap / 1e6:.2f} Mbit/s, budget {p.bandwidth_budget_bps / 1e6:g} Mbit/s",
                regime=N.value,
                previous=cap,
                decided_s=now,
                expected_by_s=now + 2 * s.window_s,
            )
        )
        if new_cap < demand * s.cap_headroom:
            out.events.append(ControlEvent(now, p.tier, "budget_exhausted", f"cap raised to the budget {new_cap / 1e6:g} Mbit/s", N.value))
    elif ss.relocatable and (N.value, ActionKind.RELOCATE.value) not in step.ineffective and ActionKind.RELOCATE not in decided:
        act, why_not = relocation(p, ss, N, now, st, by_bandwidth=(demand or 0.0) * s.cap_headroom)
        if act is not None:
            out.actions.append(act)
        else:
            out.events.append(ControlEvent(now, p.tier, "budget_exhausted", f"bandwidth budget spent and {why_not}", N.value))
    return out


def _share(ss: SliceState, cap: float) -> str:
    rx = ss.snapshot.link_rx_bps if ss.snapshot is not None else None
    return f"{rx / cap:.0%}" if rx is not None and cap > 0 else "an unknown share"
