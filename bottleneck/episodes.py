"""Bottleneck episodes: debounce per-window diagnoses into open/close events (pure; clock passed in).

A binding regime must persist for ``open_windows`` consecutive windows (or ``open_after_s`` seconds)
before an episode opens; an open episode closes after ``close_windows`` consecutive windows of any
other regime. ``unknown`` windows and diagnoses under ``min_confidence`` are neutral: a data gap
neither confirms nor ends anything. Start and end times are those of the first window of the change,
not of the moment the debounce confirmed it, so episodes line up with the load that caused them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any

from inferslice.diagnosis import BINDING_REGIMES, Diagnosis, Regime


@dataclass(frozen=True)
class HysteresisPolicy:
    open_windows: int = 3  # three 2 s scrape windows: one noisy window never opens an episode
    open_after_s: float | None = None  # optional: also open once a regime held this long (sparse windows)
    close_windows: int = 3  # symmetric with opening, so a flapping regime does not churn episodes
    min_confidence: float = 0.3  # below this a diagnosis is too weak to move the machine either way


DEFAULT_HYSTERESIS = HysteresisPolicy()


class EventKind(enum.StrEnum):
    OPEN = "open"
    CLOSE = "close"


@dataclass(frozen=True)
class Episode:
    slice: str
    regime: Regime
    start_s: float
    peak_confidence: float
    windows: int = 1
    end_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "slice": self.slice,
            "regime": self.regime.value,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "peak_confidence": self.peak_confidence,
            "windows": self.windows,
        }


@dataclass(frozen=True)
class EpisodeEvent:
    kind: EventKind
    episode: Episode
    at_s: float  # when the machine decided (the window that confirmed the change)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "at_s": self.at_s, **self.episode.to_dict()}


@dataclass(frozen=True)
class _Run:
    """Consecutive windows of one regime not (yet) reflected by an open episode."""

    regime: Regime
    since_s: float
    windows: int
    peak_confidence: float


@dataclass(frozen=True)
class EpisodeState:
    slice: str = ""
    open: Episode | None = None
    candidate: _Run | None = field(default=None)  # consecutive windows of one binding regime, toward opening
    away_since_s: float | None = None  # first of the consecutive windows that disagree with the open episode
    away_windows: int = 0

    def to_dict(self) -> dict[str, Any]:
        cand = self.candidate
        return {
            "slice": self.slice,
            "open": self.open.to_dict() if self.open else None,
            "candidate": None
            if cand is None
            else {"regime": cand.regime.value, "since_s": cand.since_s, "windows": cand.windows, "peak_confidence": cand.peak_confidence},
            "away_since_s": self.away_since_s,
            "away_windows": self.away_windows,
        }


def state_from_dict(data: dict[str, Any]) -> EpisodeState:
    """Inverse of ``EpisodeState.to_dict`` (the API persists the machine across restarts)."""
    op = data.get("open")
    cand = data.get("candidate")
    away = data.get("away_since_s")
    return EpisodeState(
        slice=str(data.get("slice", "")),
        open=None
        if op is None
        else Episode(
            slice=op["slice"],
            regime=Regime(op["regime"]),
            start_s=float(op["start_s"]),
            peak_confidence=float(op["peak_confidence"]),
            windows=int(op["windows"]),
        ),
        candidate=None
        if cand is None
        else _Run(Regime(cand["regime"]), float(cand["since_s"]), int(cand["windows"]), float(cand["peak_confidence"])),
        away_since_s=None if away is None else float(away),
        away_windows=int(data.get("away_windows", 0)),
    )


def _confirmed(run: _Run, now_s: float, policy: HysteresisPolicy) -> bool:
    if run.windows >= policy.open_windows:
        return True
    return policy.open_after_s is not None and run.windows >= 2 and now_s - run.since_s >= policy.open_after_s


def step(state: EpisodeState, diagnosis: Diagnosis, now_s: float, policy: HysteresisPolicy) -> tuple[EpisodeState, list[EpisodeEvent]]:
    """Feed one window's diagnosis; return the new state and the events it produced."""
    regime = diagnosis.regime
    conf = diagnosis.confidence
    name = state.slice or diagnosis.slice
    if regime is Regime.UNKNOWN or conf < policy.min_confidence:
        return replace(state, slice=name), []

    current = state.open
    if current is not None and regime is current.regime:
        grown = replace(current, windows=current.windows + 1, peak_confidence=max(current.peak_confidence, conf))
        return EpisodeState(name, grown), []

    cand = state.candidate
    if regime not in BINDING_REGIMES:
        cand = None  # healthy breaks any run toward a new episode
    elif cand is not None and cand.regime is regime:
        cand = replace(cand, windows=cand.windows + 1, peak_confidence=max(cand.peak_confidence, conf))
    else:
        cand = _Run(regime, now_s, 1, conf)

    events: list[EpisodeEvent] = []
    away_since, away_windows = state.away_since_s, state.away_windows
    if current is not None:
        away_since = now_s if away_since is None else away_since
        away_windows += 1
        if away_windows >= policy.close_windows:
            events.append(EpisodeEvent(EventKind.CLOSE, replace(current, end_s=away_since), now_s))
            current, away_since, away_windows = None, None, 0

    if current is None and cand is not None and _confirmed(cand, now_s, policy):
        opened = Episode(name, cand.regime, cand.since_s, cand.peak_confidence, cand.windows)
        events.append(EpisodeEvent(EventKind.OPEN, opened, now_s))
        return EpisodeState(name, opened), events
    return EpisodeState(name, current, cand, away_since, away_windows), events
