"""The diagnosis loop sharded by PoP group: one Kubernetes Lease per group, N replicas.

A fleet of 10,000 slices is more than one loop's core. The slices are split into ``groups`` by the
PoP they live at (their first placement slot), with the same hash Prometheus Operator shards its
targets by (``hashmod``, md5 of the PoP name), so diagnosis group *k* and Prometheus shard *k*
cover the same PoPs when their counts agree. Each group has a Lease
(``inferslice-diagnosis-<k>``); a replica runs a group's rounds only while it holds its Lease
(``service.lease.LeaseElector``, the one elector: leadership counted from
when a renew was sent, every call under a request timeout), re-checked immediately before the
round's verdicts are stored.

Who holds what: replica *r* (a StatefulSet ordinal) competes for group ``r % groups`` from the
start, and for every other group only after ``takeover_after_s`` (one Lease duration by default),
so at start-up each replica gets its own group rather than whichever it asked first. After that, a
group whose holder stops renewing is taken over by whoever sees its Lease silent for a Lease
duration (the elector's rule), so a dead replica's group moves within ~2 Lease durations. A
replica that comes back does not take its group back from a live holder (no handback: it stays
where it is until that holder dies or is restarted).

What a takeover costs: the new holder diagnoses the group from its next round, but its store holds
none of the group's history, references or episodes (each replica keeps its own SQLite): learned
references are learned again (the tiers file's SLOs and any reference configured through the
owner's API are not moved). See docs/scale.md.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from inferslice.collectors import MetricSource
from inferslice.errors import InferSliceError
from inferslice.service.loop import Ingest, LoopSettings
from inferslice.topology import Tier, Topology, parse_slot

log = logging.getLogger(__name__)

LEASE_PREFIX = "inferslice-diagnosis-"


def hashmod(value: str, modulus: int) -> int:
    """Prometheus's relabel ``hashmod``: the last 8 bytes of md5(value), big-endian, modulo ``modulus``."""
    if modulus < 1:
        raise ValueError("modulus must be >= 1")
    return int.from_bytes(hashlib.md5(value.encode(), usedforsecurity=False).digest()[8:], "big") % modulus


def home_pop(tier: Tier) -> str:
    """Where a slice lives for sharding: the PoP of its first placement slot."""
    return parse_slot(tier.placement[0])[0]


@dataclass(frozen=True)
class Group:
    index: int
    slices: tuple[str, ...]
    pops: tuple[str, ...]  # every PoP its slices have series at: placements and the client gateway


def groups_of(topology: Topology, groups: int) -> list[Group]:
    """The slices of each group (by their home PoP's hash) and the PoPs its queries must cover."""
    slices: list[list[str]] = [[] for _ in range(groups)]
    pops: list[set[str]] = [set() for _ in range(groups)]
    for tier in topology.tiers:
        k = hashmod(home_pop(tier), groups)
        slices[k].append(tier.name)
        pops[k].update(parse_slot(slot)[0] for slot in tier.placement)
        pops[k].add(topology.client.gateway)  # the client edge's series are labelled with the gateway's PoP
    return [Group(k, tuple(slices[k]), tuple(sorted(pops[k])) if slices[k] else ()) for k in range(groups)]


def lease_name(group: int) -> str:
    return f"{LEASE_PREFIX}{group}"


def ordinal(identity: str) -> int | None:
    """A StatefulSet pod's ordinal (``inferslice-api-2`` -> 2), None for any other name."""
    tail = identity.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


class GroupLease(Protocol):
    """One group's Lease as this replica sees it (``LeaseElector`` is one)."""

    def try_acquire_or_renew(self) -> bool: ...

    def is_leader(self) -> bool: ...

    def holder(self) -> str | None: ...

    def release(self) -> bool: ...


@dataclass(frozen=True)
class ShardSettings:
    groups: int = 1  # PoP groups (one Lease each); 1: no sharding
    preferred: int | None = None  # the group this replica competes for from the start (its ordinal % groups)
    takeover_after_s: float = 15.0  # the Lease duration: others' groups only after their owners could take theirs

    def __post_init__(self) -> None:
        if self.groups < 1:
            raise ValueError("groups must be >= 1")
        if self.preferred is not None and not 0 <= self.preferred < self.groups:
            raise ValueError(f"preferred group {self.preferred} outside 0..{self.groups - 1}")


@dataclass
class GroupStats:
    rounds: int = 0
    failures: int = 0
    skipped_not_leader: int = 0  # rounds whose verdicts were dropped: the Lease ended mid-round
    last_round_s: float | None = None  # wall time of the last round
    last_error: str | None = None


@dataclass
class _Running:
    group: Group
    source: MetricSource
    stats: GroupStats = field(default_factory=GroupStats)


class ShardedDiagnosis:
    """The diagnosis rounds of the groups this replica holds. ``tick`` is one retry period: every
    Lease it competes for is renewed or tried, then each held group's round runs."""

    def __init__(
        self,
        groups: Sequence[Group],
        make_source: Callable[[Group], MetricSource],
        ingest: Ingest,
        leases: Callable[[int], GroupLease],
        settings: ShardSettings,
        loop: LoopSettings | None = None,
        batch: Callable[[], AbstractContextManager[Any]] | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.groups = list(groups)
        self.settings = settings
        self.loop = loop or LoopSettings()
        self.ingest = ingest
        self.batch = batch
        self.clock = clock
        self.monotonic = monotonic
        self._make_source = make_source
        self._leases = {g.index: leases(g.index) for g in self.groups}
        self._running: dict[int, _Running] = {}
        self._started = monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- who holds what ------------------------------------------------------------------------
    def competes_for(self, group: int) -> bool:
        if self.settings.groups == 1 or group == self.settings.preferred:
            return True
        return self.monotonic() - self._started >= self.settings.takeover_after_s

    def held(self) -> list[int]:
        return [k for k, lease in self._leases.items() if lease.is_leader()]

    def holder_of(self, group: int) -> str | None:
        return self._leases[group].holder()

    def group_of_slice(self, slice_name: str) -> Group | None:
        return next((g for g in self.groups if slice_name in g.slices), None)

    def stats(self) -> dict[int, GroupStats]:
        with self._lock:
            return {k: r.stats for k, r in self._running.items()}

    # -- one retry period ----------------------------------------------------------------------
    def renew(self) -> list[int]:
        """Renew or try every Lease this replica competes for now; the groups it holds after."""
        for k, lease in self._leases.items():
            if self.competes_for(k) or lease.is_leader():
                try:
                    lease.try_acquire_or_renew()
                except InferSliceError as err:  # a permanent Lease error (403): this group is not ours to run
                    log.error("lease %s: %s", lease_name(k), err)
        held = self.held()
        with self._lock:
            for k in list(self._running):
                if k not in held:
                    log.info("diagnosis group %d: no longer held here", k)
                    self._close(self._running.pop(k))
            for k in held:
                if k not in self._running:
                    group = next(g for g in self.groups if g.index == k)
                    log.info("diagnosis group %d (%d slices) now held here", k, len(group.slices))
                    self._running[k] = _Running(group, self._make_source(group))
        return held

    def run_round(self, group: int, now_s: float | None = None) -> int:
        """One round of a held group: read its window, and store the verdicts if still leading then."""
        with self._lock:
            running = self._running.get(group)
        if running is None:
            return 0
        now = self.clock() if now_s is None else now_s
        started = time.perf_counter()
        try:
            running.source.poll(now)
            snaps = running.source.snapshots(now, self.loop.window_s)
        except InferSliceError as err:
            running.stats.failures += 1
            running.stats.last_error = str(err)
            log.warning("diagnosis group %d: window at %.0f skipped: %s", group, now, err)
            return 0
        if not self._leases[group].is_leader():  # the Lease ended while the source answered
            running.stats.skipped_not_leader += 1
            return 0
        with self.batch() if self.batch is not None else _null():
            for snap in snaps:
                self.ingest(snap)
        running.stats.rounds += 1
        running.stats.last_round_s = time.perf_counter() - started
        return len(snaps)

    def tick(self, now_s: float | None = None) -> dict[int, int]:
        """Renew, then a round of every held group: group -> snapshots ingested."""
        return {k: self.run_round(k, now_s) for k in self.renew()}

    # -- the thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        next_at = self.monotonic()
        while not self._stop.is_set():
            self.tick()
            next_at += self.loop.interval_s
            self._stop.wait(max(0.0, next_at - self.monotonic()))

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="diagnosis-shards", daemon=True)
            self._thread.start()

    def stop(self, release: bool = True) -> None:
        """Stop the rounds; ``release`` hands the held Leases back at once (a clean shutdown)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.loop.interval_s + 10.0)
            self._thread = None
        with self._lock:
            for running in self._running.values():
                self._close(running)
            self._running.clear()
        if release:
            for lease in self._leases.values():
                if lease.is_leader():
                    lease.release()

    @staticmethod
    def _close(running: _Running) -> None:
        close = getattr(running.source, "close", None)
        if callable(close):
            close()


class _null(AbstractContextManager[None]):
    def __exit__(self, *exc: object) -> None:
        return None


def describe(groups: Iterable[Group]) -> str:
    return ", ".join(f"{g.index}: {len(g.slices)} slices at {len(g.pops)} PoPs" for g in groups)
