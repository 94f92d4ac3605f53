"""Guardrails: invariants every action must keep before anyone applies it (pure; clock passed in).

    allowed, refused, gstate = guard(actions, cluster, policies, gstate, now_s)

The batch is judged one action at a time against a working copy of the cluster: each allowed action
is applied to the copy (``apply_to``) before the next is judged, so two moves onto one half-used
GPU, or two tiers' cap raises that together overrun the edge, cannot both pass. After every batch
``violations(copy)`` is empty: no slot holds more than one GPU, no tier's reservation is taken by
another, the caps fit the edge, every tier within its bounds.

1. Idempotent ids: an action without an id, or with an id already decided, is refused (a re-decision
   after a crash yields the same ids, and they must not be applied twice).
2. Ceilings and quotas: replicas within [replicas_min, min(ceiling, GPU quota, CPU quota)]; a
   scale-out's new replicas (at the tier's next placement slots, where the front starts them) fit
   their slots.
3. Guarantees of the other tiers: a cap never exceeds the tier's budget nor the edge minus what the
   other tiers hold there (each its cap, or its guarantee where the cap is lower or unset); a
   relocation lands only on GPU that is free and reserved by no other tier (a tier's reservation is
   its placement slots up to its ceiling: its Run:ai quota).
4. Cooldowns per tier and kind (scale-out, scale-in, cap, relocation) between decisions — the moves
   of one decision share one cooldown — and at most ``max_actions_per_tier`` per ``rate_window_s``.
   Rollbacks skip the cooldown (undoing a futile action should not wait) but count toward the rate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from inferslice.actions import Action, ActionKind
from inferslice.control.settings import EDGE_RATE_BPS, TierPolicy, cooldown_key
from inferslice.topology import parse_slot

_SEEN_IDS_KEPT = 4096  # ids are "<tier>-<decision>-<kind>": older ones can no longer recur
_EPS = 1e-9


@dataclass(frozen=True)
class ClusterView:
    """The actuated state of every tier, as the guard needs it."""

    replicas: Mapping[str, int]  # tier -> replica target
    slot_use: Mapping[str, Mapping[str, float]]  # "pop/gpuN" -> tier -> GPU fraction its replicas use there
    caps_bps: Mapping[str, float | None] = field(default_factory=dict)
    edge_capacity_bps: float = EDGE_RATE_BPS


@dataclass(frozen=True)
class GuardState:
    history: tuple[tuple[str, str, float], ...] = ()  # (tier, cooldown key, decided_s) of allowed actions, recent first out
    seen_ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"history": [list(h) for h in self.history], "seen_ids": list(self.seen_ids)}


def guard_state_from_dict(data: Mapping[str, object]) -> GuardState:
    hist = data.get("history") or []
    ids = data.get("seen_ids") or []
    assert isinstance(hist, list) and isinstance(ids, list)
    return GuardState(tuple((str(t), str(k), float(s)) for t, k, s in hist), tuple(str(i) for i in ids))


@dataclass(frozen=True)
class Refusal:
    action: Action
    rule: str  # duplicate_id | unknown_tier | ceiling | quota | slot | guarantee | budget | cooldown | rate | invalid
    message: str

    def to_dict(self) -> dict[str, object]:
        return {"action": self.action.to_dict(), "rule": self.rule, "message": self.message}


def slot_total(view: ClusterView, slot: str) -> float:
    return sum(view.slot_use.get(slot, {}).values())


def edge_held_bps(caps: Mapping[str, float | None], policies: Mapping[str, TierPolicy], tier: str | None = None) -> float:
    """What the tiers (but ``tier``) hold of the edge: each its cap, or its guarantee where the cap is
    lower or unset (a guarantee stands whatever the cap: the tier may be raised back to it)."""
    held = 0.0
    for q in policies.values():
        if q.tier == tier:
            continue
        cap = caps.get(q.tier)
        held += max(cap if cap is not None else 0.0, q.bandwidth_guaranteed_bps)
    return held


def new_replica_slots(view: ClusterView, p: TierPolicy, n: int) -> list[str]:
    """The slots a scale-out to ``n`` starts its new replicas on: the tier's placement entries its
    live replicas leave unfilled, in order (after those of replicas already asked for and not yet
    seen). The testbed's front (``ReplicaSet.home``) and the model place them so; a replica moved onto
    one of its tier's own entries fills it."""
    live: dict[str, int] = {}
    for slot, per in view.slot_use.items():
        if per.get(p.tier):
            live[slot] = round(per[p.tier] / p.gpu_per_replica)
    unfilled: list[str] = []
    for entry in p.placement:
        if live.get(entry, 0) > 0:
            live[entry] -= 1
        else:
            unfilled.append(entry)
    current = view.replicas.get(p.tier, 0)
    seen = sum(round(per.get(p.tier, 0.0) / p.gpu_per_replica) for per in view.slot_use.values())
    pending = max(0, current - seen)  # asked for, not yet observed: they take the first unfilled entries
    return unfilled[pending : pending + max(0, n - current)]


def apply_to(view: ClusterView, a: Action, policies: Mapping[str, TierPolicy]) -> ClusterView:
    """The cluster once ``a`` is applied, as the guard must assume it while judging the rest of the
    batch: a scale-out's replicas on their slots (a scale-in frees nothing yet: its replicas drain),
    a move's successor on its destination beside the replica it replaces (make-before-break), a cap."""
    p = policies.get(a.slice)
    if p is None:
        return view
    if a.kind is ActionKind.SET_CAP and isinstance(a.value, (int, float)):
        return replace(view, caps_bps={**view.caps_bps, a.slice: float(a.value)})
    use = {slot: dict(per) for slot, per in view.slot_use.items()}
    if a.kind is ActionKind.SET_REPLICAS and isinstance(a.value, (int, float)):
        n = int(a.value)
        for slot in new_replica_slots(view, p, n):
            use.setdefault(slot, {})
            use[slot][a.slice] = use[slot].get(a.slice, 0.0) + p.gpu_per_replica
        return replace(view, replicas={**view.replicas, a.slice: n}, slot_use=use)
    if a.kind is ActionKind.RELOCATE and isinstance(a.value, str):
        use.setdefault(a.value, {})
        use[a.value][a.slice] = use[a.value].get(a.slice, 0.0) + p.gpu_per_replica
        return replace(view, slot_use=use)
    return view


def violations(view: ClusterView, policies: Mapping[str, TierPolicy]) -> list[str]:
    """What no batch may leave behind (empty after every ``guard``): a slot holding more than one GPU,
    a tier's reserved GPU taken by another, caps beyond the edge, a tier outside its bounds."""
    out: list[str] = []
    res = reservations(policies)
    for slot in sorted(set(view.slot_use) | set(res)):
        use = view.slot_use.get(slot, {})
        total = sum(use.values())
        if total > 1.0 + _EPS:
            out.append(f"slot {slot}: {total:g} GPU in use on one GPU")
            continue
        # Every tier must still be able to grow to its reservation there, all at once.
        held = total + sum(max(0.0, r - use.get(t, 0.0)) for t, r in res.get(slot, {}).items())
        if held > 1.0 + _EPS:
            out.append(f"slot {slot}: {total:g} GPU in use leaves less than the tiers' reservations ({held:g} GPU held)")
    held = edge_held_bps(view.caps_bps, policies)
    if held > view.edge_capacity_bps + _EPS:
        out.append(f"edge: caps and guarantees hold {held:g} bit/s of {view.edge_capacity_bps:g}")
    for tier, n in view.replicas.items():
        p = policies.get(tier)
        if p is not None and p.controlled and not p.replicas_min <= n <= p.replicas_limit:
            out.append(f"{tier}: {n} replicas outside [{p.replicas_min}, {p.replicas_limit}]")
    return out


def reservations(policies: Mapping[str, TierPolicy]) -> dict[str, dict[str, float]]:
    """slot -> tier -> GPU fraction reserved (guaranteed) there: placement slots up to the ceiling."""
    out: dict[str, dict[str, float]] = {}
    for p in policies.values():
        for slot in p.placement[: p.replicas_max]:
            out.setdefault(slot, {})
            out[slot][p.tier] = out[slot].get(p.tier, 0.0) + p.gpu_per_replica
    return out


def free_gpu_for(
    tier: str, slot_use: Mapping[str, Mapping[str, float]], policies: Mapping[str, TierPolicy], slots: Iterable[str]
) -> dict[str, float]:
    """GPU fraction ``tier`` may take at each slot (1 GPU per slot) without touching what is in use or
    what any other tier is guaranteed there."""
    res = reservations(policies)
    out: dict[str, float] = {}
    for slot in slots:
        use = slot_use.get(slot, {})
        used = sum(use.values())
        held_for_others = sum(max(0.0, r - use.get(t, 0.0)) for t, r in res.get(slot, {}).items() if t != tier)
        out[slot] = max(0.0, 1.0 - used - held_for_others)
    return out


def _check_one(a: Action, cluster: ClusterView, policies: Mapping[str, TierPolicy]) -> tuple[str, str] | None:
    p = policies.get(a.slice)
    if p is None:
        return "unknown_tier", f"no policy for tier {a.slice!r}"
    if not p.controlled:
        return "unknown_tier", f"tier {a.slice!r} is not under control"
    if a.kind is ActionKind.SET_REPLICAS:
        if isinstance(a.value, bool) or not isinstance(a.value, (int, float)) or a.value != int(a.value):
            return "invalid", f"replicas must be an integer, got {a.value!r}"
        n = int(a.value)
        if n > p.replicas_max:
            return "ceiling", f"{n} replicas exceed the ceiling {p.replicas_max}"
        if n > p.replicas_limit:
            return "quota", f"{n} x {p.gpu_per_replica:g} GPU exceeds the quota {p.gpu_quota:g} GPU / {p.cpu_quota:g} CPU"
        if n < p.replicas_min:
            return "ceiling", f"{n} replicas are below the floor {p.replicas_min}"
        placed = cluster
        slots = new_replica_slots(cluster, p, n)
        if len(slots) < n - cluster.replicas.get(p.tier, 0):  # a move in flight holds two entries for one replica
            return "slot", f"{n} replicas: only {len(slots)} placement entries are unfilled now"
        for slot in slots:
            free = free_gpu_for(p.tier, placed.slot_use, policies, [slot])[slot]
            if free + _EPS < p.gpu_per_replica:
                return "slot", f"a new replica on {slot} needs {p.gpu_per_replica:g} GPU, {free:g} is free there"
            placed = apply_to(placed, Action(ActionKind.RELOCATE, p.tier, slot), policies)  # the next one sees this one
        return None
    if a.kind is ActionKind.SET_CAP:
        if isinstance(a.value, bool) or not isinstance(a.value, (int, float)) or not a.value > 0:
            return "invalid", f"a cap is a positive bit rate, got {a.value!r}"
        if a.value > p.bandwidth_budget_bps + _EPS:
            return "budget", f"cap {a.value:g} bit/s exceeds the tier's budget {p.bandwidth_budget_bps:g}"
        others = edge_held_bps(cluster.caps_bps, policies, p.tier)
        if a.value > cluster.edge_capacity_bps - others + _EPS:
            return "guarantee", f"cap {a.value:g} bit/s: the other tiers hold {others:g} of the edge's {cluster.edge_capacity_bps:g} bit/s"
        return None
    if a.kind is ActionKind.RELOCATE:
        if not isinstance(a.value, str) or a.replica is None:
            return "invalid", "a relocation names a replica and a destination slot 'pop/gpuN'"
        try:
            parse_slot(a.value)
        except ValueError as err:
            return "invalid", str(err)
        free = free_gpu_for(p.tier, cluster.slot_use, policies, [a.value])[a.value]
        if free + _EPS < p.gpu_per_replica:
            return "guarantee", f"{a.value} has {free:g} GPU free outside other tiers' guarantees, {p.gpu_per_replica:g} needed"
        return None
    if a.kind is ActionKind.NOOP:
        return None
    return "invalid", f"{a.kind.value} is not a control action"


def guard(
    actions: Iterable[Action], cluster: ClusterView, policies: Mapping[str, TierPolicy], gstate: GuardState, now_s: float
) -> tuple[list[Action], list[Refusal], GuardState]:
    allowed: list[Action] = []
    refused: list[Refusal] = []
    working = cluster  # each allowed action is applied to it before the next is judged
    seen = set(gstate.seen_ids)
    window = max((p.settings.rate_window_s for p in policies.values()), default=60.0)
    history = [h for h in gstate.history if now_s - h[2] < window]
    before = len(history)  # earlier batches' entries (a re-decision after a crash at the same instant sees its own)
    new_ids: list[str] = []
    for a in actions:
        if not a.id or a.id in seen:
            refused.append(Refusal(a, "duplicate_id", f"action id {a.id!r} already decided" if a.id else "action without an id"))
            continue
        seen.add(a.id)
        new_ids.append(a.id)
        problem = _check_one(a, working, policies)
        p = policies.get(a.slice)
        if problem is None and p is not None and a.kind is not ActionKind.NOOP:
            up = (
                a.kind is not ActionKind.SET_REPLICAS or not isinstance(a.value, (int, float)) or a.value > cluster.replicas.get(a.slice, 0)
            )
            key = cooldown_key(a.kind, up)
            cool = p.settings.cooldown_s.get(key, 0.0)
            # Between batches: the moves of one decision share one cooldown (entries this batch added do not count).
            last = max((t for tier, k, t in history[:before] if tier == a.slice and k == key), default=None)
            recent = sum(1 for tier, _, t in history if tier == a.slice and now_s - t < p.settings.rate_window_s)
            if a.regime != "rollback" and last is not None and now_s - last < cool:
                problem = ("cooldown", f"{key} cooldown {cool:g} s: last {now_s - last:.1f} s ago")
            elif recent >= p.settings.max_actions_per_tier:
                problem = ("rate", f"{recent} actions in {p.settings.rate_window_s:g} s (max {p.settings.max_actions_per_tier})")
            else:
                history.append((a.slice, key, now_s))
        if problem is not None:
            refused.append(Refusal(a, problem[0], problem[1]))
        else:
            allowed.append(a)
            working = apply_to(working, a, policies)
    ids = (*gstate.seen_ids, *new_ids)[-_SEEN_IDS_KEPT:]
    return allowed, refused, GuardState(tuple(history), ids)
