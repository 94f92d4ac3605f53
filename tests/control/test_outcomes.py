"""Honest outcomes: an action is judged only on windows measured under it and before any later action
on the same tier and knob; a raise followed by another raise is insufficient.

The first case is the demo's approval segment (issue 18): Standard's cap raised 0.5 -> 0.86 Mbit/s,
raised again to 2.59 six seconds later on the same evidence, and 0.86 was labelled effective from a
window measured under 2.59. Windows are the API's: 8 s long, one every 2 s.
"""

from __future__ import annotations

from dataclasses import replace

from inferslice.actions import ActionKind
from inferslice.bottleneck.classify import TAIL
from inferslice.control.policy import decide
from inferslice.control.state import Check, ControlState, control_state_from_dict, mark_applied
from inferslice.diagnosis import Diagnosis, Regime, SloState
from inferslice.snapshot import SliceSnapshot

from .helpers import POLICIES, state_of

N, H, Q = Regime.NETWORK_LIMITED, Regime.HEALTHY, Regime.QUEUE_LIMITED
P = POLICIES["standard"]


def _window(end: float, cap: float, rx: float, **kw: float) -> SliceSnapshot:
    return SliceSnapshot(
        "standard", window_end_s=end, window_s=8.0, request_rate=1.5, link_rx_bps=rx, link_cap_bps=cap, output_tokens_per_s=220.0, **kw
    )


def _verdict(regime: Regime, end: float) -> Diagnosis:
    return Diagnosis("standard", regime, (), 0.8, window_end_s=end)


def _cap_check(aid: str, value: float, previous: float, applied_s: float) -> Check:
    return Check(aid, ActionKind.SET_CAP, "network_limited", value, previous, applied_s + 4.0, 4.0, True, applied_s)


def _outcomes(st: ControlState) -> dict[str, str]:
    return {e.action_id: e.kind for e in st.events if e.action_id}


def test_a_raise_followed_by_another_raise_is_insufficient_and_the_later_one_is_credited() -> None:
    st = ControlState(checks=(_cap_check("s-1-set_cap", 0.86e6, 0.5e6, 100.0), _cap_check("s-2-set_cap", 2.59e6, 0.86e6, 106.0)))
    # The first window measured under 2.59 (from 106 on) reads healthy: it credits 2.59, not 0.86.
    snap = _window(118.0, 2.59e6, 1.1e6)
    _, st = decide(_verdict(H, 118.0), state_of("standard", {"standard": 2}, snap, caps={"standard": 2.59e6}), P, 118.0, st)
    assert _outcomes(st) == {"s-1-set_cap": "insufficient", "s-2-set_cap": "effective"}
    assert ("network_limited", "set_cap") not in st.ineffective  # an insufficient raise is no reason to stop raising


def test_a_window_that_began_before_the_action_does_not_judge_it() -> None:
    applied = 100.0
    st = ControlState(checks=(_cap_check("s-1-set_cap", 1.5e6, 0.5e6, applied),))
    ss = state_of("standard", {"standard": 2}, _window(108.0, 1.5e6, 0.6e6), caps={"standard": 1.5e6})
    _, after = decide(_verdict(H, 107.9), ss, P, 108.0, st)  # due (100 + 4 + 4) but its window began at 99.9: not under the raise
    assert _outcomes(after) == {} and [c.action_id for c in after.checks] == ["s-1-set_cap"]
    _, after = decide(_verdict(H, 108.0), ss, P, 108.0, st)  # the window [100, 108] is measured under it
    assert _outcomes(after) == {"s-1-set_cap": "effective"}


def test_a_window_that_does_not_report_the_actuated_cap_does_not_judge_it() -> None:
    st = ControlState(checks=(_cap_check("s-1-set_cap", 1.5e6, 0.5e6, 100.0),))
    stale = state_of("standard", {"standard": 2}, _window(112.0, 0.5e6, 0.48e6), caps={"standard": 1.5e6})  # the exporter lags
    _, after = decide(_verdict(N, 112.0), stale, P, 112.0, st)
    assert _outcomes(after) == {} and after.checks  # neither effective nor ineffective: not measured yet
    assert not any(a.kind is ActionKind.SET_CAP for a in decide(_verdict(N, 112.0), stale, P, 112.0, st)[0])  # nor raised again


def test_an_8_s_window_reporting_the_new_cap_but_begun_before_it_raises_nothing() -> None:
    # The snapshot's gauge already shows the raised cap, but most of its 8 s window ran at the old one:
    # before, the 2 s scrape interval stood in for the window and the controller raised again (0.86 -> 2.59).
    [raise_cap], st = decide(
        _verdict(N, 100.0),
        state_of("standard", {"standard": 2}, _window(100.0, 0.5e6, 0.49e6), caps={"standard": 0.5e6}),
        P,
        100.0,
        ControlState(),
    )
    st = mark_applied(st, raise_cap.id, 100.5)
    cap = float(raise_cap.value)  # type: ignore[arg-type]
    lagging = state_of("standard", {"standard": 2}, _window(104.0, cap, 0.97 * cap), caps={"standard": cap})
    actions, st = decide(_verdict(N, 104.0), lagging, P, 104.0, st)
    assert actions == [] and _outcomes(st) == {}
    # A window wholly under the raise that still fills it: insufficient, and the next raise follows.
    under = state_of("standard", {"standard": 2}, _window(110.0, cap, 0.97 * cap), caps={"standard": cap})
    actions, st = decide(_verdict(N, 110.0), under, P, 110.0, st)
    assert _outcomes(st) == {raise_cap.id: "insufficient"}
    assert [a.kind for a in actions] == [ActionKind.SET_CAP] and float(actions[0].value) > cap  # type: ignore[arg-type]


def test_our_own_raise_that_the_link_fills_is_finished_even_when_the_slo_is_met() -> None:
    # The demo's approval segment (CI at 63ed390): 0.5 -> 0.86 Mbit/s sized on an estimate taken under
    # the binding cap met the SLO with the link pinned (0.84 of 0.86), still network-limited; a met SLO
    # held the next raise, and the tier stayed network-limited. Insufficient now lets one headroom
    # step follow: max(0.84 x 1.3, 0.86 x 1.3) = 1.118 Mbit/s (not the probe: x3 = 2.58).
    st = ControlState(checks=(_cap_check("s-1-set_cap", 0.86e6, 0.5e6, 100.0),))
    met = replace(_verdict(N, 112.0), slo=SloState.MET)
    under = state_of("standard", {"standard": 2}, _window(112.0, 0.86e6, 0.84e6), caps={"standard": 0.86e6})
    actions, after = decide(met, under, P, 112.0, st)
    assert _outcomes(after) == {"s-1-set_cap": "insufficient"}
    assert [(a.kind, a.value) for a in actions] == [(ActionKind.SET_CAP, 1_118_000)]
    assert after.insufficient == ()  # the step that followed finishes it: the next one is judged on its own
    # Once an episode: the link fills 1.118 too (1.10), the SLO still met: insufficient, and held this
    # time (a link that fills every cap would chain x1.3 steps to the budget: 12 windows to 20 Mbit/s).
    after = mark_applied(after, actions[0].id, 113.0)
    met2 = replace(_verdict(N, 126.0), slo=SloState.MET)
    under2 = state_of("standard", {"standard": 2}, _window(126.0, 1.118e6, 1.10e6), caps={"standard": 1.118e6})
    actions, after = decide(met2, under2, P, 126.0, after)
    assert _outcomes(after) == {"standard-1-set_cap": "insufficient"}
    assert actions == [] and after.finished == (("network_limited", "set_cap"),)
    # a missed SLO raises as it always did (the probe on a pinned link: 1.118 x 3)
    actions, _ = decide(_verdict(N, 126.0), under2, P, 126.0, replace(after, checks=()))
    assert [a.value for a in actions] == [round(1.118e6 * 3)]
    # the same window with no raise of ours behind it: a met SLO holds, as before
    actions, fresh = decide(met, under, P, 112.0, ControlState())
    assert actions == [] and any("SLO is met" in e.message for e in fresh.events if e.kind == "held")


def test_an_insufficient_raise_outlives_a_window_that_acts_on_nothing_and_a_restart() -> None:
    # A verdict under the controller's confidence bar decides nothing: the raise still waits to be finished.
    st = ControlState(insufficient=(("network_limited", "set_cap"),))
    under = state_of("standard", {"standard": 2}, _window(112.0, 0.86e6, 0.84e6), caps={"standard": 0.86e6})
    actions, kept = decide(Diagnosis("standard", N, (), 0.3, window_end_s=112.0), under, P, 112.0, st)
    assert actions == [] and kept.insufficient == (("network_limited", "set_cap"),)
    assert control_state_from_dict(kept.to_dict()).insufficient == (("network_limited", "set_cap"),)


def test_an_effective_raise_clears_what_was_left_to_finish() -> None:
    # A later raise of the same knob judged effective (the first window under 2.0 Mbit/s reads healthy):
    # nothing is left to finish.
    key = ("network_limited", "set_cap")
    st = ControlState(checks=(_cap_check("s-2-set_cap", 2.0e6, 0.86e6, 100.0),), insufficient=(key,))
    ss = state_of("standard", {"standard": 2}, _window(112.0, 2.0e6, 1.2e6), caps={"standard": 2.0e6})
    _, after = decide(_verdict(H, 112.0), ss, P, 112.0, st)
    assert _outcomes(after) == {"s-2-set_cap": "effective"} and after.insufficient == ()


def test_a_scale_out_is_judged_from_when_its_replicas_serve() -> None:
    p = POLICIES["premium"]
    check = Check("p-1-set_replicas", ActionKind.SET_REPLICAS, "queue_limited", 3, 2, 100.0 + 16.0, 16.0, True, 100.0)
    st = ControlState(checks=(check,))
    snap = SliceSnapshot("premium", window_end_s=118.0, window_s=8.0, request_rate=2.0, requests_waiting=0.0)
    starting = state_of("premium", {"premium": 3}, snap, ready=2)
    _, st = decide(Diagnosis("premium", H, (), 0.9, window_end_s=118.0), starting, p, 118.0, st)  # due, but one still cold-starts
    assert _outcomes(st) == {} and st.checks[0].in_force_s is None
    ready = state_of("premium", {"premium": 3}, replace(snap, window_end_s=120.0))
    _, st = decide(Diagnosis("premium", H, (), 0.9, window_end_s=120.0), ready, p, 120.0, st)  # all serve from 120: windows from then
    assert _outcomes(st) == {} and st.checks[0].in_force_s == 120.0
    _, st = decide(
        Diagnosis("premium", Q, (), 0.9, window_end_s=128.0), replace(ready, snapshot=replace(snap, window_end_s=128.0)), p, 128.0, st
    )
    assert _outcomes(st) == {"p-1-set_replicas": "ineffective"}  # measured under 3 replicas and still queueing


def test_a_step_undone_before_any_window_measured_it_is_superseded() -> None:
    p = POLICIES["premium"]
    out = Check("p-1-set_replicas", ActionKind.SET_REPLICAS, "forecast", 4, 3, 120.0, 20.0, True, 100.0)
    back = Check("p-2-set_replicas", ActionKind.SET_REPLICAS, "reclaim", 3, 4, 140.0, 30.0, True, 110.0)
    snap = SliceSnapshot("premium", window_end_s=112.0, window_s=8.0, request_rate=1.0, requests_waiting=0.0)
    _, st = decide(
        Diagnosis("premium", H, (), 0.9, window_end_s=112.0),
        state_of("premium", {"premium": 3}, snap),
        p,
        112.0,
        ControlState(checks=(out, back)),
    )
    assert _outcomes(st) == {"p-1-set_replicas": "superseded"}


def test_a_move_off_a_co_tenant_is_judged_effective_on_its_tail() -> None:
    """The window after the move may read the co-tenant's tail: compute at the classifier's TAIL (0.25),
    under the bar the controller acts on. It says the cause has left, so the move is effective; a
    verdict at the bar that still names compute makes it ineffective."""
    p = POLICIES["premium"]
    check = Check("p-1-relocate", ActionKind.RELOCATE, "compute_limited", "dublin/gpu1", "london/gpu0", 116.0, 16.0, True, 100.0,
                  replica="premium-0")  # fmt: skip
    snap = SliceSnapshot("premium", window_end_s=124.0, window_s=8.0, request_rate=2.0, requests_waiting=0.0, gpu_share=1.0)
    ss = state_of("premium", {"premium": 2}, snap)
    C = Regime.COMPUTE_LIMITED
    _, st = decide(Diagnosis("premium", C, (), TAIL, window_end_s=124.0), ss, p, 124.0, ControlState(checks=(check,)))
    assert _outcomes(st) == {"p-1-relocate": "effective"}
    _, st = decide(Diagnosis("premium", C, (), 0.7, window_end_s=124.0), ss, p, 124.0, ControlState(checks=(check,)))
    assert _outcomes(st) == {"p-1-relocate": "ineffective"}
