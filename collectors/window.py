"""One collection step: snapshots of every slice with their references, and the learner's next state."""

from __future__ import annotations

from inferslice.collectors.reference import LearnerState, ReferenceLearner
from inferslice.collectors.source import MetricSource
from inferslice.snapshot import SliceSnapshot


def build_snapshots(
    source: MetricSource,
    learner_state: LearnerState,
    now_s: float,
    window_s: float,
    learner: ReferenceLearner | None = None,
) -> tuple[list[SliceSnapshot], LearnerState]:
    """Snapshots with ``ref_*`` filled from what was learned *before* this window, then learn from it.

    A window never serves as its own reference: a congested window judged against itself would
    look unconstrained. ``SourceUnavailable`` from the source propagates (the caller retries).
    """
    learner = learner or ReferenceLearner()
    raw = source.snapshots(now_s, window_s)
    out = [s.with_reference(learner.reference(learner_state, s.slice)) for s in raw]
    state = learner_state
    for snap in raw:
        state = learner.observe(state, snap, now_s)
    return out, state
