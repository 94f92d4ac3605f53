"""Network-limited: the client-edge cap to measured demand x headroom within the budget; the budget
spent, a move toward a PoP with more headroom toward the client. When the network that binds is a
WAN link (the diagnosis's ``network_cause``), a move off it instead (``control.wan``). Never replicas
(pure). ``ControlSettings.cap_raises`` off: no cap raise (someone else owns the cap)."""

from __future__ import annotations

from inferslice.actions import Action, ActionKind
from inferslice.control.demand import demand_bps
from inferslice.control.remedies.base import N, Proposal, Step
from inferslice.control.remedies.relocate import relocation
from inferslice.control.state import ControlEvent
from inferslice.control.trust import cap_unseen, link_pinned
from inferslice.control.wan import wan_bound, wan_remedy


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
        # A pinned link, or an estimate no larger than the cap, hides the demand: probe.
        hidden = demand <= cap * 1.05 or link_pinned(ss, s.link_pinned_ratio)
        factor = s.cap_probe_factor if hidden else s.cap_headroom
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
