"""What the control benchmark's policies read and change, on either backend (one interface).

Every policy (``bench/control_policies.py``) sees a serving stack only through ``Backend``: the
clock, each tier's replica target, its router queue and ongoing requests, each ready replica's
load (streams in flight, KV-cache usage) and ``set_replicas``; inferslice's controller acts through
``actuator(log)``. Two implementations:

- ``ModelBackend`` over ``ServingSim`` (``bench/control_sim.py``), the fast default;
- ``TestbedBackend`` (``bench/control_testbed_backend.py``) over the netns testbed: the fronts'
  ``GET /admin/state`` and the engines' ``/metrics``, mapped by ``tier_reading`` below (pure).

So the peer classes run unchanged on both; only the measurements differ (the model's KV usage is a
proxy, the testbed's is what the engine reports).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from inferslice.actions import Action, ActionKind
from inferslice.bench.control_sim import ServingSim
from inferslice.common.exposition import parse_exposition
from inferslice.control.actuators.base import Actuator, ApplyResult, ApplyStatus, ReplicaPlacement, TierObservation, require_kind
from inferslice.errors import ParseError
from inferslice.topology import parse_slot

KV_PROXY_AT_LIMIT = 0.85  # the model's KV proxy: a replica at its admission limit is as full as vLLM's KV gets at this load
KV_NAMES = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # V1 name first, the older one engines still emit


@dataclass
class ActionLog:
    """What a policy did, for the summary (every policy's actions are counted the same way)."""

    entries: list[tuple[float, str, str, float | str | None, float | str | None]] = field(
        default_factory=list
    )  # (t, tier, kind, value, previous)
    replica_of: dict[int, str] = field(default_factory=dict)  # entry index -> the replica a relocation moved

    def add(
        self, t: float, tier: str, kind: str, value: float | str | None, previous: float | str | None, replica: str | None = None
    ) -> None:
        if replica is not None:
            self.replica_of[len(self.entries)] = replica
        self.entries.append((t, tier, kind, value, previous))


@dataclass(frozen=True)
class ReplicaLoad:
    id: str
    slot: str  # "london/gpu1"
    state: str  # starting | ready | draining
    running: int  # streams in flight on this replica
    kv_usage: float | None  # 0..1; None: not reported
    gpu_share: float = 1.0
    index: int | None = None  # the front's slot number: a move's successor shares its predecessor's; None: not reported


@dataclass(frozen=True)
class TierReading:
    """One tier as a policy sees it at one instant."""

    target: int
    queued: int  # in the tier's router queue (waiting for a replica slot)
    ongoing: int  # queued + in flight
    replicas: tuple[ReplicaLoad, ...] = ()
    cap_bps: float | None = None

    @property
    def ready(self) -> tuple[ReplicaLoad, ...]:
        return tuple(r for r in self.replicas if r.state == "ready")


class Backend(Protocol):
    @property
    def t(self) -> float: ...

    def reading(self, tier: str) -> TierReading: ...

    def set_replicas(self, tier: str, n: int, *, instant: bool = False) -> None: ...

    def actuator(self, log: ActionLog) -> Actuator: ...

    def path_excess_s(self) -> Mapping[str, float]:
        """PoP -> how much slower than configured its WAN path to the gateway is (the PoP prober's reading)."""
        ...


# -- the model ------------------------------------------------------------------------------------
class ModelBackend:
    def __init__(self, sim: ServingSim) -> None:
        self.sim = sim

    @property
    def t(self) -> float:
        return self.sim.t

    def reading(self, tier: str) -> TierReading:
        ts = self.sim.tiers[tier]
        reps = tuple(
            ReplicaLoad(
                r.id,
                r.slot,
                r.state,
                len(r.streams),
                len(r.streams) / ts.max_ongoing * KV_PROXY_AT_LIMIT,
                self.sim.share_of(r.slot, self.sim.t),
            )
            for r in ts.replicas
        )
        return TierReading(ts.target, len(ts.queue), self.sim.ongoing_now(tier), reps, ts.cap_bps)

    def set_replicas(self, tier: str, n: int, *, instant: bool = False) -> None:
        self.sim.set_replicas(tier, n, instant=instant)

    def actuator(self, log: ActionLog) -> Actuator:
        return SimActuator(self.sim, log, lambda: self.sim.t)

    def path_excess_s(self) -> Mapping[str, float]:
        return {p.name: self.sim.path_excess_s(p.name) for p in self.sim.top.pops}


class SimActuator:
    """The Actuator protocol over the model (idempotent by id: values are absolute targets)."""

    name = "sim"
    kinds = frozenset({ActionKind.SET_REPLICAS, ActionKind.SET_CAP, ActionKind.RELOCATE})

    def __init__(self, sim: ServingSim, log: ActionLog, clock: Callable[[], float]) -> None:
        self.sim, self.log, self.clock = sim, log, clock
        self.applied: set[str] = set()

    def observe(self) -> Mapping[str, TierObservation]:
        out = {}
        for name, ts in self.sim.tiers.items():
            reps = tuple(
                ReplicaPlacement(
                    r.id, r.pop, r.gpu, "stopping" if r.state == "draining" else r.state, self.sim.share_of(r.slot, self.sim.t)
                )
                for r in ts.replicas
            )
            out[name] = TierObservation(name, ts.target, reps, ts.cap_bps)
        return out

    def apply(self, action: Action) -> ApplyResult:
        require_kind(self, action)
        if action.id in self.applied:
            return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED)
        now = self.clock()
        ts = self.sim.tiers[action.slice]
        if action.kind is ActionKind.SET_REPLICAS and isinstance(action.value, (int, float)):
            n = int(action.value)
            self.log.add(now, action.slice, "scale_out" if n > ts.target else "scale_in", n, ts.target)
            self.sim.set_replicas(action.slice, n)
        elif action.kind is ActionKind.SET_CAP and isinstance(action.value, (int, float)):
            self.log.add(now, action.slice, "cap_change", float(action.value), ts.cap_bps)
            self.sim.set_cap(action.slice, float(action.value))
        elif action.kind is ActionKind.RELOCATE and isinstance(action.value, str) and action.replica:
            self.log.add(now, action.slice, "relocation", action.value, action.previous, replica=action.replica)
            self.sim.relocate(action.slice, action.replica, action.value)
        self.applied.add(action.id)
        return ApplyResult(action.id, ApplyStatus.APPLIED)


# -- the testbed's measurements (pure) --------------------------------------------------------------
def kv_usage(exposition: str) -> float | None:
    """An engine's KV-cache usage (0..1) from its /metrics text; None when it does not say."""
    try:
        exp = parse_exposition(exposition, keep=lambda name: name in KV_NAMES)
    except ParseError:
        return None
    for name in KV_NAMES:
        values = [s.value for s in exp.samples(name)]
        if values:
            return max(values)  # data-parallel engines: the fullest one binds
    return None


REPLICA_STATES = {"starting": "starting", "ready": "ready", "stopping": "draining", "draining": "draining"}


def tier_reading(state: Mapping[str, object], kv: Mapping[str, float | None], cap_bps: float | None = None) -> TierReading:
    """The front's ``GET /admin/state`` body and each replica's KV usage -> what a policy reads.

    Replica states the front reports: starting (cold-starting), ready, stopping (draining its
    streams; it takes no new work), anything else (failed) counts as starting: not serving."""
    reps = []
    raw = state.get("replicas")
    for r in raw if isinstance(raw, list) else []:
        if not isinstance(r, Mapping):
            continue
        rid = str(r.get("id"))
        slot = f"{r.get('pop')}/gpu{r.get('gpu')}"
        parse_slot(slot)  # a malformed entry fails loudly, not as a wrong placement
        share = r.get("gpu_share")
        reps.append(
            ReplicaLoad(
                rid,
                slot,
                REPLICA_STATES.get(str(r.get("state")), "starting"),
                int(_num(r.get("in_flight"))),
                kv.get(rid),
                float(share) if isinstance(share, (int, float)) else 1.0,
                _index(r.get("slot")),
            )
        )
    queued = int(_num(state.get("queued")))
    ongoing = int(_num(state.get("ongoing")))
    return TierReading(int(_num(state.get("target"))), queued, max(ongoing, queued), tuple(reps), cap_bps)


def _index(x: object) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _num(x: object) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0.0
