"""Guardrail invariants, property-tested: whatever the policy or a caller proposes, what the guard
allows keeps every tier within its ceiling and quota, never takes another tier's guaranteed GPU or
bandwidth, respects cooldowns and the rate limit, and never lets one id through twice."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from inferslice.actions import Action, ActionKind
from inferslice.control.actuators.base import TierObservation
from inferslice.control.guardrails import GuardState, apply_to, guard, guard_state_from_dict, new_replica_slots, reservations, violations
from inferslice.control.policy import decide
from inferslice.control.settings import EDGE_RATE_BPS, cooldown_key
from inferslice.control.state import ControlState
from inferslice.control.view import all_slots, cluster_view
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.placement import ReplicaPlacement
from inferslice.snapshot import SliceSnapshot

from .helpers import POLICIES, TOPOLOGY, observations, state_of

TIERS = [t.name for t in TOPOLOGY.tiers]
SLOTS = all_slots(TOPOLOGY)

replicas_st = st.fixed_dictionaries({t: st.integers(0, POLICIES[t].replicas_max) for t in TIERS})
valid_replicas_st = st.fixed_dictionaries({t: st.integers(POLICIES[t].replicas_min, POLICIES[t].replicas_max) for t in TIERS})
action_st = st.builds(
    Action,
    kind=st.sampled_from([ActionKind.SET_REPLICAS, ActionKind.SET_CAP, ActionKind.RELOCATE]),
    slice=st.sampled_from([*TIERS, "nope"]),
    value=st.one_of(st.integers(-2, 12), st.floats(1.0, 2 * EDGE_RATE_BPS), st.sampled_from(SLOTS)),
    id=st.text("abc123", min_size=0, max_size=3),
    replica=st.sampled_from(["premium-0", "standard-0", None]),
    regime=st.sampled_from(["queue_limited", "rollback", None]),
)


def _invariants(allowed: list[Action], replicas: dict[str, int]) -> None:
    cluster = cluster_view(observations(replicas), POLICIES)
    res = reservations(POLICIES)
    for a in allowed:
        p = POLICIES[a.slice]
        if a.kind is ActionKind.SET_REPLICAS:
            assert isinstance(a.value, (int, float))
            assert p.replicas_min <= a.value <= p.replicas_max
            assert a.value * p.gpu_per_replica <= p.gpu_quota + 1e-9
            assert a.value * p.cpu_per_replica <= p.cpu_quota + 1e-9
        elif a.kind is ActionKind.SET_CAP:
            assert isinstance(a.value, (int, float))
            others = sum(q.bandwidth_guaranteed_bps for q in POLICIES.values() if q.tier != a.slice)
            assert 0 < a.value <= min(p.bandwidth_budget_bps, EDGE_RATE_BPS - others) + 1e-6
        elif a.kind is ActionKind.RELOCATE:
            assert isinstance(a.value, str)
            use = cluster.slot_use.get(a.value, {})
            others_held = sum(max(r, use.get(t, 0.0)) for t, r in res.get(a.value, {}).items() if t != a.slice)
            others_held += sum(u for t, u in use.items() if t != a.slice and t not in res.get(a.value, {}))
            mine = use.get(a.slice, 0.0)
            assert others_held + mine + p.gpu_per_replica <= 1.0 + 1e-9


@settings(max_examples=300, deadline=None)
@given(replicas=valid_replicas_st, actions=st.lists(action_st, max_size=8), now=st.floats(0, 1e6))
def test_guard_allows_only_what_keeps_the_guarantees(replicas: dict[str, int], actions: list[Action], now: float) -> None:
    cluster = cluster_view(observations(replicas), POLICIES)
    assert violations(cluster, POLICIES) == []  # every state drawn here is a valid one
    allowed, refused, _ = guard(actions, cluster, POLICIES, GuardState(), now)
    assert len(allowed) + len(refused) == len(actions)
    _invariants(allowed, replicas)
    ids = [a.id for a in allowed]
    assert len(ids) == len(set(ids)) and all(ids)
    after = cluster
    for a in allowed:  # the batch as a whole, not each action against the state before it
        after = apply_to(after, a, POLICIES)
    assert violations(after, POLICIES) == []


snap_st = st.builds(
    SliceSnapshot,
    slice=st.just("x"),
    request_rate=st.one_of(st.none(), st.floats(0, 50)),
    requests_waiting=st.one_of(st.none(), st.floats(0, 200)),
    queue_time_p99_s=st.one_of(st.none(), st.floats(0, 30)),
    ttft_p99_s=st.one_of(st.none(), st.floats(0, 30)),
    link_rx_bps=st.one_of(st.none(), st.floats(0, 1e8)),
    output_tokens_per_s=st.one_of(st.none(), st.floats(1, 2000)),
    ref_output_tokens_per_s=st.one_of(st.none(), st.floats(1, 2000)),
    tpot_p50_s=st.one_of(st.none(), st.floats(0.001, 1)),
    ref_tpot_p50_s=st.one_of(st.none(), st.floats(0.001, 1)),
)
regime_st = st.sampled_from(list(Regime))


@settings(max_examples=200, deadline=None)
@given(
    replicas=replicas_st,
    tier=st.sampled_from(TIERS),
    steps=st.lists(st.tuples(snap_st, regime_st, st.lists(regime_st, max_size=2), st.floats(0.5, 0.99)), min_size=1, max_size=25),
    cap=st.one_of(st.none(), st.floats(1e5, 1e9)),
    share=st.floats(0.2, 1.0),
)
def test_policy_through_guard_over_time(replicas: dict[str, int], tier: str, steps: list, cap: float | None, share: float) -> None:
    """A random run of windows: the guarded actions keep every invariant, the rate limit and
    cooldowns hold, ids never repeat, and a tier whose only binding resource is the network never
    gets a replica more."""
    p = POLICIES[tier]
    cstate, gstate = ControlState(), GuardState()
    seen: set[str] = set()
    applied: dict[str, list[float]] = defaultdict(list)
    per_key: dict[str, float] = {}
    for i, (snap, regime, secondary, conf) in enumerate(steps):
        now = 2.0 * i
        snap = SliceSnapshot(**{**snap.__dict__, "slice": tier})
        d = Diagnosis(tier, regime, tuple(secondary), conf)
        ss = state_of(tier, replicas, snap, caps={tier: cap}, share=share)
        actions, cstate = decide(d, ss, p, now, cstate)
        binding = {r for r in (regime, *secondary) if r in (Regime.QUEUE_LIMITED, Regime.NETWORK_LIMITED, Regime.COMPUTE_LIMITED)}
        if binding == {Regime.NETWORK_LIMITED} and conf >= p.settings.min_confidence:
            assert not [
                a
                for a in actions
                if a.kind is ActionKind.SET_REPLICAS and a.regime != "rollback" and isinstance(a.value, int) and a.value > replicas[tier]
            ]
        cluster = cluster_view(observations(replicas, {tier: cap}, share), POLICIES)
        allowed, _, gstate = guard(actions, cluster, POLICIES, guard_state_from_dict(gstate.to_dict()), now)
        _invariants(allowed, replicas)
        earlier = dict(per_key)  # cooldowns are between batches: the moves of one decision share one
        for a in allowed:
            assert a.id not in seen
            seen.add(a.id)
            applied[a.slice].append(now)
            recent = [t for t in applied[a.slice] if now - t < p.settings.rate_window_s]
            assert len(recent) <= p.settings.max_actions_per_tier
            up = a.kind is not ActionKind.SET_REPLICAS or (isinstance(a.value, (int, float)) and a.value > replicas[tier])
            key = cooldown_key(a.kind, up)
            if key in earlier and a.regime != "rollback":
                assert now - earlier[key] >= p.settings.cooldown_s[key]
            per_key[key] = now
            if a.kind is ActionKind.SET_REPLICAS and isinstance(a.value, int):
                replicas = {**replicas, tier: a.value}
            if a.kind is ActionKind.SET_CAP and isinstance(a.value, (int, float)):
                cap = float(a.value)


def test_a_repeated_id_is_refused() -> None:
    a = Action(ActionKind.SET_REPLICAS, "premium", 3, id="premium-1-set_replicas")
    cluster = cluster_view(observations({"premium": 2}), POLICIES)
    allowed, _, g = guard([a], cluster, POLICIES, GuardState(), 0.0)
    assert allowed == [a]
    allowed, refused, _ = guard([a], cluster, POLICIES, g, 100.0)
    assert allowed == [] and refused[0].rule == "duplicate_id"


def test_relocation_onto_another_tiers_guarantee_is_refused() -> None:
    # london/gpu0 is Premium's (slots 2-3); Standard may not take it even while Premium runs 2 replicas.
    a = Action(ActionKind.RELOCATE, "standard", "london/gpu0", id="s-1-relocate", replica="standard-0")
    cluster = cluster_view(observations({"premium": 2, "standard": 1, "free": 1}), POLICIES)
    allowed, refused, _ = guard([a], cluster, POLICIES, GuardState(), 0.0)
    assert allowed == [] and refused[0].rule == "guarantee"
    b = Action(ActionKind.RELOCATE, "standard", "dublin/gpu1", id="s-2-relocate", replica="standard-0")
    allowed, _, _ = guard([b], cluster, POLICIES, GuardState(), 0.0)
    assert allowed == [b]


def _obs(tier: str, *slots: str, share: float = 1.0) -> TierObservation:
    reps = []
    for k, slot in enumerate(slots):
        pop, _, gpu = slot.partition("/gpu")
        reps.append(ReplicaPlacement(f"{tier}-{k}", pop, int(gpu), "ready", share))
    return TierObservation(tier, len(slots), tuple(reps))


def test_two_moves_onto_one_half_used_gpu_in_one_batch_are_not_both_allowed() -> None:
    # Standard's replica was moved to dublin/gpu1 (half of it in use, reserved by nobody); two Premium
    # moves there in one tick: judged against the state before the batch, both fitted (1.5 GPU on one GPU).
    obs = {
        "free": _obs("free", "bristol/gpu0"),
        "standard": _obs("standard", "dublin/gpu1"),
        "premium": _obs("premium", "bristol/gpu1", "bristol/gpu1", share=0.35),
    }
    cluster = cluster_view(obs, POLICIES)
    moves = [Action(ActionKind.RELOCATE, "premium", "dublin/gpu1", id=f"p-1-{k}-relocate", replica=f"premium-{k}") for k in (0, 1)]
    allowed, refused, _ = guard(moves, cluster, POLICIES, GuardState(), 100.0)
    assert allowed == moves[:1] and [r.rule for r in refused] == ["guarantee"]
    assert violations(apply_to(cluster, allowed[0], POLICIES), POLICIES) == []
    assert violations(apply_to(apply_to(cluster, moves[0], POLICIES), moves[1], POLICIES), POLICIES) != []  # what was let through before


def test_the_moves_of_one_decision_share_one_cooldown() -> None:
    obs = {"free": _obs("free", "bristol/gpu0"), "premium": _obs("premium", "bristol/gpu1", "bristol/gpu1", share=0.35)}
    cluster = cluster_view(obs, POLICIES)
    moves = [Action(ActionKind.RELOCATE, "premium", "dublin/gpu1", id=f"p-1-{k}-relocate", replica=f"premium-{k}") for k in (0, 1)]
    allowed, _, g = guard(moves, cluster, POLICIES, GuardState(), 100.0)
    assert allowed == moves  # 0.5 + 0.5 on the free GPU: both, in one batch
    again = Action(ActionKind.RELOCATE, "premium", "dublin/gpu1", id="p-2-relocate", replica="premium-0")
    allowed, refused, _ = guard([again], cluster, POLICIES, g, 110.0)
    assert allowed == [] and refused[0].rule == "cooldown"  # the next decision waits the relocation cooldown


def test_caps_raised_together_stay_within_the_edge() -> None:
    # Each tier's budget is its guarantee plus half the edge: two tiers at their budgets hold more
    # than the edge (the issue: all three at their budgets, 20 Gbit/s on a 10 Gbit/s edge).
    cluster = cluster_view(observations({"free": 1, "standard": 1, "premium": 1}), POLICIES)
    raises = [
        Action(ActionKind.SET_CAP, "standard", POLICIES["standard"].bandwidth_budget_bps, id="s-1-set_cap"),
        Action(ActionKind.SET_CAP, "premium", POLICIES["premium"].bandwidth_budget_bps, id="p-1-set_cap"),
    ]
    for a in raises:  # each alone is within its budget and the edge
        assert guard([a], cluster, POLICIES, GuardState(), 0.0)[0] == [a]
    allowed, refused, _ = guard(raises, cluster, POLICIES, GuardState(), 0.0)
    assert allowed == raises[:1] and refused[0].rule == "guarantee"
    after = apply_to(cluster, raises[0], POLICIES)
    assert violations(after, POLICIES) == [] and violations(apply_to(after, raises[1], POLICIES), POLICIES) != []


def test_a_scale_out_starts_where_its_moved_replica_left_room() -> None:
    # Standard's placement is bristol/gpu0, london/gpu1, london/gpu1; its one replica was moved to
    # london/gpu1. Scaling to 3 fills the entries it leaves unfilled (bristol/gpu0, then london/gpu1),
    # not placement[1:3] (london/gpu1 twice: 1.5 GPU there).
    obs = {"free": _obs("free", "bristol/gpu0"), "standard": _obs("standard", "london/gpu1")}
    cluster = cluster_view(obs, POLICIES)
    assert new_replica_slots(cluster, POLICIES["standard"], 3) == ["bristol/gpu0", "london/gpu1"]
    a = Action(ActionKind.SET_REPLICAS, "standard", 3, id="s-1-set_replicas")
    assert guard([a], cluster, POLICIES, GuardState(), 0.0)[0] == [a]
    assert violations(apply_to(cluster, a, POLICIES), POLICIES) == []
    # With Premium's replica moved onto london/gpu1 too (it was free there), Standard's third does not fit.
    crowded = {**obs, "premium": _obs("premium", "london/gpu1")}
    allowed, refused, _ = guard([a], cluster_view(crowded, POLICIES), POLICIES, GuardState(), 0.0)
    assert allowed == [] and refused[0].rule == "slot"
