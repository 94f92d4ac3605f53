"""``decide``: one tier's control step, from the attributed diagnosis to actions (pure; clock passed in).

    actions, state = decide(diagnosis, slice_state, tier_policy, now_s, state)

Like a Ray Serve ``AutoscalingPolicy`` function, it reads what is and returns what should be plus
the state to carry; it never performs I/O. Remedies follow the cause, in the attribution's order,
one small pure function each (``control.remedies``: queue, network, compute, prescale, reclaim);
``decide`` observes the window (``_observe``: the shared estimator ``control.rates``, the forecast),
judges earlier actions (``control.outcomes``), orders the causes and merges the remedies' proposals:

- queue-limited: replicas sized from the attributed queue delay and the measured per-replica
  service rate (capacity for the arrivals plus draining the backlog within ``queue_drain_s``), capped
  by the ceiling and the GPU/CPU quotas. At the ceiling it says so (an ``at_ceiling`` event naming
  the admission policy) and does not act outside the guarantee.
- network-limited: the client-edge cap to measured demand x headroom within the bandwidth budget
  (``control.demand``); a link pinned at its cap hides demand, so the cap steps by at least
  ``cap_probe_factor`` to converge in one step; with the budget spent, relocation toward a PoP with
  more headroom toward the client. Never replicas.
- compute-limited: move the contended replicas to GPUs with headroom (make-before-break, one batch
  the guardrails judge on a working copy), else scale out within the quota.
- replicas and moves only for verdicts that persisted and are not read behind a binding link
  (``control.trust``): an episode whose only binding resource is the network never gets replicas.
- no binding resource: pre-scale for the forecast arrival rate one cold start ahead (never when the
  only binding resource is the network), only from a *measured* per-replica service rate and only when
  the forecast's upper bound exceeds the measured capacity (replicas x rate x target utilisation): the
  configured prior alone pre-scaled a healthy Standard 1 -> 3 in the testbed's diurnal scenario.
- healthy for ``reclaim_after_healthy_s`` (so no queue or compute episode within it): reclaim one
  step, but never a replica while one runs below its nominal GPU share or within
  ``reclaim_share_hold_s`` after one did (``remedies.reclaim.share_hold``).

Every action gets a deterministic id (tier, decision number, kind) and an ``expected_by_s``; the
outcome check later compares (``control.outcomes``: effective, insufficient, ineffective, on windows
measured under the action only). An ineffective action is recorded, rolled back where that is safe,
and not repeated for the same cause until the tier has been healthy for a reclaim period.
"""

from __future__ import annotations

from dataclasses import replace

from inferslice.actions import Action, ActionKind
from inferslice.control.attribution import causes
from inferslice.control.demand import learn
from inferslice.control.forecast import predict, update
from inferslice.control.outcomes import judge
from inferslice.control.rates import arrival_rate, service_rate
from inferslice.control.remedies import (
    ROLLBACK,
    Proposal,
    ReplicaWish,
    Step,
    compute_remedy,
    network_remedy,
    prescale_remedy,
    queue_remedy,
    reclaim_remedy,
    share_hold,
)
from inferslice.control.remedies.base import C, N, Q, at_ceiling_event, cold_start_s
from inferslice.control.settings import TierPolicy
from inferslice.control.state import Check, ControlEvent, ControlState, SliceState
from inferslice.control.trust import link_pinned, network_only, shadowed, track
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.snapshot import SliceSnapshot

_SERVICE_RATE_SMOOTHING = 0.3  # EWMA weight of one saturated window's per-replica rate
_COLD_START_SMOOTHING = 0.5  # two measured cold starts dominate the configured prior


def _arrivals(snap: SliceSnapshot | None, st: ControlState, now_s: float) -> float | None:
    """Arrival rate: requests served per second plus the growth of the queue (a queue hides demand)."""
    if snap is None or snap.request_rate is None:
        return None
    dt = now_s - st.last_window_s if st.last_window_s is not None else None
    return arrival_rate(snap.request_rate, snap.requests_waiting, st.last_waiting, dt)


def _observe(st: ControlState, ss: SliceState, p: TierPolicy, now_s: float, events: list[ControlEvent]) -> ControlState:
    s = p.settings
    snap = ss.snapshot
    lam = _arrivals(snap, st, now_s)
    # Arrivals behind a binding link are throttled (a closed loop waits on it), and their recovery once
    # the cap is raised is no demand trend: the forecast learns nothing from those windows.
    behind_link = shadowed(st, s, now_s) or link_pinned(ss, s.link_pinned_ratio)
    # Likewise while a move of this tier awaits its outcome check: a closed loop's arrivals follow the
    # capacity the move restores, and that recovery is no demand trend (the demo's Premium, its replicas
    # moved off a co-tenant, pre-scaled 2 -> 6 on it).
    moving = any(c.kind is ActionKind.RELOCATE for c in st.checks)
    if behind_link:
        # ... nor from a trend measured before the link bound: kept, it would pre-scale the moment the
        # shadow lifts (the demo's load step into the squeeze, 20 s stale, pre-scaled Standard so).
        fc_state = replace(st.forecast, trend_per_s=0.0)
    elif moving:
        # The level follows the arrivals, the trend stays 0: frozen, the level's jump to the recovered
        # rate once the move is judged would read as a steep trend (the demo's Premium: 2 -> 5 -> 6).
        seen = update(st.forecast, lam, now_s, s.forecast_alpha, s.forecast_beta) if lam is not None else st.forecast
        fc_state = replace(seen, trend_per_s=0.0)
    elif lam is not None:
        fc_state = update(st.forecast, lam, now_s, s.forecast_alpha, s.forecast_beta)
    else:
        fc_state = st.forecast
    rate = st.service_rate_rps
    ready = ss.replicas_ready
    # Behind a binding link the queue is the network's: what the replicas complete then is the link's rate, not
    # theirs, and learned it would make a healthy tier look short of capacity once the link clears (a pre-scale).
    if snap is not None and snap.request_rate and ready > 0 and (snap.requests_waiting or 0.0) > 0 and not behind_link:
        rate = service_rate(rate, snap.request_rate, ready, _SERVICE_RATE_SMOOTHING)  # saturated: every ready replica is busy
    cold, since, to = st.cold_start_s, st.scale_out_since_s, st.scale_out_to
    if since is not None and to is not None and ready >= to:
        sample = max(0.0, now_s - since)
        cold = sample if cold is None else (1 - _COLD_START_SMOOTHING) * cold + _COLD_START_SMOOTHING * sample
        events.append(ControlEvent(now_s, p.tier, "measured", f"cold start {sample:.1f} s (estimate now {cold:.1f} s)"))
        since, to = None, None
    return replace(
        learn(st, ss, p),
        forecast=fc_state,
        service_rate_rps=rate,
        cold_start_s=cold,
        scale_out_since_s=since,
        scale_out_to=to,
        last_waiting=snap.requests_waiting if snap is not None else st.last_waiting,
        last_window_s=now_s,
    )


def decide(
    diagnosis: Diagnosis | None, slice_state: SliceState, policy: TierPolicy, now_s: float, state: ControlState
) -> tuple[list[Action], ControlState]:
    """One control step for one tier. See the module docstring for the rules."""
    p, ss, s = policy, slice_state, policy.settings
    events: list[ControlEvent] = []
    st = _observe(replace(state, tier=p.tier, events=()), ss, p, now_s, events)
    st, rollbacks = judge(st, diagnosis, ss, p, now_s, events)
    lam = st.forecast.level if st.forecast.samples else None
    fc = (
        predict(st.forecast, cold_start_s(st, p), s.forecast_alpha, s.forecast_beta, s.forecast_z, s.forecast_min_samples)
        if s.forecasting
        else None
    )
    if fc is not None:
        st = replace(st, forecast_for_s=fc.at_s, forecast_mean=fc.mean, forecast_upper=fc.upper)
    if not p.controlled:
        return [], replace(st, events=tuple(events))

    confident = diagnosis is not None and diagnosis.regime is not Regime.UNKNOWN and diagnosis.confidence >= s.min_confidence
    binding = causes(diagnosis) if confident and diagnosis is not None else []
    healthy = confident and not binding and diagnosis is not None and diagnosis.regime is Regime.HEALTHY
    healthy_since = (st.healthy_since_s if st.healthy_since_s is not None else now_s) if healthy else None
    st = replace(track(st, diagnosis, {b.regime for b in binding}, ss, s, now_s), healthy_since_s=healthy_since)
    if healthy_since is not None and now_s - healthy_since >= s.reclaim_after_healthy_s:
        st = replace(st, ineffective=(), insufficient=(), finished=(), at_ceiling=False)  # a new episode may try every remedy again

    step = Step(diagnosis, ss, p, st, now_s, lam, fc, any(b.regime is N for b in binding), frozenset(st.ineffective), state)
    actions: list[Action] = list(rollbacks)
    wish: ReplicaWish | None = None
    at_ceiling = holding = False
    # A rollback that scales in retires replicas the actuator chooses (the testbed the last, Ray Serve
    # its own pick): a move decided beside it could name one of them. It waits for the next window.
    shrinks = any(
        a.kind is ActionKind.SET_REPLICAS and isinstance(a.value, int | float) and a.value < ss.replicas_target for a in rollbacks
    )
    for cause in binding:  # the attribution's order: the remedy that must come first, first
        decided = frozenset(a.kind for a in actions) | ({ActionKind.RELOCATE} if shrinks else frozenset())
        r = cause.regime
        proposal = (
            queue_remedy(step)
            if r is Q
            else network_remedy(step, decided)
            if r is N
            else compute_remedy(step, decided)
            if r is C
            else Proposal()
        )
        actions += proposal.actions
        events += proposal.events
        at_ceiling = at_ceiling or proposal.at_ceiling
        holding = holding or proposal.holding
        if proposal.replicas is not None and (wish is None or proposal.replicas.n > wish.n):
            wish = proposal.replicas

    # A step that follows an insufficient one finishes it, once an episode: if the link fills that
    # one too, a met SLO holds again (a link that fills every cap would otherwise chain x1.3 steps
    # to the budget). Cleared when decided, not applied: a refused step is not proposed again.
    done = {(str(a.regime), a.kind.value) for a in actions} & set(st.insufficient)
    if done:
        left = tuple(f for f in st.insufficient if f not in done)
        st = replace(st, insufficient=left, finished=tuple(dict.fromkeys((*st.finished, *sorted(done)))))

    only_network = (bool(binding) and all(b.regime is N for b in binding)) or network_only(diagnosis, s)
    # Arrivals recovering behind a raised cap are not a demand trend: no pre-scale in the network's shadow.
    if wish is None and not only_network and not holding and not shadowed(st, s, now_s):
        wish = prescale_remedy(step).replicas

    if wish is not None and ActionKind.SET_REPLICAS not in {a.kind for a in actions}:
        actions.append(
            Action(
                ActionKind.SET_REPLICAS,
                p.tier,
                wish.n,
                reason=wish.reason,
                regime=wish.cause,
                previous=ss.replicas_target,
                decided_s=now_s,
                expected_by_s=now_s + wish.delay_s,
            )
        )
        st = replace(st, scale_out_since_s=now_s, scale_out_to=wish.n)

    if at_ceiling and not st.at_ceiling:
        events.append(at_ceiling_event(p, ss, now_s, next(b.regime for b in binding if b.regime in (Q, C))))
    st = replace(st, at_ceiling=at_ceiling or (st.at_ceiling and bool(binding)))

    if healthy_since is not None and now_s - healthy_since >= s.reclaim_after_healthy_s and not actions:
        actions.extend(reclaim_remedy(p, ss, st, lam, fc, now_s, share_hold(ss, st, p, now_s)))
        if actions:
            st = replace(st, healthy_since_s=now_s)  # one step per reclaim period: slower than scaling out

    return _finish(actions, st, events, p, now_s)


def _finish(
    actions: list[Action], st: ControlState, events: list[ControlEvent], p: TierPolicy, now_s: float
) -> tuple[list[Action], ControlState]:
    """Number the decision, give every action its id and its outcome check."""
    if not actions:
        return [], replace(st, events=tuple(events))
    seq = st.seq + 1
    out: list[Action] = []
    checks = list(st.checks)
    per_kind: dict[ActionKind, int] = {}
    for a in actions:
        n = per_kind[a.kind] = per_kind.get(a.kind, 0) + 1  # several moves in one decision: "<tier>-<seq>-2-relocate", ...
        aid = a.id or (f"{p.tier}-{seq}-{a.kind.value}" if n == 1 else f"{p.tier}-{seq}-{n}-{a.kind.value}")
        a = replace(a, id=aid)
        out.append(a)
        if a.regime != ROLLBACK:
            exp = a.expected_by_s if a.expected_by_s is not None else now_s
            checks.append(Check(aid, a.kind, str(a.regime), a.value, a.previous, exp, max(0.0, exp - now_s), replica=a.replica))
    return out, replace(st, seq=seq, checks=tuple(checks), events=tuple(events))
