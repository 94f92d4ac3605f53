"""Hysteresis of the episode machine: debounce on open, debounce on close, neutral gaps."""

from __future__ import annotations

from inferslice.bottleneck import EpisodeEvent, EpisodeState, EventKind, HysteresisPolicy, state_from_dict, step
from inferslice.diagnosis import Diagnosis, Regime

Q, N, H, U = Regime.QUEUE_LIMITED, Regime.NETWORK_LIMITED, Regime.HEALTHY, Regime.UNKNOWN
POLICY = HysteresisPolicy(open_windows=3, close_windows=2, min_confidence=0.3)


def run(
    regimes: list[Regime], policy: HysteresisPolicy = POLICY, conf: list[float] | None = None, dt: float = 2.0
) -> tuple[EpisodeState, list[EpisodeEvent]]:
    state = EpisodeState(slice="free")
    events: list[EpisodeEvent] = []
    for i, r in enumerate(regimes):
        c = conf[i] if conf else 0.8
        state, evs = step(state, Diagnosis(slice="free", regime=r, confidence=c), 100.0 + dt * i, policy)
        events.extend(evs)
    return state, events


def test_regime_must_persist_before_an_episode_opens() -> None:
    state, events = run([H, Q, Q])
    assert events == [] and state.open is None
    state, events = run([H, Q, Q, Q])
    assert [e.kind for e in events] == [EventKind.OPEN]
    ep = events[0].episode
    assert ep.regime is Q and ep.start_s == 102.0  # the first queue window, not the confirming one
    assert events[0].at_s == 106.0


def test_a_blip_does_not_open_and_breaks_the_run() -> None:
    _, events = run([Q, Q, H, Q, Q, H])
    assert events == []


def test_episode_closes_after_m_other_windows_with_the_end_of_its_regime() -> None:
    state, events = run([Q, Q, Q, Q, H, H])
    assert [e.kind for e in events] == [EventKind.OPEN, EventKind.CLOSE]
    closed = events[1].episode
    assert closed.start_s == 100.0 and closed.end_s == 108.0  # first healthy window
    assert closed.windows == 4
    assert state.open is None


def test_one_other_window_inside_an_episode_does_not_close_it() -> None:
    state, events = run([Q, Q, Q, H, Q, H, Q, Q])
    assert [e.kind for e in events] == [EventKind.OPEN]
    assert state.open is not None and state.open.windows == 6


def test_peak_confidence_is_tracked() -> None:
    _, events = run([Q, Q, Q, Q, H, H], conf=[0.5, 0.6, 0.7, 0.95, 0.9, 0.9])
    assert events[0].episode.peak_confidence == 0.7
    assert events[1].episode.peak_confidence == 0.95


def test_regime_change_closes_one_episode_and_opens_the_next() -> None:
    _, events = run([Q, Q, Q, N, N, N])
    kinds = [(e.kind, e.episode.regime) for e in events]
    assert kinds == [(EventKind.OPEN, Q), (EventKind.CLOSE, Q), (EventKind.OPEN, N)]
    assert events[1].episode.end_s == 106.0 and events[2].episode.start_s == 106.0


def test_unknown_and_low_confidence_windows_are_neutral() -> None:
    # Gaps neither break a run toward opening...
    _, events = run([Q, U, Q, U, Q])
    assert [e.kind for e in events] == [EventKind.OPEN]
    # ...nor close an open episode.
    _, events = run([Q, Q, Q, U, U, U, U, H], conf=[0.8, 0.8, 0.8, 0.0, 0.0, 0.0, 0.0, 0.1])
    assert [e.kind for e in events] == [EventKind.OPEN]


def test_time_based_opening() -> None:
    policy = HysteresisPolicy(open_windows=10, open_after_s=30.0, close_windows=2)
    _, events = run([Q, Q], policy=policy, dt=15.0)
    assert events == []
    _, events = run([Q, Q, Q], policy=policy, dt=15.0)
    assert [e.kind for e in events] == [EventKind.OPEN]


def test_healthy_never_opens_an_episode() -> None:
    state, events = run([H] * 10)
    assert events == [] and state.open is None and state.candidate is None


def test_state_round_trips_through_a_dict() -> None:
    state, _ = run([Q, Q, Q, H, N])
    back = state_from_dict(state.to_dict())
    assert back == state
    # and stepping the restored state behaves like the original
    d = Diagnosis(slice="free", regime=H, confidence=0.9)
    assert step(back, d, 200.0, POLICY) == step(state, d, 200.0, POLICY)
