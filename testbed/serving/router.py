"""Ray Serve's request router for one deployment, as pure bookkeeping (no I/O, no clock).

Each request goes to a routable replica with fewer than ``max_ongoing_requests`` in flight, the
less loaded of two drawn at random (power of two choices, Ray Serve's default); when none has room
the request waits in a FIFO queue at the router. That queue is the queue-limited regime: TTFT grows
while each replica's batch, hence TPOT, stays small.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass


@dataclass
class _Slot:
    in_flight: int = 0
    routable: bool = False


class RouterCore:
    def __init__(self, max_ongoing_requests: int, seed: int = 0) -> None:
        if max_ongoing_requests < 1:
            raise ValueError("max_ongoing_requests must be >= 1")
        self.max_ongoing = max_ongoing_requests
        self._rng = random.Random(seed)
        self._slots: dict[str, _Slot] = {}
        self._queue: deque[Hashable] = deque()

    # -- replicas ----------------------------------------------------------------------------
    def add_replica(self, replica_id: str, routable: bool = False) -> None:
        self._slots.setdefault(replica_id, _Slot()).routable = routable

    def set_routable(self, replica_id: str, routable: bool) -> None:
        if replica_id in self._slots:
            self._slots[replica_id].routable = routable

    def remove_replica(self, replica_id: str) -> None:
        self._slots.pop(replica_id, None)

    def replica_ids(self) -> list[str]:
        return list(self._slots)

    def in_flight(self, replica_id: str) -> int:
        slot = self._slots.get(replica_id)
        return slot.in_flight if slot else 0

    def is_routable(self, replica_id: str) -> bool:
        slot = self._slots.get(replica_id)
        return bool(slot and slot.routable)

    # -- requests ----------------------------------------------------------------------------
    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def ongoing(self) -> int:
        """Running at replicas plus queued at the router: what Ray's autoscaler averages."""
        return sum(s.in_flight for s in self._slots.values()) + len(self._queue)

    def choose(self) -> str | None:
        """A replica with room (power of two choices), or None when every one is full."""
        free = [rid for rid, s in self._slots.items() if s.routable and s.in_flight < self.max_ongoing]
        if not free:
            return None
        if len(free) == 1:
            return free[0]
        a, b = self._rng.sample(free, 2)
        return a if self._slots[a].in_flight <= self._slots[b].in_flight else b

    def try_assign(self, token: Hashable) -> str | None:
        """Assign a new request now, or queue it (FIFO: nobody overtakes a queued request)."""
        if not self._queue:
            rid = self.choose()
            if rid is not None:
                self._slots[rid].in_flight += 1
                return rid
        self._queue.append(token)
        return None

    def cancel(self, token: Hashable) -> bool:
        try:
            self._queue.remove(token)
        except ValueError:
            return False
        return True

    def release(self, replica_id: str) -> None:
        slot = self._slots.get(replica_id)
        if slot is not None and slot.in_flight > 0:
            slot.in_flight -= 1

    def dispatch(self) -> list[tuple[Hashable, str]]:
        """Hand queued requests, oldest first, to replicas that have room."""
        out: list[tuple[Hashable, str]] = []
        while self._queue:
            rid = self.choose()
            if rid is None:
                break
            token = self._queue.popleft()
            self._slots[rid].in_flight += 1
            out.append((token, rid))
        return out
