"""A make-before-break move of one replica, where the placement rules allow it (pure)."""

from __future__ import annotations

from inferslice.actions import Action, ActionKind
from inferslice.control.placement import destinations
from inferslice.control.remedies.base import cold_start_s
from inferslice.control.settings import TierPolicy
from inferslice.control.state import ControlState, SliceState
from inferslice.diagnosis import Regime


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
    delay = cold_start_s(st, p) + 2 * s.window_s
    return (
        Action(
            ActionKind.RELOCATE,
            p.tier,
            slots[0],
            reason=f"{cause.value}: move {replica.id} from {replica.pop}/gpu{replica.gpu} (share {replica.gpu_share:.2f}) to {slots[0]},"
            " make-before-break",
            regime=cause.value,
            replica=replica.id,
            previous=f"{replica.pop}/gpu{replica.gpu}",
            decided_s=now_s,
            expected_by_s=now_s + delay,
        ),
        "",
    )
