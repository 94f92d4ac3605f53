"""decide() on a network verdict whose binding resource is a slowed WAN path (control/wan.py).

The default topology: Standard's replicas sit at bristol/gpu0 (the gateway) and london/gpu1 x2;
dublin/gpu1 is reserved by no tier (the only free GPU). A slowed bristol-london path is cured by a
move to dublin, never by a cap raise or a scale-out."""

from __future__ import annotations

from dataclasses import replace

from inferslice.actions import ActionKind
from inferslice.control.policy import decide
from inferslice.control.state import ControlState, SliceState, mark_applied
from inferslice.diagnosis import Regime

from .helpers import POLICIES, diag, state_of

N, H = Regime.NETWORK_LIMITED, Regime.HEALTHY
P = POLICIES["standard"]


def _wan(ss: SliceState, excess: float = 0.5, paths: dict[str, float] | None = None) -> SliceState:
    from inferslice.snapshot import SliceSnapshot

    snap = SliceSnapshot(
        "standard", request_rate=1.6, link_rx_bps=0.6e6, requests_waiting=0.0, wan_rtt_s=0.009 + excess, wan_base_rtt_s=0.009
    )
    return replace(ss, snapshot=snap, path_excess_s=paths if paths is not None else {"bristol": 0.0, "london": excess, "dublin": 0.0})


def _two_windows(ss: SliceState) -> tuple[list, ControlState]:  # type: ignore[type-arg]
    _, st = decide(diag("standard", N), ss, P, 10.0, ControlState())
    return decide(diag("standard", N), ss, P, 12.0, st)


def test_a_slowed_path_moves_a_replica_behind_it_off_the_path_and_nothing_else() -> None:
    ss = _wan(state_of("standard", {"standard": 3, "premium": 6, "free": 1}, None))
    first, st = decide(diag("standard", N), ss, P, 10.0, ControlState())
    assert first == [] and [e.kind for e in st.events] == ["held"]  # one window: a move costs a cold start
    [a], st = decide(diag("standard", N), ss, P, 12.0, st)
    assert a.kind is ActionKind.RELOCATE and a.value == "dublin/gpu1" and a.previous == "london/gpu1"
    assert a.replica in ("standard-1", "standard-2") and a.regime == N.value


def test_an_uncapped_or_unpinned_edge_gets_no_cap_raise_and_a_capped_pinned_one_does() -> None:
    ss = _wan(state_of("standard", {"standard": 3}, None, caps={"standard": 2.0e6}))  # 0.6 of 2 Mbit/s: not pinned
    actions, _ = _two_windows(ss)
    assert {a.kind for a in actions} == {ActionKind.RELOCATE}
    pinned = replace(ss, snapshot=replace(ss.snapshot, link_rx_bps=1.9e6, link_cap_bps=2.0e6))  # type: ignore[arg-type]
    actions, _ = _two_windows(pinned)
    assert ActionKind.SET_CAP in {a.kind for a in actions}  # the edge binds too: it is the edge's remedy


def test_no_move_without_a_free_slot_off_the_path_and_it_says_why() -> None:
    ss = _wan(state_of("standard", {"standard": 3}, None))
    full = replace(ss, free_gpu={slot: f for slot, f in ss.free_gpu.items() if not slot.startswith("dublin")})
    actions, st = _two_windows(full)
    assert actions == []
    assert any(e.kind == "no_placement" and "off the slowed paths" in e.message for e in st.events)


def test_unlocated_slowness_moves_nothing() -> None:
    ss = _wan(state_of("standard", {"standard": 3}, None), paths={})  # the tier's field, but no per-PoP reading
    actions, st = _two_windows(ss)
    assert actions == [] and any("per-PoP" in e.message for e in st.events)


def test_a_move_that_leaves_replicas_behind_the_path_is_insufficient_not_ineffective() -> None:
    ss = _wan(state_of("standard", {"standard": 3}, None))
    [a], st = _two_windows(ss)
    st = mark_applied(st, a.id, 12.0)
    # Later: one london replica moved, one still there; the tier still reads network_limited.
    later = replace(ss, replicas=tuple(r for r in ss.replicas if r.id != a.replica))
    _, st = decide(diag("standard", N), later, P, 12.0 + 8.0 + 4.0 + 4.0 + 1.0, st)
    kinds = [e.kind for e in st.events]
    assert "insufficient" in kinds and "ineffective" not in kinds
    assert ("network_limited", "relocate") not in st.ineffective  # the second move may still come


def test_the_ablation_switches_turn_off_their_remedy_only() -> None:
    from inferslice.snapshot import SliceSnapshot

    squeezed = SliceSnapshot("standard", request_rate=2.0, link_rx_bps=0.48e6, link_cap_bps=0.5e6, output_tokens_per_s=220.0,
                             ref_output_tokens_per_s=370.0, requests_waiting=3.0)  # fmt: skip
    ss = state_of("standard", {"standard": 1}, squeezed, caps={"standard": 0.5e6})
    on, _ = decide(diag("standard", N), ss, P, 50.0, ControlState())
    assert [a.kind for a in on] == [ActionKind.SET_CAP]
    no_caps = replace(P, settings=replace(P.settings, cap_raises=False))
    off, _ = decide(diag("standard", N), ss, no_caps, 50.0, ControlState())
    assert off == []  # and never replicas for a network verdict either
    # Forecasting off: a ramp at a measured 1 req/s per replica that pre-scales (test_policy) no longer does.
    prem = POLICIES["premium"]
    for forecasting, expect in ((True, True), (False, False)):
        p = replace(prem, settings=replace(prem.settings, forecasting=forecasting))
        st, acted = ControlState(service_rate_rps=1.0), False
        for i in range(40):
            snap = SliceSnapshot("premium", request_rate=0.05 * (i + 1), requests_waiting=0.0)
            actions, st = decide(diag("premium", H), state_of("premium", {"premium": 1}, snap), p, 2.0 * i, st)
            acted = acted or any(a.regime == "forecast" for a in actions)
        assert acted is expect


def test_one_poisson_burst_is_no_trend_to_prescale_for() -> None:
    # Premium steady at 2 req/s on 3 replicas (measured 1.1 req/s each: capacity 2.64 at 80 %), one window
    # reading 7 req/s: Holt's level jumps half-way and the upper bound far above capacity, but the mean
    # is over capacity in that one window only: no pre-scale. A ramp still pre-scales (test_policy).
    from inferslice.snapshot import SliceSnapshot

    p = POLICIES["premium"]
    st = ControlState(service_rate_rps=1.1)
    prescaled = []
    for i in range(30):
        rate = 7.0 if i == 20 else 2.0
        snap = SliceSnapshot("premium", request_rate=rate, requests_waiting=0.0)
        actions, st = decide(diag("premium", H), state_of("premium", {"premium": 3}, snap), p, 2.0 * i, st)
        prescaled += [a for a in actions if a.regime == "forecast"]
    assert prescaled == []
