"""The control benchmark's ``Backend`` on the netns testbed (the I/O shell; the mapping is
``control_backend.tier_reading``).

Reads: each tier front's ``GET /admin/state`` (through the front's one client) (target, replicas with state/PoP/GPU/share/in-flight,
router queue, ongoing) and each live replica's own ``/metrics`` (the engine's KV-cache gauge), once
per ``refresh()``; policies read the cached ``reading`` in between (a policy may ask many times per
tick, the fronts should be asked once). Writes: replica counts through the fronts' admin API
(``testbed.ops.set_replicas``); inferslice's controller acts through the real ``TestbedActuator``
(replicas, HTB caps, make-before-break moves), wrapped so its actions are counted like every
policy's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from inferslice.actions import Action, ActionKind
from inferslice.bench.control_backend import ActionLog, ReplicaLoad, TierReading, kv_usage, tier_reading
from inferslice.common.registry import read_registry
from inferslice.control.actuators.base import Actuator, ApplyResult, ApplyStatus, TierObservation
from inferslice.control.actuators.testbed import TestbedActuator
from inferslice.errors import PermanentError, RetryableError
from inferslice.testbed.ops import set_gpu_share, set_replicas
from inferslice.testbed.serving.front_client import FrontClient
from inferslice.topology import Topology

READ_TIMEOUT_S = 2.0  # a front or engine slower than this on loopback is stuck; the tick goes on with the last reading


class TestbedBackend:
    __test__ = False  # not a pytest class

    def __init__(self, top: Topology, state_dir: Path) -> None:
        self.top, self.state_dir = top, state_dir
        self.client = httpx.Client(timeout=READ_TIMEOUT_S)
        self.t0 = time.monotonic()
        self.readings: dict[str, TierReading] = {t: TierReading(0, 0, 0) for t in top.tier_names}
        self.misses = 0  # reads that failed (reported with the run)
        self.paths: dict[str, float] = {}  # PoP -> its WAN path's RTT above the configured one (set by the runner from the prober)

    @property
    def t(self) -> float:
        return time.monotonic() - self.t0

    def restart_clock(self) -> None:
        self.t0 = time.monotonic()

    def refresh(self) -> None:
        reg = read_registry(self.state_dir)
        for tier in self.top.tier_names:
            front = reg.front(tier)
            if front is None:
                continue
            try:
                state = FrontClient(front.admin_url, self.client).state_json()
            except (RetryableError, PermanentError):
                self.misses += 1
                continue
            kv: dict[str, float | None] = {}
            for r in state.get("replicas", []):
                if r.get("state") == "ready" and r.get("url"):
                    kv[str(r["id"])] = self._kv(str(r["url"]))
            cap = next((lk.cap_bps for lk in reg.links if lk.kind == "access" and lk.tier == tier and lk.direction == "receive"), None)
            self.readings[tier] = tier_reading(state, kv, cap)

    def _kv(self, url: str) -> float | None:
        try:
            return kv_usage(self.client.get(f"{url.rstrip('/')}/metrics").text)
        except httpx.HTTPError:
            self.misses += 1
            return None

    def reading(self, tier: str) -> TierReading:
        return self.readings[tier]

    def set_replicas(self, tier: str, n: int, *, instant: bool = False) -> None:
        """``instant`` (a policy's starting count) is honoured by the runner, which waits for the cold starts before t = 0."""
        try:
            set_replicas(tier, n, self.state_dir)
        except RetryableError:  # a front that did not answer in time: the policy sees the old target and asks again
            self.misses += 1
            return
        r = self.readings[tier]
        self.readings[tier] = TierReading(n, r.queued, r.ongoing, r.replicas, r.cap_bps)

    def set_share(self, replica: ReplicaLoad, tier: str, share: float) -> None:
        """Best effort: the replica may have been retired since the last read (the next tick sees the set as it is)."""
        try:
            set_gpu_share(tier, share, self.state_dir, replica=replica.id)
        except (PermanentError, RetryableError):
            self.misses += 1

    def actuator(self, log: ActionLog) -> Actuator:
        return CountingActuator(TestbedActuator(self.state_dir), log, lambda: self.t)

    def path_excess_s(self) -> Mapping[str, float]:
        return dict(self.paths)


class CountingActuator:
    """The real actuator, with each newly applied action entered in the bench's log (once per id)."""

    def __init__(self, inner: TestbedActuator, log: ActionLog, clock: Callable[[], float]) -> None:
        self.inner, self.log, self.clock = inner, log, clock
        self.name = inner.name
        self.kinds = inner.kinds
        self.counted: set[str] = set()
        self.targets: dict[str, int] = {}

    def observe(self) -> Mapping[str, TierObservation]:
        obs = self.inner.observe()
        self.targets = {t: o.replicas_target for t, o in obs.items()}
        return obs

    def apply(self, action: Action) -> ApplyResult:
        res = self.inner.apply(action)
        if action.id not in self.counted and res.status in (ApplyStatus.APPLIED, ApplyStatus.IN_PROGRESS):
            self.counted.add(action.id)
            now = self.clock()
            if action.kind is ActionKind.SET_REPLICAS and isinstance(action.value, (int, float)):
                prev = self.targets.get(action.slice, action.previous if isinstance(action.previous, int) else 0)
                n = int(action.value)
                self.log.add(now, action.slice, "scale_out" if n > prev else "scale_in", n, prev)
                self.targets[action.slice] = n
            elif action.kind is ActionKind.SET_CAP:
                self.log.add(now, action.slice, "cap_change", action.value, action.previous)
            elif action.kind is ActionKind.RELOCATE:
                self.log.add(now, action.slice, "relocation", action.value, action.previous)
        return res
