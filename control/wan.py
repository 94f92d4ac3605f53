"""The WAN remedy (pure): a network verdict whose binding resource is a slowed WAN path, not the client edge.

Cross-traffic that fills an inter-PoP link, or an added delay on it (a reroute), slows every stream
a tier's replicas at that PoP send to the gateway: the snapshot's WAN fields show it (``wan_rtt_s``
over ``wan_base_rtt_s``: the slowest link the tier's traffic crosses, by its mean probe RTT against
the declared one; ``wan_rx_bps`` of ``wan_capacity_bps``: the fullest), and the classifier reads
``network_limited`` with the client edge free. A cap raise gives bandwidth the
streams cannot reach and a scale-out adds replicas behind the same path (at the same PoP, in
placement order): both are futile. The remedy is to move the replicas behind the slowed path,
make-before-break, to free GPU at a PoP whose path is not slowed (``SliceState.path_excess_s``: the
per-PoP measurement), one replica per decision within the relocation cooldown; a move that leaves
other replicas behind the path is ``insufficient``, not futile.
"""

from __future__ import annotations

from inferslice.actions import Action, ActionKind
from inferslice.control.placement import destinations
from inferslice.control.remedies.base import N, Proposal, Step, cold_start_s, held_event
from inferslice.control.settings import ControlSettings, TierPolicy
from inferslice.control.state import ControlEvent, SliceState
from inferslice.control.trust import link_pinned, streak
from inferslice.diagnosis import Diagnosis, NetworkCause, Regime


def wan_bound(diagnosis: Diagnosis | None, ss: SliceState, s: ControlSettings) -> bool:
    """A network verdict is the WAN's: the diagnosis names a WAN link or delay as the network cause;
    from a producer that names none, a WAN link the tier's traffic crosses reads slowed past its
    declared RTT or full while its client edge is not pinned at a cap (a cap raise would give
    bandwidth the streams cannot reach)."""
    cause = diagnosis.network_cause if diagnosis is not None else None
    if cause is not None:
        return cause in (NetworkCause.WAN_LINK, NetworkCause.WAN_DELAY)
    snap = ss.snapshot
    if snap is None or link_pinned(ss, s.link_pinned_ratio):
        return False
    rtt, base = snap.wan_rtt_s, snap.wan_base_rtt_s
    slowed = rtt is not None and base is not None and rtt - base >= s.wan_excess_s
    rx, capacity = snap.wan_rx_bps, snap.wan_capacity_bps
    full = rx is not None and capacity is not None and capacity > 0 and rx >= s.link_pinned_ratio * capacity
    return slowed or full


def wan_remedy(step: Step, decided: frozenset[ActionKind]) -> Proposal:
    """After two windows of the verdict, one move off the most slowed path; never a cap raise or replicas."""
    out = Proposal()
    p, ss, st, s, now = step.p, step.ss, step.st, step.p.settings, step.now_s
    if not ss.relocatable or (N.value, ActionKind.RELOCATE.value) in step.ineffective or ActionKind.RELOCATE in decided:
        return out
    if streak(st, N) < s.persist_windows:
        ev = held_event(step, N, "a WAN link reads slowed in one window: a move waits for a second")
        out.events += [ev] if ev is not None else []
        out.holding = True
        return out
    act, why_not = relocate_off_path(p, ss, now, cold_start_s(st, p) + 2 * s.window_s)
    if act is not None:
        out.actions.append(act)
    elif streak(st, N) == s.persist_windows:  # said once per episode
        out.events.append(ControlEvent(now, p.tier, "no_placement", f"WAN path slowed: {why_not}", N.value))
    return out


def slowed_pops(ss: SliceState, s: ControlSettings) -> set[str]:
    return {pop for pop, x in ss.path_excess_s.items() if x >= s.wan_excess_s}


def relocate_off_path(p: TierPolicy, ss: SliceState, now_s: float, delay_s: float) -> tuple[Action | None, str]:
    """Make-before-break: a ready replica behind the most slowed WAN path to a free GPU at a PoP whose
    path is not slowed (the placement rules and the ranking of ``destinations``)."""
    s = p.settings
    slowed = slowed_pops(ss, s)
    if not slowed:
        return None, "no PoP's path measured slowed (per-PoP path RTTs unknown)"
    behind = sorted(
        (r for r in ss.replicas if r.state == "ready" and r.pop in slowed), key=lambda r: (-ss.path_excess_s.get(r.pop, 0.0), r.id)
    )
    if not behind:
        return None, f"no ready replica behind the slowed paths of {', '.join(sorted(slowed))}"
    replica = behind[0]
    slots = destinations(
        replica, list(ss.replicas), p.parallelism, p.gpu_per_replica, dict(ss.free_gpu), ss.pair_rtt_s, ss.pop_rtt_s, frozenset(slowed)
    )
    if not slots:
        return None, f"no free GPU slot at a PoP off the slowed paths ({', '.join(sorted(slowed))})"
    # The tier's own reserved slots first: the unreserved pool is what every tier's moves share.
    slots = sorted(slots, key=lambda slot: slot not in p.placement)
    excess = ss.path_excess_s.get(replica.pop, 0.0)
    return (
        Action(
            ActionKind.RELOCATE,
            p.tier,
            slots[0],
            reason=f"network_limited on the WAN: {replica.pop}'s path to the gateway {excess * 1e3:.0f} ms slower than configured,"
            f" client edge not at its cap; move {replica.id} from {replica.pop}/gpu{replica.gpu} to {slots[0]}, make-before-break",
            regime=Regime.NETWORK_LIMITED.value,
            replica=replica.id,
            previous=f"{replica.pop}/gpu{replica.gpu}",
            decided_s=now_s,
            expected_by_s=now_s + delay_s,
        ),
        "",
    )
