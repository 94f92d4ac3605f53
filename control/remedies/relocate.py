"""A make-before-break move of one replica, where the placement rules allow it (pure)."""

from __future__ import annotations

from inferslice.actions import Action, ActionKind
from inferslice.control.placement import destinations
from inferslice.control.remedies.base import cold_start_s
from inferslice.control.settings import TierPolicy
from inferslice.control.state import ControlState, SliceState
from inferslice.diagnosis import Regime
from inferslice.placement import ReplicaPlacement


def contended_moves(p: TierPolicy, ss: SliceState, now_s: float, st: ControlState) -> list[Action]:
    """Compute: every contended replica (below ``contended_share``) that has a destination, the most
    contended first, each to the slot with most headroom left after the moves before it (one batch:
    the guardrails judge it against a working copy, the front runs the moves side by side). A replica
    a move of this tier already names is left to it. Into GPU the tier has reserved, as many moves as
    fit; into the shared pool (reserved by no tier) one per decision: other tiers may need it this
    very step (the model's London co-tenant: Premium moving both replicas there left Standard, slowed
    on the same PoP, nowhere to go: its goodput 1.48 -> 1.26 req/s)."""
    s = p.settings
    moving = {c.replica for c in st.checks if c.kind is ActionKind.RELOCATE and c.replica}
    contended = sorted((r for r in ss.replicas if r.state == "ready" and r.gpu_share < s.contended_share and r.id not in moving),
                       key=lambda r: r.gpu_share)  # fmt: skip
    free = dict(ss.free_gpu)
    own = set(p.placement[: p.replicas_max])
    out: list[Action] = []
    for replica in contended:
        slots = destinations(replica, list(ss.replicas), p.parallelism, p.gpu_per_replica, free, ss.pair_rtt_s, ss.pop_rtt_s)
        if not slots:
            continue
        if slots[0] not in own:  # the shared pool: this is the decision's one move there
            free = {slot: f for slot, f in free.items() if slot in own}
        free[slots[0]] = free.get(slots[0], 0.0) - p.gpu_per_replica
        out.append(_move(p, replica, slots[0], Regime.COMPUTE_LIMITED, now_s, st))
    return out


def _move(p: TierPolicy, replica: ReplicaPlacement, slot: str, cause: Regime, now_s: float, st: ControlState) -> Action:
    delay = cold_start_s(st, p) + 2 * p.settings.window_s
    return Action(
        ActionKind.RELOCATE,
        p.tier,
        slot,
        reason=f"{cause.value}: move {replica.id} from {replica.slot} (share {replica.gpu_share:.2f}) to {slot}, make-before-break",
        regime=cause.value,
        replica=replica.id,
        previous=replica.slot,
        decided_s=now_s,
        expected_by_s=now_s + delay,
    )


def relocation(
    p: TierPolicy, ss: SliceState, cause: Regime, now_s: float, st: ControlState, *, by_bandwidth: float | None = None
) -> tuple[Action | None, str]:
    """For compute the most contended replica to the GPU with most headroom, for network one replica
    to the PoP with most headroom toward the client; (None, why not) when there is none."""
    s = p.settings
    if not ss.replicas:
        return None, "no replica to move"
    if by_bandwidth is None:
        ranked = sorted(ss.replicas, key=lambda r: r.gpu_share)
        replica = ranked[0]
        if replica.gpu_share >= s.contended_share:
            return None, "no contended replica"
        free = dict(ss.free_gpu)
    else:
        here = {r.pop for r in ss.replicas}
        better = {pop for pop, h in ss.pop_headroom_bps.items() if pop not in here and h >= by_bandwidth}
        if not better:
            return None, "no PoP with enough headroom toward the client"
        replica = ss.replicas[0]
        free = {slot: f for slot, f in ss.free_gpu.items() if slot.split("/")[0] in better}
    slots = destinations(replica, list(ss.replicas), p.parallelism, p.gpu_per_replica, free, ss.pair_rtt_s, ss.pop_rtt_s)
    if not slots:
        return None, f"no GPU slot with {p.gpu_per_replica:g} GPU free and guaranteed to no other tier where {p.parallelism.value} may run"
    return _move(p, replica, slots[0], cause, now_s, st), ""
