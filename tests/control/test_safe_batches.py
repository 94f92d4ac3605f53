"""The whole controller over many ticks never exceeds a guarantee, a GPU slot or the edge.

Hypothesis draws a cluster (each tier's replicas at its placement, caps, co-tenants on slots) and a
run of ticks, each with a random verdict per tier (any regime, secondaries, confidence) and random
measurements. Every tick: ``decide`` for each tier, one ``guard`` over the whole batch, and the
allowed actions applied to a small world the way the testbed applies them (a scale-out's replicas on
the placement entries its live replicas leave unfilled, a scale-in retires the last; a move starts
its successor at the destination and retires the old replica on the next tick: make-before-break;
caps at once). After every batch the world is checked with invariants written here, independently
of the guardrails' own: at most one GPU in use per slot (successor and old replica both counted),
every tier still able to reach its reservation on every slot, the caps (or guarantees, where higher)
within the edge, every tier within its bounds. And what the single-tier property of
test_guardrails.py checked before (one tier's windows through the guard, folded in here: the same
windows, three tiers at once): a tier whose only binding resource is the network never gets a
replica more, not even from the forecast; ids never repeat; the rate limit and the cooldowns (between
batches) hold; the states survive their JSON round trip each tick, as the audit log stores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import event, given, settings
from hypothesis import strategies as st

from inferslice.actions import Action, ActionKind
from inferslice.control.actuators.base import TierObservation
from inferslice.control.guardrails import GuardState, guard, guard_state_from_dict
from inferslice.control.policy import decide
from inferslice.control.settings import EDGE_RATE_BPS, cooldown_key
from inferslice.control.state import ControlState, control_state_from_dict, drop_check, mark_applied
from inferslice.control.view import cluster_view, slice_state
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.placement import ReplicaPlacement
from inferslice.snapshot import SliceSnapshot

from .helpers import POLICIES, TOPOLOGY

TIERS = [t.name for t in TOPOLOGY.tiers]
SLOTS = [f"{p.name}/gpu{g}" for p in TOPOLOGY.pops for g in range(p.gpus)]


@dataclass
class Rep:
    id: str
    slot: str
    state: str = "ready"  # starting (a move's successor) | ready
    replaces: str | None = None  # a successor: the replica it retires once it serves


@dataclass
class World:
    reps: dict[str, list[Rep]]
    caps: dict[str, float | None]
    target: dict[str, int]
    share: dict[str, float]  # slot -> effective GPU share there (a co-tenant below 1)
    made: int = 0
    history: list[str] = field(default_factory=list)

    def observe(self) -> dict[str, TierObservation]:
        return {
            t: TierObservation(
                t,
                self.target[t],
                tuple(ReplicaPlacement(r.id, *_pop_gpu(r.slot), state=r.state, gpu_share=self.share.get(r.slot, 1.0)) for r in reps),
                self.caps[t],
            )
            for t, reps in self.reps.items()
        }

    def settle_moves(self) -> None:
        """A tick later every successor serves and the replica it replaces is gone."""
        for t, reps in self.reps.items():
            gone = {r.replaces for r in reps if r.replaces}
            self.reps[t] = [Rep(r.id, r.slot) for r in reps if r.id not in gone]

    def apply(self, a: Action) -> None:
        p = POLICIES[a.slice]
        reps = self.reps[a.slice]
        if a.kind is ActionKind.SET_CAP:
            self.caps[a.slice] = float(a.value)  # type: ignore[arg-type]
        elif a.kind is ActionKind.SET_REPLICAS:
            n = int(a.value)  # type: ignore[arg-type]
            while len([r for r in reps if not r.replaces]) > n:
                reps.remove([r for r in reps if not r.replaces][-1])
            while len([r for r in reps if not r.replaces]) < n:
                filled = [r.slot for r in reps]
                free_entries = []
                for entry in p.placement:  # the placement entries the live replicas leave unfilled, in order
                    if entry in filled:
                        filled.remove(entry)
                    else:
                        free_entries.append(entry)
                self.made += 1
                k = len(
                    [r for r in reps if not r.replaces]
                )  # the new slot index; with no entry unfilled the front falls back to placement[k]
                reps.append(Rep(f"{a.slice}-n{self.made}", free_entries[0] if free_entries else p.placement[k]))
            self.target[a.slice] = n
        elif a.kind is ActionKind.RELOCATE:
            old = next(r for r in reps if r.id == a.replica)
            self.made += 1
            reps.append(Rep(f"{a.slice}-m{self.made}", str(a.value), "starting", old.id))
        self.history.append(f"{a.slice} {a.kind.value} {a.value}")


def _pop_gpu(slot: str) -> tuple[str, int]:
    pop, _, gpu = slot.partition("/gpu")
    return pop, int(gpu)


def _broken(w: World) -> list[str]:
    """The invariants, computed from the world alone."""
    out = []
    use: dict[str, dict[str, float]] = {s: {} for s in SLOTS}
    for t, reps in w.reps.items():
        for r in reps:
            use[r.slot][t] = use[r.slot].get(t, 0.0) + POLICIES[t].gpu_per_replica
    reserved: dict[str, dict[str, float]] = {s: {} for s in SLOTS}
    for t in TIERS:
        for entry in POLICIES[t].placement[: POLICIES[t].replicas_max]:
            reserved[entry][t] = reserved[entry].get(t, 0.0) + POLICIES[t].gpu_per_replica
    for s in SLOTS:
        total = sum(use[s].values())
        if total > 1.0 + 1e-9:
            out.append(f"{s} holds {total} GPU")
        owed = sum(max(0.0, r - use[s].get(t, 0.0)) for t, r in reserved[s].items())
        if total + owed > 1.0 + 1e-9:
            out.append(f"{s}: {total} GPU in use leaves {1 - total} for {owed} still reserved")
    held = sum(max(w.caps[t] or 0.0, POLICIES[t].bandwidth_guaranteed_bps) for t in TIERS)
    if held > EDGE_RATE_BPS + 1e-3:
        out.append(f"edge holds {held} bit/s")
    for t in TIERS:
        p = POLICIES[t]
        n = len([r for r in w.reps[t] if not r.replaces])
        if not p.replicas_min <= n <= p.replicas_limit:
            out.append(f"{t}: {n} replicas")
    return out


regime = st.sampled_from([Regime.QUEUE_LIMITED, Regime.NETWORK_LIMITED, Regime.COMPUTE_LIMITED, Regime.HEALTHY, Regime.UNKNOWN])
verdict = st.tuples(regime, st.lists(regime, max_size=2), st.floats(0.3, 0.99))


def _maybe(s: st.SearchStrategy[float]) -> st.SearchStrategy[float | None]:
    return st.one_of(st.none(), s)  # a source may lack any field: the controller must say what it lacked, not guess


measure = st.fixed_dictionaries(
    {
        "request_rate": _maybe(st.floats(0.0, 20.0)),
        "requests_waiting": _maybe(st.floats(0.0, 80.0)),
        "queue_time_p99_s": _maybe(st.floats(0.0, 10.0)),
        "ttft_p99_s": _maybe(st.floats(0.05, 10.0)),
        "link_ratio": _maybe(st.floats(0.0, 1.2)),  # what the link carries, as a fraction of its cap (HTB overshoots a little)
        "output_tokens_per_s": _maybe(st.floats(1.0, 2000.0)),
        "tpot_p50_s": _maybe(st.floats(0.01, 0.5)),
    }
)
tick = st.fixed_dictionaries({t: st.tuples(verdict, measure) for t in TIERS})
start = st.fixed_dictionaries(
    {
        "replicas": st.fixed_dictionaries({t: st.integers(POLICIES[t].replicas_min, POLICIES[t].replicas_limit) for t in TIERS}),
        "caps": st.fixed_dictionaries({t: st.one_of(st.none(), st.floats(1e5, POLICIES[t].bandwidth_guaranteed_bps)) for t in TIERS}),
        "co_tenants": st.lists(st.sampled_from(SLOTS), min_size=1, max_size=3),
    }
)


def _snapshot(tier: str, m: dict[str, float | None], cap: float | None) -> SliceSnapshot:
    link = m["link_ratio"] * (cap if cap is not None else 1e7) if m["link_ratio"] is not None else None
    return SliceSnapshot(
        tier,
        request_rate=m["request_rate"],
        requests_waiting=m["requests_waiting"],
        queue_time_p99_s=m["queue_time_p99_s"],
        ttft_p99_s=m["ttft_p99_s"],
        link_rx_bps=link,
        link_cap_bps=cap,
        output_tokens_per_s=m["output_tokens_per_s"],
        tpot_p50_s=m["tpot_p50_s"],
        ref_tpot_p50_s=0.025,
        ref_output_tokens_per_s=400.0,
        window_s=2.0,
    )


@settings(max_examples=40, deadline=None)
@given(first=start, episodes=st.lists(st.tuples(tick, st.integers(1, 4)), min_size=8, max_size=15))
def test_no_tick_of_the_whole_controller_exceeds_a_guarantee_a_slot_or_the_edge(first: dict, episodes: list[tuple[dict, int]]) -> None:
    # Verdicts come in runs of 1-4 windows (a regime persists: the trust rules act only on a second window).
    ticks = [verdicts for verdicts, n in episodes for _ in range(n)]
    reps = {t: [Rep(f"{t}-{k}", POLICIES[t].placement[k]) for k in range(n)] for t, n in first["replicas"].items()}
    w = World(reps, dict(first["caps"]), dict(first["replicas"]), {s: 0.35 for s in first["co_tenants"]})
    assert _broken(w) == []
    states = {t: ControlState() for t in TIERS}
    gstate = GuardState()
    seen: set[str] = set()
    allowed_at: dict[str, list[float]] = {t: [] for t in TIERS}
    last_batch: dict[tuple[str, str], float] = {}
    for i, verdicts in enumerate(ticks):
        now = 1000.0 + 2.0 * i
        states = {t: control_state_from_dict(s.to_dict()) for t, s in states.items()}  # as the audit log stores them
        gstate = guard_state_from_dict(gstate.to_dict())
        w.settle_moves()
        observed = w.observe()
        cluster = cluster_view(observed, POLICIES)
        proposed: list[Action] = []
        for t in TIERS:
            (primary, secondary, conf), m = verdicts[t]
            d = Diagnosis(t, primary, tuple(secondary), conf, window_end_s=now)
            ss = slice_state(t, observed[t], _snapshot(t, m, w.caps[t]), cluster, POLICIES, TOPOLOGY)
            actions, states[t] = decide(d, ss, POLICIES[t], now, states[t])
            named = {r for r in (primary, *secondary) if r in (Regime.QUEUE_LIMITED, Regime.NETWORK_LIMITED, Regime.COMPUTE_LIMITED)}
            if named == {Regime.NETWORK_LIMITED} and conf >= POLICIES[t].settings.min_confidence:
                up = [a for a in actions if a.kind is ActionKind.SET_REPLICAS and a.regime != "rollback" and float(a.value) > w.target[t]]  # type: ignore[arg-type]
                assert not up, (t, up)  # never replicas while only the network binds, not even from the forecast
            proposed += actions
        allowed, refused, gstate = guard(proposed, cluster, POLICIES, gstate, now)
        for r in refused:
            states[r.action.slice] = drop_check(states[r.action.slice], r.action.id)
        batch: dict[tuple[str, str], float] = {}
        for a in allowed:
            event(f"applied {a.kind.value}")  # shown by --hypothesis-show-statistics: the run exercised every knob
            assert a.id and a.id not in seen
            seen.add(a.id)
            p = POLICIES[a.slice]
            allowed_at[a.slice].append(now)
            assert sum(1 for t in allowed_at[a.slice] if now - t < p.settings.rate_window_s) <= p.settings.max_actions_per_tier
            key = cooldown_key(a.kind, a.kind is not ActionKind.SET_REPLICAS or float(a.value) > w.target[a.slice])  # type: ignore[arg-type]
            if a.regime != "rollback" and (a.slice, key) in last_batch:
                assert now - last_batch[(a.slice, key)] >= p.settings.cooldown_s[key], (a, last_batch)
            batch[(a.slice, key)] = now
            w.apply(a)
            states[a.slice] = mark_applied(states[a.slice], a.id, now)
        last_batch.update(batch)
        assert _broken(w) == [], (i, w.history[-6:], allowed)
