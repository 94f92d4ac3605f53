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
- in ``ingest`` (not ``diagnose``, which keeps no state), the GPU share of the slice's window before
  (``prior_gpu_share``: the latest diagnosed window that ended by this one's start), where the
  window carries none;

and one way a reference reaches ``classify``: the slice's stored reference (configured through
``PUT .../reference``, or learned here from healthy windows; ``bottleneck.reference`` is the one
learner), passed as ``classify``'s ``reference`` argument once it may judge (``reference_for``).
A posted snapshot's own ``ref_*`` fields take precedence field by field, as ``classify`` documents;
nothing else fills them (the collectors produce snapshots without references).

The service keeps each slice's reference and episode state in memory (read from the store once, then
advanced here under one lock, so a window always sees its predecessor's state), and writes them
through. ``ingest`` writes before it returns (the diagnosis loop, inside its round's transaction);
``ingest_deferred`` hands the writes to the store's writer thread (group commit) and returns a
future that resolves once they committed: the API answers a POST then, without holding a request
thread for the database. A failed write makes the service forget that slice's state, which is read
back from the store on its next window.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from inferslice.bottleneck import DEFAULT, EpisodeEvent, EpisodeState, HysteresisPolicy, Thresholds, classify, learn_reference, step
from inferslice.bottleneck.episodes import DEFAULT_HYSTERESIS
from inferslice.bottleneck.reference import DEFAULT_LEARNING, LearningPolicy, usable_reference
from inferslice.diagnosis import Diagnosis
from inferslice.service.store import Store
from inferslice.snapshot import Reference, SliceSnapshot, with_configured_slos
from inferslice.topology import Tier, Topology

REFERENCE_WRITE_S = 30.0  # a learned reference reaches the store at most this often: a crash loses <= 15 windows of learning


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
    if snap.replicas_max is not None:
        return snap
    return dataclasses.replace(snap, replicas_max=float(tier.replicas_max))


SHARE_HISTORY = 16  # windows of each slice's GPU share kept: 8 s windows every 2 s need 4 to reach the one before


def prior_gpu_share(snap: SliceSnapshot, history: Sequence[tuple[float, float]]) -> float | None:
    """The GPU share reported by the slice's window before this one: of the windows diagnosed so far
    (``history``: window end, share), the latest that ended by this one's start and no more than half
    a window before it (windows overlap when the loop steps faster than their length; a missed
    round leaves none). None where the window carries its own, or its end or length is unknown."""
    end, length = snap.window_end_s, snap.window_s
    if snap.prior_gpu_share is not None or end is None or not length:
        return None
    start = end - length
    before = [(e, share) for e, share in history if start - 0.5 * length <= e <= start + 1e-6]
    return max(before)[1] if before else None


class ShareHistory:
    """Each slice's recent (window end, GPU share), and a window's ``prior_gpu_share`` read from them:
    the diagnosis service keeps one, and so does a benchmark that classifies as the service would."""

    def __init__(self, keep: int = SHARE_HISTORY) -> None:
        self._keep = keep
        self._by_slice: dict[str, deque[tuple[float, float]]] = {}

    def fill(self, snap: SliceSnapshot) -> SliceSnapshot:
        """The window with the share of the one before (where it carries none), recorded for the next."""
        history = self._by_slice.setdefault(snap.slice, deque(maxlen=self._keep))
        prior = prior_gpu_share(snap, history)
        if snap.window_end_s is not None and snap.gpu_share is not None:
            history.append((snap.window_end_s, snap.gpu_share))
        return dataclasses.replace(snap, prior_gpu_share=prior) if prior is not None else snap


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
        self._refs: dict[str, Reference | None] = {}  # the store's, once read; written through
        self._states: dict[str, EpisodeState] = {}
        self._ref_saved_s: dict[str, float] = {}  # window end at which each slice's learned reference was last written
        # Each slice's latest verdict as objects, for a controller in this process (``latest_verdicts``):
        # the diagnosis and the window it judged, with the slice's reference filled in.
        self._latest: dict[str, tuple[Diagnosis, SliceSnapshot, Reference | None]] = {}
        self._shares = ShareHistory()  # each slice's recent GPU shares: ``prior_gpu_share``

    def known_slices(self) -> list[str]:
        configured = self.topology.tier_names if self.topology is not None else []
        return configured + [s for s in self.store.slices() if s not in configured]

    def is_known(self, slice_name: str) -> bool:
        return tier_of(self.topology, slice_name) is not None or self.store.has_slice(slice_name)

    def prepare(self, snapshot: SliceSnapshot) -> SliceSnapshot:
        """The window with what the tiers file says about its slice (SLOs win, the ceiling fills in)."""
        return with_tier_defaults(snapshot, tier_of(self.topology, snapshot.slice))

    def _reference(self, slice_name: str) -> Reference | None:
        if slice_name not in self._refs:
            self._refs[slice_name] = self.store.reference(slice_name)
        return self._refs[slice_name]

    def _episode_state(self, slice_name: str) -> EpisodeState:
        state = self._states.get(slice_name)
        if state is None:
            state = self._states[slice_name] = self.store.episode_state(slice_name)
        return state

    def _forget(self, slice_name: str) -> None:
        with self._lock:
            self._refs.pop(slice_name, None)
            self._states.pop(slice_name, None)

    def reference_for(self, slice_name: str) -> Reference | None:
        """The slice's stored reference when it may judge (configured, or learned from enough windows)."""
        with self._lock:
            return usable_reference(self._reference(slice_name), self.learning)

    def diagnose(self, snapshot: SliceSnapshot) -> Diagnosis:
        """Classify without storing anything (``POST /v1/diagnose``)."""
        return classify(self.prepare(snapshot), self.reference_for(snapshot.slice), self.thresholds)

    def _advance(self, snapshot: SliceSnapshot) -> tuple[IngestResult, Callable[[], None]]:
        """Classify one window, learn the reference, step the episodes, in memory (under ``_lock``);
        the result and the unit of writes that stores it all."""
        snap = self.prepare(snapshot)
        now = self.clock()
        ts = snap.window_end_s if snap.window_end_s is not None else now
        snap = self._shares.fill(snap)
        reference = self._reference(snap.slice)
        diagnosis = classify(snap, usable_reference(reference, self.learning), self.thresholds)
        learned: Reference | None = None
        if self.learning is not None and snap.reference() is None:
            learned = learn_reference(reference, snap, diagnosis, self.learning)
            if learned is not None and learned != reference:
                self._refs[snap.slice] = reference = learned
                # The learner moves a little with every healthy window; the store gets it every
                # REFERENCE_WRITE_S (and the first time), the service holds the current one.
                last = self._ref_saved_s.get(snap.slice)
                if last is None or ts - last >= REFERENCE_WRITE_S or ts < last:
                    self._ref_saved_s[snap.slice] = ts
                else:
                    learned = None
            else:
                learned = None
        self._latest[snap.slice] = (diagnosis, snap, reference)
        previous = self._episode_state(snap.slice)
        state, events = step(previous, diagnosis, ts, self.hysteresis)
        self._states[snap.slice] = state
        changed = bool(events) or state != previous  # a healthy slice's machine mostly stands still: no write
        store = self.store

        def unit() -> None:
            with store.atomic():
                store.record(snap, diagnosis, ts)
                if learned is not None:
                    store.set_reference(snap.slice, learned, now)
                if changed:
                    store.save_episodes(snap.slice, state, events)

        return IngestResult(diagnosis, tuple(events), ts), unit

    def ingest(self, snapshot: SliceSnapshot) -> IngestResult:
        """Classify one window, store snapshot and diagnosis, learn the reference, step the episodes."""
        with self._lock:
            result, unit = self._advance(snapshot)
            try:
                unit()
            except BaseException:
                self._refs.pop(snapshot.slice, None)
                self._states.pop(snapshot.slice, None)
                raise
        return result

    def ingest_deferred(self, snapshot: SliceSnapshot) -> tuple[IngestResult, Future[None]]:
        """``ingest`` with the writes in the store's next group commit: the result now, and a future
        that resolves when it is durable (or fails: the slice's state is then read back from the store)."""
        with self._lock:
            result, unit = self._advance(snapshot)
            durable = self.store.submit(unit)
        durable.add_done_callback(lambda f: self._forget(snapshot.slice) if f.exception() is not None else None)
        return result, durable

    def latest_verdicts(self) -> dict[str, tuple[Diagnosis, SliceSnapshot]]:
        """Each slice's latest diagnosis and its window (reference filled in) since this process started:
        what ``GET /v1/slices/{slice}`` serves, as objects (a co-located controller's source)."""
        with self._lock:
            latest = dict(self._latest)
        # The reference is filled in here, for the slices asked about, not in every ingest of a round.
        return {k: (d, snap.with_reference(ref) if ref is not None else snap) for k, (d, snap, ref) in latest.items()}

    def current_reference(self, slice_name: str) -> Reference | None:
        """The slice's reference as the classifier sees it now (the store's may lag by ``REFERENCE_WRITE_S``)."""
        with self._lock:
            return self._reference(slice_name)

    def set_reference(self, slice_name: str, reference: Reference) -> Reference:
        configured = dataclasses.replace(reference, source="configured")
        now = self.clock()
        with self._lock:
            self._refs[slice_name] = configured
            # Through the writer: a learned reference queued before this one must not land after it.
            durable = self.store.submit(lambda: self.store.set_reference(slice_name, configured, now))
        try:
            durable.result()
        except BaseException:
            self._forget(slice_name)
            raise
        return configured
