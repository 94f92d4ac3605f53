"""``decide``: one tier's control step, from the attributed diagnosis to actions (pure; clock passed in).

    actions, state = decide(diagnosis, slice_state, tier_policy, now_s, state)

Like a Ray Serve ``AutoscalingPolicy`` function, it reads what is and returns what should be plus
the state to carry; it never performs I/O. Remedies follow the cause, in the attribution's order:

- queue-limited: replicas sized from the attributed queue delay and the measured per-replica
  service rate (capacity for the arrivals plus draining the backlog within ``queue_drain_s``), capped
  by the ceiling and the GPU/CPU quotas. At the ceiling it says so (an ``at_ceiling`` event naming
  the admission policy) and does not act outside the guarantee.
- network-limited: the client-edge cap to measured demand x headroom within the bandwidth budget
  (``control.demand``); a link pinned at its cap hides demand, so the cap steps by at least
  ``cap_probe_factor`` to converge in one step; with the budget spent, relocation toward a PoP with
  more headroom toward the client. Never replicas.
- compute-limited: move the most contended replica to a GPU with headroom (make-before-break), else
  scale out within the quota.
- replicas and moves only for verdicts that persisted and are not read behind a binding link
  (``control.trust``): an episode whose only binding resource is the network never gets replicas.
- no binding resource: pre-scale for the forecast arrival rate one cold start ahead (never when the
  only binding resource is the network), only from a *measured* per-replica service rate and only when
  the forecast's upper bound exceeds the measured capacity (replicas x rate x target utilisation): the
  configured prior alone pre-scaled a healthy Standard 1 -> 3 in the testbed's diurnal scenario.
- healthy for ``reclaim_after_healthy_s`` (so no queue or compute episode within it): reclaim one
  step, but never a replica while one runs below its nominal GPU share or within
  ``reclaim_share_hold_s`` after one did (``_share_hold``).

Every action gets a deterministic id (tier, decision number, kind) and an ``expected_by_s``; the
outcome check later compares. A futile action is recorded, rolled back where that is safe, and not
repeated for the same cause until the tier has been healthy for a reclaim period.
"""

from __future__ import annotations

import math
from dataclasses import replace

from inferslice.actions import Action, ActionKind
from inferslice.control.attribution import causes, queue_delay_s
from inferslice.control.demand import demand_bps, learn
from inferslice.control.forecast import Forecast, predict, update
from inferslice.control.placement import destinations
from inferslice.control.settings import TierPolicy
from inferslice.control.state import Check, ControlEvent, ControlState, SliceState
from inferslice.control.trust import cap_unseen, held, link_pinned, shadowed, streak, track
from inferslice.control.wan import relocate_off_path, slowed_pops, wan_bound
from inferslice.diagnosis import BINDING_REGIMES, Diagnosis, Regime
from inferslice.snapshot import SliceSnapshot

Q, N, C = Regime.QUEUE_LIMITED, Regime.NETWORK_LIMITED, Regime.COMPUTE_LIMITED
FORECAST, RECLAIM, ROLLBACK = "forecast", "reclaim", "rollback"
_SERVICE_RATE_SMOOTHING = 0.3  # EWMA weight of one saturated window's per-replica rate
_COLD_START_SMOOTHING = 0.5  # two measured cold starts dominate the configured prior


def _regimes(d: Diagnosis | None) -> set[Regime]:
    if d is None:
        return set()
    return {r for r in (d.regime, *d.secondary) if r in BINDING_REGIMES}


def _cold_start(st: ControlState, p: TierPolicy) -> float:
    return st.cold_start_s if st.cold_start_s is not None else p.cold_start_s


def _service_rate(st: ControlState, p: TierPolicy) -> float:
    # A stalled window (nothing served while a queue stands) measures ~0: never size from below a tenth of the prior.
    rate = st.service_rate_rps if st.service_rate_rps else p.service_rate_prior_rps
    return max(rate, 0.1 * p.service_rate_prior_rps)


def _arrivals(snap: SliceSnapshot | None, st: ControlState, now_s: float) -> float | None:
    """Arrival rate: requests served per second plus the growth of the queue (a queue hides demand)."""
    if snap is None or snap.request_rate is None:
        return None
    lam = snap.request_rate
    if snap.requests_waiting is not None and st.last_waiting is not None and st.last_window_s is not None and now_s > st.last_window_s:
        lam += max(0.0, (snap.requests_waiting - st.last_waiting) / (now_s - st.last_window_s))
    return lam


def _observe(st: ControlState, ss: SliceState, p: TierPolicy, now_s: float, events: list[ControlEvent]) -> ControlState:
    s = p.settings
    snap = ss.snapshot
    lam = _arrivals(snap, st, now_s)
    # Arrivals behind a binding link are throttled (a closed loop waits on it), and their recovery once
    # the cap is raised is no demand trend: the forecast learns nothing from those windows.
    behind_link = shadowed(st, s, now_s) or link_pinned(ss, s.link_pinned_ratio)
    if behind_link:
        # ... nor from a trend measured before the link bound: kept, it would pre-scale the moment the
        # shadow lifts (the demo's load step into the squeeze, 20 s stale, pre-scaled Standard so).
        fc_state = replace(st.forecast, trend_per_s=0.0)
    elif lam is not None:
        fc_state = update(st.forecast, lam, now_s, s.forecast_alpha, s.forecast_beta)
    else:
        fc_state = st.forecast
    rate = st.service_rate_rps
    ready = ss.replicas_ready
    # Behind a binding link the queue is the network's: what the replicas complete then is the link's rate, not
    # theirs, and learned it would make a healthy tier look short of capacity once the link clears (a pre-scale).
    if snap is not None and snap.request_rate and ready > 0 and (snap.requests_waiting or 0.0) > 0 and not behind_link:
        obs = snap.request_rate / ready  # saturated: every ready replica is busy, so this is its service rate
        rate = obs if rate is None else (1 - _SERVICE_RATE_SMOOTHING) * rate + _SERVICE_RATE_SMOOTHING * obs
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


def _judge(
    st: ControlState, d: Diagnosis | None, ss: SliceState, p: TierPolicy, now_s: float, events: list[ControlEvent]
) -> tuple[ControlState, list[Action]]:
    """Outcome checks: effective, futile (record, roll back where safe, never again for this cause).

    A cap raise is futile only if the link does not use it (it carries under 90 % of the new cap
    while the tier still reads network-limited): a link that binds again at the higher cap was
    raised too little, not in vain (demand hidden behind the old cap's queue shows up once it drains).

    A futile action followed by a later one of the same kind is not undone on its own: its
    ``previous`` passes to the later one, so undoing the chain returns to the value before it."""
    present = _regimes(d)
    checks = list(st.checks)
    keep: list[Check] = []
    futile = list(st.futile)
    rollbacks: list[Action] = []
    stale_after_s = 10 * _cold_start(st, p) + 60.0  # an action never applied (pending, dry-run) stops waiting
    for i, c in enumerate(checks):
        if not c.applied:
            if now_s <= c.expected_by_s + stale_after_s:
                keep.append(c)
            continue
        if now_s < c.expected_by_s + p.settings.outcome_grace_s or d is None or d.regime is Regime.UNKNOWN:
            keep.append(c)  # not due, or no verdict this window: judge on a later one
            continue
        if c.kind is ActionKind.SET_CAP and cap_unseen(d, ss, st, p.settings.window_s):
            keep.append(c)  # the window does not measure the cap in force yet
            continue
        later = next((k for k in range(i + 1, len(checks)) if checks[k].kind is c.kind and checks[k].applied), None)
        if c.cause == RECLAIM:
            failed = bool(present & {Q, C})
            note = f"reclaim {c.action_id} brought back {sorted(r.value for r in present)}"
            safe = failed and c.previous is not None
        else:
            cause = Q if c.cause == FORECAST else Regime(c.cause) if c.cause in Regime._value2member_map_ else None
            failed = cause is not None and cause in present
            if (
                failed
                and c.kind is ActionKind.RELOCATE
                and cause is N
                and slowed_pops(ss, p.settings) & {r.pop for r in ss.replicas if r.state == "ready"}
            ):
                why = f"moved to {c.value}; replicas still behind a slowed path"
                events.append(ControlEvent(now_s, p.tier, "insufficient", why, c.cause, c.action_id))
                continue
            if (
                failed
                and c.kind is ActionKind.SET_CAP
                and isinstance(c.value, (int, float))
                and _link_uses(ss, float(c.value), p.settings.link_used_ratio)
            ):
                events.append(
                    ControlEvent(now_s, p.tier, "insufficient", f"cap {c.value:g} bit/s binds again: raise further", c.cause, c.action_id)
                )
                continue
            note = f"{c.kind.value} -> {c.value} did not clear {cause.value if cause else c.cause}"
            safe = failed and _rollback_safe(c, present)
        if not failed:
            events.append(ControlEvent(now_s, p.tier, "effective", f"{c.kind.value} -> {c.value} answered {c.cause}", c.cause, c.action_id))
            continue
        events.append(ControlEvent(now_s, p.tier, "futile", note, c.cause, c.action_id))
        futile.append((c.cause, c.kind.value))
        if not safe:
            continue
        if later is not None:
            checks[later] = replace(checks[later], previous=c.previous)
        else:
            rollbacks.append(_rollback(p, c, now_s))
    return replace(st, checks=tuple(keep), futile=tuple(dict.fromkeys(futile))), rollbacks


def _link_uses(ss: SliceState, cap_bps: float, ratio: float) -> bool:
    snap = ss.snapshot
    rx = snap.link_rx_bps if snap is not None else None
    return rx is not None and rx >= ratio * cap_bps


def _rollback_safe(c: Check, present: set[Regime]) -> bool:
    """Undoing must not worsen what binds now: a futile cap raise returns bandwidth nobody used; a
    futile scale-out is undone only if the tier does not queue; a relocation is never undone (it
    would cost another cold start)."""
    if c.previous is None:
        return False
    if c.kind is ActionKind.SET_CAP:
        return True
    if c.kind is ActionKind.SET_REPLICAS:
        return Q not in present
    return False


def _rollback(p: TierPolicy, c: Check, now_s: float) -> Action:
    return Action(
        c.kind,
        p.tier,
        c.previous,
        reason=f"roll back {c.action_id}: it did not help its cause ({c.cause})",
        regime=ROLLBACK,
        id=f"{c.action_id}-rollback",
        previous=c.value,
        decided_s=now_s,
    )


def _size_for_queue(d: Diagnosis, ss: SliceState, p: TierPolicy, st: ControlState, lam: float | None, fc: Forecast | None) -> int:
    """Replicas that serve the arrivals and drain the attributed backlog within ``queue_drain_s``."""
    s = p.settings
    snap = ss.snapshot
    mu = _service_rate(st, p)
    arrivals = max(lam or 0.0, fc.upper if fc is not None else 0.0)
    backlog = max(snap.requests_waiting or 0.0 if snap else 0.0, arrivals * queue_delay_s(d, snap))
    need = (arrivals + backlog / s.queue_drain_s) / (mu * s.target_utilisation)
    n = math.ceil(min(need, 1e6) - 1e-9)
    if ss.replicas_ready >= ss.replicas_target:
        n = max(n, ss.replicas_target + 1)  # queueing with nothing starting: capacity is short, whatever the estimate
    return n


def _at_ceiling_event(p: TierPolicy, ss: SliceState, now_s: float, cause: Regime) -> ControlEvent:
    n = ss.replicas_target
    return ControlEvent(
        now_s,
        p.tier,
        "at_ceiling",
        f"{p.tier} is {cause.value} at its ceiling: {n}/{p.replicas_max} replicas, {n * p.gpu_per_replica:g} of {p.gpu_quota:g} GPU quota;"
        f" admission policy {p.admission_policy}; not acting outside the tier's guarantee",
        cause.value,
    )


def _relocate(
    p: TierPolicy, ss: SliceState, cause: Regime, now_s: float, st: ControlState, *, by_bandwidth: float | None = None
) -> tuple[Action | None, str]:
    """A make-before-break move of one replica; for compute the most contended one to the GPU with
    most headroom, for network one replica to the PoP with most headroom toward the client."""
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
    delay = _cold_start(st, p) + 2 * s.window_s
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


def decide(
    diagnosis: Diagnosis | None, slice_state: SliceState, policy: TierPolicy, now_s: float, state: ControlState
) -> tuple[list[Action], ControlState]:
    """One control step for one tier. See the module docstring for the rules."""
    p, ss, s = policy, slice_state, policy.settings
    events: list[ControlEvent] = []
    st = _observe(replace(state, tier=p.tier, events=()), ss, p, now_s, events)
    st, rollbacks = _judge(st, diagnosis, ss, p, now_s, events)
    lam = st.forecast.level if st.forecast.samples else None
    horizon = _cold_start(st, p)
    fc = predict(st.forecast, horizon, s.forecast_alpha, s.forecast_beta, s.forecast_z, s.forecast_min_samples) if s.forecasting else None
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
        st = replace(st, futile=(), at_ceiling=False)  # a new episode may try every remedy again

    futile = set(st.futile)
    actions: list[Action] = list(rollbacks)
    decided = {a.kind for a in actions}
    want_replicas: tuple[int, str, str, float] | None = None  # (n, cause, reason, expected delay)
    at_ceiling = False
    limit = p.replicas_limit
    target = ss.replicas_target
    cold = _cold_start(st, p)
    conf = diagnosis.confidence if diagnosis is not None else 0.0
    compound = any(b.regime is N for b in binding)
    holding = False  # a replica remedy waits this window: no forecast pre-scale in its place either

    for cause in binding:
        r = cause.regime
        if r is Q and diagnosis is not None and (Q.value, ActionKind.SET_REPLICAS.value) not in futile:
            n = min(_size_for_queue(diagnosis, ss, p, st, lam, fc), limit)
            wait = held(Q, st, conf, s, now_s, compound=compound)
            # Behind a binding link the queue is the network's backlog: neither replicas nor an at-ceiling claim.
            if wait is not None and (n > target or (shadowed(st, s, now_s) and not compound)):
                holding = _held_event(events, st, p, Q, wait, now_s)
            elif n > target:
                qd = queue_delay_s(diagnosis, ss.snapshot)
                why = (
                    f"queue_limited: {qd:.2f} s of P99 TTFT queueing at {lam or 0:.2f} req/s, {_service_rate(st, p):.2f} req/s per replica"
                )
                if want_replicas is None or n > want_replicas[0]:
                    want_replicas = (n, Q.value, why, cold + s.queue_drain_s)
            elif ss.replicas_ready >= target:
                at_ceiling = True
        elif r is N and wan_bound(ss, s):
            # The network that binds is a slowed WAN path, not the client edge: only a move off that path helps.
            if ss.relocatable and (N.value, ActionKind.RELOCATE.value) not in futile and ActionKind.RELOCATE not in decided:
                if streak(st, N) < s.persist_windows:
                    holding = _held_event(events, st, p, N, "a WAN path reads slowed in one window: a move waits for a second", now_s)
                else:
                    act, why_not = relocate_off_path(p, ss, now_s, _cold_start(st, p) + 2 * s.window_s)
                    if act is not None:
                        actions.append(act)
                        decided.add(ActionKind.RELOCATE)
                    elif dict(st.streaks).get(N.value, 0) == s.persist_windows:
                        events.append(ControlEvent(now_s, p.tier, "no_placement", f"WAN path slowed: {why_not}", N.value))
        elif r is N and ActionKind.SET_CAP not in decided and cap_unseen(diagnosis, ss, st, s.window_s):
            pass  # the verdict predates the cap in force: wait for a window measured at it
        elif r is N and ActionKind.SET_CAP not in decided:
            demand = demand_bps(ss, p, st, lam)
            cap = ss.cap_bps
            if (
                s.cap_raises
                and (N.value, ActionKind.SET_CAP.value) not in futile
                and demand is not None
                and cap is not None
                and cap < p.bandwidth_budget_bps
            ):
                # A pinned link, or an estimate no larger than the cap, hides the demand: probe.
                hidden = demand <= cap * 1.05 or link_pinned(ss, s.link_pinned_ratio)
                step = s.cap_probe_factor if hidden else s.cap_headroom
                new_cap = min(max(demand * s.cap_headroom, cap * step), p.bandwidth_budget_bps)
                actions.append(
                    Action(
                        ActionKind.SET_CAP,
                        p.tier,
                        round(new_cap),
                        reason=f"network_limited: demand ~{demand / 1e6:.2f} Mbit/s x {s.cap_headroom:g} headroom,"
                        f" cap {cap / 1e6:.2f} Mbit/s, budget {p.bandwidth_budget_bps / 1e6:g} Mbit/s",
                        regime=N.value,
                        previous=cap,
                        decided_s=now_s,
                        expected_by_s=now_s + 2 * s.window_s,
                    )
                )
                decided.add(ActionKind.SET_CAP)
                if new_cap < demand * s.cap_headroom:
                    events.append(
                        ControlEvent(now_s, p.tier, "budget_exhausted", f"cap raised to the budget {new_cap / 1e6:g} Mbit/s", N.value)
                    )
            elif ss.relocatable and (N.value, ActionKind.RELOCATE.value) not in futile and ActionKind.RELOCATE not in decided:
                need = (demand or 0.0) * s.cap_headroom
                act, why_not = _relocate(p, ss, N, now_s, st, by_bandwidth=need)
                if act is not None:
                    actions.append(act)
                    decided.add(ActionKind.RELOCATE)
                else:
                    events.append(ControlEvent(now_s, p.tier, "budget_exhausted", f"bandwidth budget spent and {why_not}", N.value))
        elif r is C:
            act = None
            wait = held(C, st, conf, s, now_s, compound=compound, ss=ss)
            if wait is not None:
                holding = _held_event(events, st, p, C, wait, now_s)
            elif ss.relocatable and (C.value, ActionKind.RELOCATE.value) not in futile and ActionKind.RELOCATE not in decided:
                act, _ = _relocate(p, ss, C, now_s, st)
            if act is not None:
                actions.append(act)
                decided.add(ActionKind.RELOCATE)
            elif wait is None and (C.value, ActionKind.SET_REPLICAS.value) not in futile:
                shares = [x.gpu_share for x in ss.replicas if x.state == "ready"] or [1.0]
                mean_share = max(0.1, sum(shares) / len(shares))
                n = min(max(target + 1, math.ceil(target / mean_share - 1e-9)), limit)
                if n > target:
                    why = f"compute_limited: replicas at {mean_share:.2f} of their GPU share and no GPU to move to; scale out within quota"
                    if want_replicas is None or n > want_replicas[0]:
                        want_replicas = (n, C.value, why, cold + 2 * s.window_s)
                elif ss.replicas_ready >= target:
                    at_ceiling = True

    network_only = bool(binding) and all(b.regime is N for b in binding)
    if (
        want_replicas is None
        and not network_only
        and not holding
        and not shadowed(st, s, now_s)  # arrivals recovering behind a raised cap are not a demand trend
        and fc is not None
        and (FORECAST, ActionKind.SET_REPLICAS.value) not in futile
    ):
        # Only a measured rate sizes a pre-scale: the prior is a guess, and a cold start spent on a guess
        # is spent on a healthy tier (the testbed's diurnal Standard, P99 0.09 s, went 1 -> 3 on the 1 req/s prior).
        mu = _service_rate(st, p) if st.service_rate_rps else None
        capacity = target * mu * s.target_utilisation if mu is not None else math.inf
        if mu is not None and fc.upper > capacity:
            n = min(math.ceil(min(fc.upper / (mu * s.target_utilisation), 1e6) - 1e-9), limit)
            n_mean = math.ceil(min(fc.mean / (mu * s.target_utilisation), 1e6) - 1e-9)
            # A trend, not one Poisson burst: the previous window's forecast mean had outgrown the replicas too
            # and the level is still rising. A burst moves Holt's level half-way and its trend with it, and the
            # mean stays high a window after (Premium at 2 req/s read 7 req/s once and pre-scaled 3 -> 6 on an
            # upper bound of 15 req/s); the level falls back in that window, a ramp's keeps rising.
            prev = state.forecast_mean
            again = prev is not None and math.ceil(min(prev / (mu * s.target_utilisation), 1e6) - 1e-9) > target
            now_level, prev_level = st.forecast.level, state.forecast.level
            again = again and now_level is not None and prev_level is not None and now_level > prev_level
            # Pre-scale for a trend, not for noise: the forecast mean itself must outgrow the replicas,
            # then size for the upper bound.
            if n > target and n_mean > target and again and lam is not None and fc.mean > lam:
                why = (
                    f"forecast: {fc.upper:.2f} req/s (upper bound) by t+{horizon:.0f} s, one cold start ahead, over the measured"
                    f" capacity {capacity:.2f} req/s ({target} x {mu:.2f} req/s per replica x {s.target_utilisation:.0%})"
                )
                want_replicas = (n, FORECAST, why, max(0.0, fc.at_s - now_s))

    if want_replicas is not None and ActionKind.SET_REPLICAS not in decided:
        n, cause_name, why, delay = want_replicas
        actions.append(
            Action(
                ActionKind.SET_REPLICAS,
                p.tier,
                n,
                reason=why,
                regime=cause_name,
                previous=target,
                decided_s=now_s,
                expected_by_s=now_s + delay,
            )
        )
        decided.add(ActionKind.SET_REPLICAS)
        st = replace(st, scale_out_since_s=now_s, scale_out_to=n)

    if at_ceiling and not st.at_ceiling:
        events.append(_at_ceiling_event(p, ss, now_s, next(b.regime for b in binding if b.regime in (Q, C))))
    st = replace(st, at_ceiling=at_ceiling or (st.at_ceiling and bool(binding)))

    if healthy_since is not None and now_s - healthy_since >= s.reclaim_after_healthy_s and not actions:
        actions.extend(_reclaim(p, ss, st, lam, fc, now_s, _share_hold(ss, st, p, now_s)))
        if actions:
            st = replace(st, healthy_since_s=now_s)  # one step per reclaim period: slower than scaling out

    return _finish(actions, st, events, p, now_s)


def _held_event(events: list[ControlEvent], st: ControlState, p: TierPolicy, r: Regime, why: str, now_s: float) -> bool:
    """Say once per episode (its first window) that a remedy waits, not every window it does."""
    if dict(st.streaks).get(r.value, 0) <= 1:
        events.append(ControlEvent(now_s, p.tier, "held", why, r.value))
    return True


def _share_hold(ss: SliceState, st: ControlState, p: TierPolicy, now_s: float) -> bool:
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


def _reclaim(
    p: TierPolicy, ss: SliceState, st: ControlState, lam: float | None, fc: Forecast | None, now_s: float, share_hold: bool
) -> list[Action]:
    """One reclaim step: a replica (unless ``share_hold``) and/or half a cap's excess."""
    s = p.settings
    out: list[Action] = []
    target = ss.replicas_target
    mu = _service_rate(st, p)
    demand = max(lam or 0.0, fc.upper if fc is not None else 0.0)
    if (
        not share_hold
        and (RECLAIM, ActionKind.SET_REPLICAS.value) not in st.futile
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
    if s.cap_raises and (RECLAIM, ActionKind.SET_CAP.value) not in st.futile and cap is not None and wanted_bps:
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


def _finish(
    actions: list[Action], st: ControlState, events: list[ControlEvent], p: TierPolicy, now_s: float
) -> tuple[list[Action], ControlState]:
    """Number the decision, give every action its id and its outcome check."""
    if not actions:
        return [], replace(st, events=tuple(events))
    seq = st.seq + 1
    out: list[Action] = []
    checks = list(st.checks)
    for a in actions:
        aid = a.id or f"{p.tier}-{seq}-{a.kind.value}"
        a = replace(a, id=aid)
        out.append(a)
        if a.regime != ROLLBACK:
            exp = a.expected_by_s if a.expected_by_s is not None else now_s
            checks.append(Check(aid, a.kind, str(a.regime), a.value, a.previous, exp, max(0.0, exp - now_s)))
    return out, replace(st, seq=seq, checks=tuple(checks), events=tuple(events))
