"""Queue-limited: replicas for the arrivals plus draining the attributed backlog (pure)."""

from __future__ import annotations

from inferslice.actions import ActionKind
from inferslice.control.attribution import queue_delay_s
from inferslice.control.rates import replicas_for, short_of_capacity
from inferslice.control.remedies.base import Proposal, Q, ReplicaWish, Step, cold_start_s, held_event, rate_per_replica
from inferslice.control.trust import held, shadowed


def queue_replicas(step: Step) -> int:
    """Replicas that serve the arrivals and drain the attributed backlog within ``queue_drain_s``,
    capped by the ceiling and the quotas."""
    s, snap, d = step.p.settings, step.ss.snapshot, step.diagnosis
    arrivals = max(step.arrivals_rps or 0.0, step.forecast.upper if step.forecast is not None else 0.0)
    waiting = snap.requests_waiting or 0.0 if snap else 0.0
    backlog = max(waiting, arrivals * queue_delay_s(d, snap)) if d is not None else waiting
    n = replicas_for(arrivals, backlog, s.queue_drain_s, rate_per_replica(step.st, step.p), s.target_utilisation)
    n = short_of_capacity(n, step.target, starting=step.ss.replicas_ready < step.target)
    return min(n, step.p.replicas_limit)


def queue_remedy(step: Step) -> Proposal:
    out = Proposal()
    if step.diagnosis is None or (Q.value, ActionKind.SET_REPLICAS.value) in step.ineffective:
        return out
    s = step.p.settings
    n = queue_replicas(step)
    wait = held(Q, step.st, step.confidence, s, step.now_s, compound=step.compound)
    # Behind a binding link the queue is the network's backlog: neither replicas nor an at-ceiling claim.
    if wait is not None and (n > step.target or (shadowed(step.st, s, step.now_s) and not step.compound)):
        out.holding = True
        event = held_event(step, Q, wait)
        out.events += [event] if event is not None else []
    elif n > step.target:
        qd = queue_delay_s(step.diagnosis, step.ss.snapshot)
        why = (
            f"queue_limited: {qd:.2f} s of P99 TTFT queueing at {step.arrivals_rps or 0:.2f} req/s,"
            f" {rate_per_replica(step.st, step.p):.2f} req/s per replica"
        )
        out.replicas = ReplicaWish(n, Q.value, why, cold_start_s(step.st, step.p) + s.queue_drain_s)
    elif step.ss.replicas_ready >= step.target:
        out.at_ceiling = True
    return out
