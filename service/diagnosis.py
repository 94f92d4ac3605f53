"""``DiagnosisService``: one window in, a stored diagnosis and episode events out. No FastAPI here.

This is the in-process entry point for a collector loop: call ``service.ingest(snapshot)`` per
window (``POST /v1/snapshots`` does the same over HTTP; the API in ``app.py`` is a thin layer over
this class). Collectors may not import the service (import-linter), so whoever wires them (the
``Platform``, a CLI command) hands them ``service.ingest`` as a plain callable.

``prepare`` is the one place a window gets what the platform knows about its slice before
``classify`` sees it:
- SLOs: the tiers file wins (``inferslice.snapshot.with_configured_slos``), as in the collectors;
- the replica ceiling: the tiers file fills it where the window has none (an observed ceiling
  stands: a live autoscaler's maximum may differ from the file's);

and one way a reference reaches ``classify``: the slice's stored reference (configured through
``PUT .../reference``, or learned here from healthy windows; ``bottleneck.reference`` is the one
learner), passed as ``classify``'s ``reference`` argument once it may judge (``reference_for``).
A posted snapshot's own ``ref_*`` fields take precedence field by field, as ``classify`` documents;
nothing else fills them (the collectors produce snapshots without references).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass

from inferslice.bottleneck import DEFAULT, EpisodeEvent, HysteresisPolicy, Thresholds, classify, learn_reference, step
from inferslice.bottleneck.episodes import DEFAULT_HYSTERESIS
from inferslice.bottleneck.reference import DEFAULT_LEARNING, LearningPolicy, usable_reference
from inferslice.diagnosis import Diagnosis
from inferslice.service.store import Store
from inferslice.snapshot import Reference, SliceSnapshot, with_configured_slos
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
    """A configured tier's SLOs (they win) and its replica ceiling (where the snapshot has none)."""
    if tier is None:
        return snapshot
    snap = with_configured_slos(snapshot, tier.slo_ttft_p99_s, tier.slo_tpot_p99_s)
    return dataclasses.replace(snap, replicas_max=snap.replicas_max if snap.replicas_max is not None else float(tier.replicas_max))


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
        # Each slice's latest verdict as objects, for a controller in this process (``latest_verdicts``):
        # the diagnosis and the window it judged, with the slice's reference filled in.
        self._latest: dict[str, tuple[Diagnosis, SliceSnapshot]] = {}

    def known_slices(self) -> list[str]:
        configured = self.topology.tier_names if self.topology is not None else []
        return configured + [s for s in self.store.slices() if s not in configured]

    def is_known(self, slice_name: str) -> bool:
        return tier_of(self.topology, slice_name) is not None or self.store.has_slice(slice_name)

    def prepare(self, snapshot: SliceSnapshot) -> SliceSnapshot:
        """The window with what the tiers file says about its slice (SLOs win, the ceiling fills in)."""
        return with_tier_defaults(snapshot, tier_of(self.topology, snapshot.slice))

    def reference_for(self, slice_name: str) -> Reference | None:
        """The slice's stored reference when it may judge (configured, or learned from enough windows)."""
        return usable_reference(self.store.reference(slice_name), self.learning)

    def diagnose(self, snapshot: SliceSnapshot) -> Diagnosis:
        """Classify without storing anything (``POST /v1/diagnose``)."""
        return classify(self.prepare(snapshot), self.reference_for(snapshot.slice), self.thresholds)

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
                    reference = learned
            self._latest[snap.slice] = (diagnosis, snap.with_reference(reference) if reference is not None else snap)
            state, events = step(self.store.episode_state(snap.slice), diagnosis, ts, self.hysteresis)
            self.store.save_episodes(snap.slice, state, events)
        return IngestResult(diagnosis, tuple(events), ts)

    def latest_verdicts(self) -> dict[str, tuple[Diagnosis, SliceSnapshot]]:
        """Each slice's latest diagnosis and its window (reference filled in) since this process started:
        what ``GET /v1/slices/{slice}`` serves, as objects (a co-located controller's source)."""
        with self._lock:
            return dict(self._latest)

    def set_reference(self, slice_name: str, reference: Reference) -> Reference:
        configured = dataclasses.replace(reference, source="configured")
        self.store.set_reference(slice_name, configured, self.clock())
        return configured
