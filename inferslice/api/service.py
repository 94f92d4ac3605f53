"""``DiagnosisService``: one window in, a stored diagnosis and episode events out.

This is the in-process entry point for a collector loop: call ``service.ingest(snapshot)`` per
window (``POST /v1/snapshots`` does the same over HTTP). Collectors may not import the API
(import-linter), so whoever wires them (a CLI command) hands them ``service.ingest`` as a plain
``Callable[[SliceSnapshot], IngestResult]``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass

from inferslice.api.store import Store
from inferslice.bottleneck import DEFAULT, EpisodeEvent, HysteresisPolicy, Thresholds, classify, learn_reference, step
from inferslice.bottleneck.episodes import DEFAULT_HYSTERESIS
from inferslice.bottleneck.reference import DEFAULT_LEARNING, LearningPolicy, usable_reference
from inferslice.diagnosis import Diagnosis
from inferslice.snapshot import Reference, SliceSnapshot
from inferslice.topology import Tier, Topology


@dataclass(frozen=True)
class IngestResult:
    diagnosis: Diagnosis
    events: tuple[EpisodeEvent, ...]
    ts: float


def tier_of(topology: Topology | None, slice_name: str) -> Tier | None:
    if topology is None:
        return None
    try:
        return topology.tier(slice_name)
    except KeyError:
        return None


def with_tier_defaults(snapshot: SliceSnapshot, tier: Tier | None) -> SliceSnapshot:
    """Fill the SLOs and the replica ceiling of a configured tier where the snapshot left them out."""
    if tier is None:
        return snapshot
    return dataclasses.replace(
        snapshot,
        slo_ttft_p99_s=snapshot.slo_ttft_p99_s if snapshot.slo_ttft_p99_s is not None else tier.slo_ttft_p99_s,
        slo_tpot_p99_s=snapshot.slo_tpot_p99_s if snapshot.slo_tpot_p99_s is not None else tier.slo_tpot_p99_s,
        replicas_max=snapshot.replicas_max if snapshot.replicas_max is not None else float(tier.replicas_max),
    )


class DiagnosisService:
    def __init__(
        self,
        store: Store,
        topology: Topology | None,
        clock: Callable[[], float],
        thresholds: Thresholds = DEFAULT,
        hysteresis: HysteresisPolicy = DEFAULT_HYSTERESIS,
        learning: LearningPolicy | None = DEFAULT_LEARNING,
    ) -> None:
        self.store = store
        self.topology = topology
        self.clock = clock
        self.thresholds = thresholds
        self.hysteresis = hysteresis
        self.learning = learning  # None: references only from configuration or input
        self._lock = threading.Lock()  # ingest is read-modify-write of the episode state

    def known_slices(self) -> list[str]:
        configured = self.topology.tier_names if self.topology is not None else []
        return configured + [s for s in self.store.slices() if s not in configured]

    def is_known(self, slice_name: str) -> bool:
        return tier_of(self.topology, slice_name) is not None or self.store.has_slice(slice_name)

    def prepare(self, snapshot: SliceSnapshot) -> SliceSnapshot:
        return with_tier_defaults(snapshot, tier_of(self.topology, snapshot.slice))

    def diagnose(self, snapshot: SliceSnapshot) -> Diagnosis:
        """Classify without storing anything (``POST /v1/diagnose``)."""
        return classify(self.prepare(snapshot), usable_reference(self.store.reference(snapshot.slice), self.learning), self.thresholds)

    def ingest(self, snapshot: SliceSnapshot) -> IngestResult:
        """Classify one window, store snapshot and diagnosis, learn the reference, step the episodes."""
        snap = self.prepare(snapshot)
        with self._lock:
            now = self.clock()
            ts = snap.window_end_s if snap.window_end_s is not None else now
            reference = self.store.reference(snap.slice)
            diagnosis = classify(snap, usable_reference(reference, self.learning), self.thresholds)
            self.store.record(snap, diagnosis, ts)
            if self.learning is not None and snap.reference() is None:
                learned = learn_reference(reference, snap, diagnosis, self.learning)
                if learned is not None and learned != reference:
                    self.store.set_reference(snap.slice, learned, now)
            state, events = step(self.store.episode_state(snap.slice), diagnosis, ts, self.hysteresis)
            self.store.save_episodes(snap.slice, state, events)
        return IngestResult(diagnosis, tuple(events), ts)

    def set_reference(self, slice_name: str, reference: Reference) -> Reference:
        configured = dataclasses.replace(reference, source="configured")
        self.store.set_reference(slice_name, configured, self.clock())
        return configured
