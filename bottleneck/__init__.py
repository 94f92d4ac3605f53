"""inferslice.bottleneck: the pure regime classifier and the episode state machine.

No I/O, no clock, no network or Prometheus clients (import-linter enforces it): callers pass the
snapshot, the reference and the time in.
"""

from inferslice.bottleneck.classify import classify
from inferslice.bottleneck.episodes import (
    Episode,
    EpisodeEvent,
    EpisodeState,
    EventKind,
    HysteresisPolicy,
    state_from_dict,
    step,
)
from inferslice.bottleneck.reference import learn_reference
from inferslice.bottleneck.thresholds import DEFAULT, Thresholds

__all__ = [
    "DEFAULT",
    "Episode",
    "EpisodeEvent",
    "EpisodeState",
    "EventKind",
    "HysteresisPolicy",
    "Thresholds",
    "classify",
    "learn_reference",
    "state_from_dict",
    "step",
]
