"""Which verdicts may add replicas or move one: persistence and the network shadow.

The two sequences replayed here were seen on the testbed (the demo's Standard one window after its
cap raise; the real-testbed squeeze's first windows); the properties say what must hold for any
sequence of verdicts behind a binding link. Expectations follow from the settings' defaults
(persist 2 windows, act at once from 0.75 confidence, pinned at 90 % of the cap, settle 6 s).
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as hs

from inferslice.actions import Action, ActionKind
from inferslice.control.policy import decide
from inferslice.control.state import ControlState, mark_applied
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.snapshot import SliceSnapshot

from .helpers import POLICIES, diag, state_of

Q, N, C, H, U = Regime.QUEUE_LIMITED, Regime.NETWORK_LIMITED, Regime.COMPUTE_LIMITED, Regime.HEALTHY, Regime.UNKNOWN
P = POLICIES["standard"]


def _snap(rx_bps: float, cap_bps: float, waiting: float = 0.0) -> SliceSnapshot:
    return SliceSnapshot(
        "standard",
        request_rate=1.5,
        link_rx_bps=rx_bps,
        link_cap_bps=cap_bps,
        output_tokens_per_s=220.0,
        requests_running=8.0,
        requests_waiting=waiting,
        ttft_p99_s=2.4,
        queue_time_p99_s=1.0,
    )


def _adds_capacity(actions: list[Action], target: int) -> bool:
    return any(
        a.kind is ActionKind.RELOCATE or (a.kind is ActionKind.SET_REPLICAS and isinstance(a.value, int) and a.value > target)
        for a in actions
    )


def test_window_straddling_the_cap_raise_reads_compute_and_adds_no_replica() -> None:
    # The demo's run: pinned at 0.5 Mbit/s (network_limited, 0.8) -> the cap is raised and applied ->
    # the next window averages both caps (0.47 of the new 1.5 Mbit/s) and reads compute_limited (0.55),
    # then two windows of queue_limited (0.8) while the backlog drains with nothing waiting: no replicas.
    st = ControlState()
    ss = state_of("standard", {"standard": 2}, _snap(0.5e6, 0.5e6), caps={"standard": 0.5e6})
    [raise_cap], st = decide(diag("standard", N, confidence=0.8), ss, P, 100.0, st)
    assert raise_cap.kind is ActionKind.SET_CAP
    st = mark_applied(st, raise_cap.id, 100.1)
    cap = float(raise_cap.value)  # type: ignore[arg-type]
    after = [(C, 0.55, 0.47e6), (Q, 0.8, 0.50e6), (Q, 0.8, 0.62e6), (H, 0.9, 0.78e6)]
    held = []
    for k, (regime, conf, rx) in enumerate(after, start=1):
        ss = state_of("standard", {"standard": 2}, _snap(rx, cap), caps={"standard": cap})
        actions, st = decide(diag("standard", regime, confidence=conf), ss, P, 100.0 + 2 * k, st)
        assert not _adds_capacity(actions, 2), (regime, actions)
        held += [e.cause for e in st.events if e.kind == "held"]
    assert held == ["compute_limited", "queue_limited"]  # said once per episode, not every window


def test_first_squeezed_window_reads_compute_before_the_link_shows_it() -> None:
    # The real-testbed squeeze: the first squeezed window reads compute_limited (0.55) with the link's
    # counters not yet at the cap; the next shows the cap binding. One compute window pays no cold
    # start, and once the link binds the compute verdict is not trusted for the settle period.
    st = ControlState()
    ss = state_of("standard", {"standard": 2}, _snap(0.3e6, 0.5e6), caps={"standard": 0.5e6})
    actions, st = decide(diag("standard", C, confidence=0.55), ss, P, 10.0, st)
    assert actions == [] and [e.kind for e in st.events] == ["held"]
    ss = state_of("standard", {"standard": 2}, _snap(0.5e6, 0.5e6), caps={"standard": 0.5e6})
    actions, st = decide(diag("standard", N, confidence=0.8), ss, P, 12.0, st)
    assert [a.kind for a in actions] == [ActionKind.SET_CAP]
    ss = state_of("standard", {"standard": 2}, _snap(0.49e6, 0.5e6), caps={"standard": 0.5e6})
    actions, st = decide(diag("standard", C, confidence=0.75), ss, P, 14.0, st)
    assert not _adds_capacity(actions, 2)


def test_compute_persisting_without_the_network_does_act() -> None:
    # Uncapped, two consecutive compute windows: the second scales out (no GPU to move to is not
    # needed here: the backend cannot move replicas), so the rules delay, they do not forbid.
    snap = SliceSnapshot("standard", request_rate=1.0, gpu_share=0.5, link_rx_bps=0.3e6)
    ss = replace(state_of("standard", {"standard": 1, "free": 1}, snap, share=0.5), relocatable=False)
    a1, st = decide(diag("standard", C, confidence=0.65), ss, P, 0.0, ControlState())
    a2, st = decide(diag("standard", C, confidence=0.65), ss, P, 2.0, st)
    assert a1 == [] and [(a.kind, a.value) for a in a2] == [(ActionKind.SET_REPLICAS, 2)]


def test_the_same_window_seen_twice_counts_once() -> None:
    # The controller may step faster than the diagnosis windows: a repeated window is not persistence.
    snap = SliceSnapshot("standard", request_rate=1.0, gpu_share=0.5)
    ss = replace(state_of("standard", {"standard": 1, "free": 1}, snap, share=0.5), relocatable=False)
    d = replace(diag("standard", C, confidence=0.65), window_end_s=50.0)
    st = ControlState()
    for now in (50.5, 51.0, 51.5):
        actions, st = decide(d, ss, P, now, st)
        assert actions == []
    actions, _ = decide(replace(d, window_end_s=52.0), ss, P, 52.5, st)
    assert [a.kind for a in actions] == [ActionKind.SET_REPLICAS]


def test_compound_queue_in_the_same_window_as_the_network_is_trusted() -> None:
    # A queue the classifier reads together with the network (both seen binding) scales out with the cap raise.
    ss = state_of("standard", {"standard": 1}, _snap(0.5e6, 0.5e6, waiting=10.0), caps={"standard": 0.5e6})
    actions, _ = decide(diag("standard", N, Q), ss, P, 5.0, ControlState())
    assert [a.kind for a in actions] == [ActionKind.SET_CAP, ActionKind.SET_REPLICAS]


def test_a_less_than_sure_queue_waits_one_window_a_sure_one_does_not() -> None:
    snap = SliceSnapshot("premium", request_rate=4.0, requests_waiting=20.0, queue_time_p99_s=3.0)
    ss = state_of("premium", {"premium": 2}, snap)
    sure, _ = decide(diag("premium", Q, confidence=0.8), ss, POLICIES["premium"], 0.0, ControlState())
    unsure, st = decide(diag("premium", Q, confidence=0.55), ss, POLICIES["premium"], 0.0, ControlState())
    again, _ = decide(diag("premium", Q, confidence=0.55), ss, POLICIES["premium"], 2.0, st)
    assert [a.kind for a in sure] == [ActionKind.SET_REPLICAS] and unsure == [] and [a.kind for a in again] == [ActionKind.SET_REPLICAS]


_WINDOW = hs.tuples(
    hs.sampled_from([N, C, Q, H, U]),  # one regime per window: no compound verdict
    hs.floats(min_value=0.0, max_value=1.0),  # its confidence
    hs.booleans(),  # the link pinned at the cap this window
    hs.floats(min_value=0.0, max_value=30.0),  # requests waiting
)


@settings(max_examples=150, deadline=None)
@given(hs.lists(_WINDOW, min_size=1, max_size=25))
def test_no_replicas_or_moves_within_the_settle_period_of_a_binding_link(windows: list[tuple[Regime, float, bool, float]]) -> None:
    # Whatever the classifier says alone, no window within 6 s of the link binding (pinned, or a
    # network verdict at or above the minimum confidence) adds a replica or moves one. Caps raised
    # are applied at once, as in auto mode.
    st = ControlState()
    cap = 0.5e6
    last_bound: float | None = None
    for k, (regime, conf, pinned, waiting) in enumerate(windows):
        now = 2.0 * k
        snap = _snap(cap if pinned else 0.3 * cap, cap, waiting)
        ss = state_of("standard", {"standard": 2}, snap, caps={"standard": cap})
        actions, st = decide(diag("standard", regime, confidence=conf), ss, P, now, st)
        if pinned or (regime is N and conf >= P.settings.min_confidence):
            last_bound = now
        if last_bound is not None and now - last_bound < P.settings.network_settle_s:
            assert not _adds_capacity(actions, 2), (k, windows, actions)
        for a in actions:
            st = mark_applied(st, a.id, now)
            if a.kind is ActionKind.SET_CAP and isinstance(a.value, (int, float)):
                cap = float(a.value)


@settings(max_examples=150, deadline=None)
@given(hs.lists(hs.tuples(hs.sampled_from([C, H, U]), hs.floats(min_value=0.0, max_value=1.0)), min_size=1, max_size=25))
def test_compute_never_pays_a_cold_start_on_its_first_window(windows: list[tuple[Regime, float]]) -> None:
    # Uncapped, no network in sight: a compute remedy needs compute in the previous window too.
    snap = SliceSnapshot("standard", request_rate=1.0, gpu_share=0.5)
    ss = state_of("standard", {"standard": 1, "free": 1}, snap, share=0.5)
    st = ControlState()
    prev: Regime | None = None
    for k, (regime, conf) in enumerate(windows):
        actions, st = decide(diag("standard", regime, confidence=conf), ss, P, 2.0 * k, st)
        if any(a.regime == C.value for a in actions):
            assert prev is C, (k, windows)
        prev = regime if conf >= P.settings.min_confidence else None


def test_a_verdict_that_predates_the_raised_cap_raises_nothing_more() -> None:
    # The demo's run: the cap went 0.5 -> 1.5 Mbit/s; the next two windows still reported the old cap
    # (the exporter and Prometheus lag), pinned and network_limited; they raised it to 4.5. Now they
    # wait, the first window measured at 1.5 Mbit/s (0.83 of it used, healthy) ends the episode.
    st = ControlState()
    ss = state_of("standard", {"standard": 2}, _snap(0.5e6, 0.5e6), caps={"standard": 0.5e6})
    d = replace(diag("standard", N, confidence=0.8), window_end_s=1000.0)
    [a], st = decide(d, ss, P, 1000.3, st)
    st = mark_applied(st, a.id, 1000.4)
    raised = float(a.value)  # type: ignore[arg-type]
    for k, window_end in enumerate((1002.0, 1004.0), start=1):  # still the old cap in the snapshot
        ss = state_of("standard", {"standard": 2}, _snap(0.5e6, 0.5e6), caps={"standard": raised})
        actions, st = decide(replace(d, window_end_s=window_end), ss, P, 1000.3 + 2 * k + 6, st)  # past the cooldown
        assert actions == [], actions
    # a window that began before the change, even if it reports the new cap, does not count either
    ss = state_of("standard", {"standard": 2}, _snap(1.45e6, raised), caps={"standard": raised})
    actions, st = decide(replace(d, window_end_s=1001.0), ss, P, 1010.0, st)
    assert actions == []
    # measured at the new cap and binding it: raise again (a real shortfall, not a stale one)
    actions, st = decide(replace(d, window_end_s=1012.0), ss, P, 1012.3, st)
    assert [x.kind for x in actions] == [ActionKind.SET_CAP] and float(actions[0].value) > raised  # type: ignore[arg-type]


def test_arrivals_recovering_behind_a_raised_cap_do_not_prescale() -> None:
    # Closed-loop clients: 1.5 req/s before the squeeze, throttled to 0.7 while the link binds, back
    # to 1.5 once the cap is raised. The recovery looks like a ramp (0.7 -> 1.5 in four windows) but is
    # no demand growth: 1.5 req/s fits 2 replicas (1 req/s each at 80 %), so nothing pre-scales.
    p = P
    st = ControlState()
    cap = 0.5e6
    t = 0.0
    seq = [(1.5, False, H)] * 6 + [(0.7, True, N)] * 5 + [(0.7 + 0.2 * k, False, H) for k in range(1, 5)] + [(1.5, False, H)] * 10
    for rate, pinned, regime in seq:
        snap = replace(_snap(cap if pinned else 0.3 * cap, cap), request_rate=rate)
        actions, st = decide(diag("standard", regime), state_of("standard", {"standard": 2}, snap, caps={"standard": cap}), p, t, st)
        assert all(a.kind is not ActionKind.SET_REPLICAS for a in actions), (t, actions)
        for a in actions:
            st = mark_applied(st, a.id, t)
            cap = float(a.value)  # type: ignore[arg-type]
        t += 2.0


def test_a_trend_from_before_the_link_bound_does_not_prescale_once_it_clears() -> None:
    # The demo's Standard: a load step (0.5 -> 2 req/s) in the windows before the squeeze binds, then
    # the link binds, then the cap is raised and the arrivals settle at 1.5 req/s, which 2 replicas
    # serve (1 req/s each at 80 %). The step's trend, kept through the squeeze, must not pre-scale
    # (before the squeeze, a pre-scale for the step is the forecast's job: the demo was in dry-run then).
    st = ControlState()
    cap, t = 0.5e6, 0.0
    bound = False
    seq = [(0.5, False, H)] * 4 + [(1.0, False, H), (1.5, False, H), (2.0, False, H)] + [(1.2, True, N)] * 6 + [(1.5, False, H)] * 12
    for rate, pinned, regime in seq:
        snap = replace(_snap(cap if pinned else 0.3 * cap, cap), request_rate=rate)
        actions, st = decide(diag("standard", regime), state_of("standard", {"standard": 2}, snap, caps={"standard": cap}), P, t, st)
        bound = bound or pinned
        if bound:  # from the first window the link binds on, as in auto mode
            assert all(a.kind is not ActionKind.SET_REPLICAS for a in actions), (t, actions)
            for a in actions:
                st = mark_applied(st, a.id, t)
                cap = float(a.value)  # type: ignore[arg-type]
        else:
            st = replace(st, checks=())  # dry-run: nothing it proposed is judged
        t += 2.0


def test_compute_read_at_a_share_the_replicas_regained_adds_nothing() -> None:
    # The demo's Premium: the co-tenant leaves (the engine hosts report share 1.0 at once) while the
    # next windows still carry the 0.35 share and read compute_limited: no scale-out on them.
    p = POLICIES["premium"]
    stale = SliceSnapshot("premium", request_rate=1.0, gpu_share=0.35)
    ss = replace(state_of("premium", {"premium": 2}, stale, share=1.0), relocatable=False)
    st = ControlState()
    for t in (0.0, 2.0, 4.0):
        actions, st = decide(diag("premium", C, confidence=0.65), ss, p, t, st)
        assert actions == []
    # the share really is reduced now: after two windows the tier scales out
    ss = replace(state_of("premium", {"premium": 2}, stale, share=0.35), relocatable=False)
    actions, _ = decide(diag("premium", C, confidence=0.65), ss, p, 6.0, st)
    assert [a.kind for a in actions] == [ActionKind.SET_REPLICAS]


def test_a_queue_draining_behind_a_raised_cap_is_no_ceiling_claim() -> None:
    # Standard at its ceiling (3 replicas) reads queue_limited while the backlog of a squeeze drains
    # through a just-raised cap: that is the network's backlog, not the admission policy's limit.
    st = ControlState()
    ss = state_of("standard", {"standard": 3}, _snap(0.5e6, 0.5e6, waiting=4.0), caps={"standard": 0.5e6})
    [a], st = decide(diag("standard", N), ss, P, 0.0, st)
    st = mark_applied(st, a.id, 0.1)
    ss = state_of("standard", {"standard": 3}, _snap(0.6e6, 1.5e6, waiting=4.0), caps={"standard": 1.5e6})
    _, st = decide(diag("standard", Q), ss, P, 2.0, st)
    assert not [e for e in st.events if e.kind == "at_ceiling"]
    # with no binding link in its history, the same queue at the ceiling is reported
    free_link = state_of("standard", {"standard": 3}, _snap(0.6e6, 1.5e6, waiting=4.0), caps={"standard": 1.5e6})
    _, fresh = decide(diag("standard", Q), free_link, P, 100.0, ControlState())
    assert [e.kind for e in fresh.events] == ["at_ceiling"]


def test_compute_read_just_after_the_co_tenant_left_adds_nothing() -> None:
    # The demo's Premium, second run: the hosts report share 0.35, then 1.0; the exporter's share
    # gauge follows at once but the TPOT quantiles lag, so compute_limited is read at share 1.0 for
    # 6 s: no scale-out within the 8 s settle; a compute verdict persisting past it does act.
    p = POLICIES["premium"]
    snap = SliceSnapshot("premium", request_rate=1.0, gpu_share=1.0)
    contended = replace(state_of("premium", {"premium": 2}, replace(snap, gpu_share=0.35), share=0.35), relocatable=False)
    full = replace(state_of("premium", {"premium": 2}, snap, share=1.0), relocatable=False)
    st = ControlState()
    _, st = decide(diag("premium", C, confidence=0.55), contended, p, 0.0, st)  # dry-run era: the co-tenant is there
    st = replace(st, checks=())
    for now in (2.0, 4.0, 6.0):
        actions, st = decide(diag("premium", C, confidence=0.55), full, p, now, st)
        assert actions == [], (now, actions)
    actions, _ = decide(diag("premium", C, confidence=0.55), full, p, 8.0, st)
    assert [a.kind for a in actions] == [ActionKind.SET_REPLICAS]  # saturated at full share: a real compute limit


def test_an_unsure_verdict_naming_only_the_network_never_prescales() -> None:
    # Found by the guard property test: a forecast pre-scale (premium 1 -> 4) on a window whose verdict
    # had an unknown primary and the network as its one secondary at 0.5 confidence (>= min_confidence).
    # The documented rule: never replicas, not even from the forecast, while only the network binds.
    p = POLICIES["premium"]

    def ramp(last: Diagnosis | None, at: int) -> tuple[int, list[Action]]:
        """test_policy's healthy ramp (measured 1 req/s per replica); ``last`` replaces window ``at``'s verdict."""
        st = ControlState(service_rate_rps=1.0)
        for i in range(40):
            snap = SliceSnapshot("premium", request_rate=0.05 * (i + 1), requests_waiting=0.0)
            d = last if last is not None and i == at else diag("premium", H)
            actions, st = decide(d, state_of("premium", {"premium": 1}, snap), p, 2.0 * i, st)
            if actions or i == at:
                return i, actions
        return -1, []

    k, first = ramp(None, -1)
    assert k > 0 and [a.regime for a in first] == ["forecast"]  # healthy, the ramp pre-scales at window k
    assert ramp(Diagnosis("premium", U, (N,), 0.5), k) == (k, [])  # the same window read "unknown, network secondary": nothing
    assert ramp(Diagnosis("premium", U, (N,), 0.3), k)[1] != []  # below min_confidence the verdict is no evidence at all
