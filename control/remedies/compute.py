"""Compute-limited: move the contended replicas to GPUs with headroom (make-before-break, one batch),
else scale out by the lost share within the quota (pure)."""

from __future__ import annotations

import math

from inferslice.actions import ActionKind
from inferslice.control.remedies.base import C, Proposal, ReplicaWish, Step, cold_start_s, held_event
from inferslice.control.remedies.relocate import contended_moves
from inferslice.control.trust import held


def compute_remedy(step: Step, decided: frozenset[ActionKind]) -> Proposal:
    out = Proposal()
    p, ss, st, s = step.p, step.ss, step.st, step.p.settings
    moves = []
    wait = held(C, st, step.confidence, s, step.now_s, compound=step.compound, ss=ss)
    in_flight = [c.replica for c in st.checks if c.kind is ActionKind.RELOCATE and c.cause == C.value]
    if wait is None and in_flight:
        # The moves under way answer this verdict (it still sees the replicas they replace): no scale-out beside them.
        wait = f"compute_limited while {', '.join(str(r) for r in in_flight)} move: their outcome check judges them"
    if wait is not None:
        out.holding = True
        event = held_event(step, C, wait)
        out.events += [event] if event is not None else []
    elif ss.relocatable and (C.value, ActionKind.RELOCATE.value) not in step.ineffective and ActionKind.RELOCATE not in decided:
        moves = contended_moves(p, ss, step.now_s, st)
    if moves:
        out.actions += moves
    elif wait is None and (C.value, ActionKind.SET_REPLICAS.value) not in step.ineffective:
        shares = [x.gpu_share for x in ss.replicas if x.state == "ready"] or [1.0]
        mean_share = max(0.1, sum(shares) / len(shares))
        n = min(max(step.target + 1, math.ceil(step.target / mean_share - 1e-9)), p.replicas_limit)
        if n > step.target:
            why = f"compute_limited: replicas at {mean_share:.2f} of their GPU share and no GPU to move to; scale out within quota"
            out.replicas = ReplicaWish(n, C.value, why, cold_start_s(st, p) + 2 * s.window_s)
        elif ss.replicas_ready >= step.target:
            out.at_ceiling = True
    return out
