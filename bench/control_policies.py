"""The policies the control benchmark compares, each behind one interface.

Peers follow their documentation and code (the project's CONTRACTS.md, "Peers' autoscaling
policies"), with every time constant multiplied by ``time_scale`` = testbed cold start / the paper's
285 s (the Run:ai-streamer cold start, the peers' most favourable case), the same compression the
testbed applies to cold starts:

- static: the paper's setting, every tier at its ceiling (1 / 3 / 6) all the time;
- ray_serve_default: Ray Serve's default policy (``testbed/serving/autoscale.py``: mean ongoing over
  look_back_period / target_ongoing_requests, upscale/downscale delays 30 / 600 s);
- keda: vLLM production-stack's KEDA trigger, ``vllm:num_requests_waiting`` > 5 (AverageValue:
  desired = ceil(waiting / 5)), polling 15 s, cooldown 360 s before scaling in;
- wva: llm-d workload-variant-autoscaler's saturation analyzer (a replica is saturated at KV >= 0.8
  or queue >= 5; +1 when spare KV < 0.1 or spare queue < 3; -1 only if the load fits one fewer and
  >= 2 replicas are non-saturated; peak metrics over 60 s, reconcile 60 s);
- ttft_threshold: +1 when P99 TTFT exceeds the SLO (at most every 30 s), -1 after 360 s under half of it;
- inferslice: this project's controller (``service.controller.Controller`` in auto mode, with the
  real ``decide``, ``guard`` and audit log) diagnosing with the real classifier.

``register_policy`` adds more (the engines helper plugs in Ray Serve run for real).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from inferslice.actions import Action, ActionKind
from inferslice.bench.control_sim import BASE_TPOT_S, PER_SEQ_TPOT_S, TOKENS_MEAN, ServingSim
from inferslice.control.actuators.base import ApplyResult, ApplyStatus, ReplicaPlacement, TierObservation, require_kind
from inferslice.control.settings import ControlSettings, tier_policies
from inferslice.diagnosis import Diagnosis
from inferslice.service.control_audit import AuditLog
from inferslice.service.controller import Controller, Mode
from inferslice.snapshot import SliceSnapshot
from inferslice.testbed.serving import autoscale
from inferslice.topology import Topology

PAPER_COLD_START_S = 285.0  # brief: ~285 s per pod with the Run:ai model streamer


@dataclass
class ActionLog:
    """What a policy did, for the summary (every policy's actions are counted the same way)."""

    entries: list[tuple[float, str, str, float | str | None, float | str | None]] = field(
        default_factory=list
    )  # (t, tier, kind, value, previous)

    def add(self, t: float, tier: str, kind: str, value: float | str | None, previous: float | str | None) -> None:
        self.entries.append((t, tier, kind, value, previous))


class SimPolicy:
    name = "base"

    def setup(self, sim: ServingSim, top: Topology, log: ActionLog) -> None:
        self.sim, self.top, self.log = sim, top, log
        for t in top.tiers:
            sim.set_replicas(t.name, max(1, t.replicas_min), instant=True)

    def tick(self, now: float, windows: Mapping[str, SliceSnapshot] | None, diagnoses: Mapping[str, Diagnosis] | None) -> None:
        """Called every simulation step; ``windows`` / ``diagnoses`` only when a window just closed."""

    def scale(self, now: float, tier: str, n: int) -> None:
        t = self.top.tier(tier)
        n = max(max(1, t.replicas_min), min(t.replicas_max, n))
        cur = self.sim.tiers[tier].target
        if n != cur:
            self.sim.set_replicas(tier, n)
            self.log.add(now, tier, "scale_out" if n > cur else "scale_in", n, cur)


class Static(SimPolicy):
    name = "static"

    def setup(self, sim: ServingSim, top: Topology, log: ActionLog) -> None:
        self.sim, self.top, self.log = sim, top, log
        for t in top.tiers:
            sim.set_replicas(t.name, t.replicas_max, instant=True)


class Periodic(SimPolicy):
    """A peer that acts every ``period_s``."""

    period_s = 1.0

    def __init__(self, time_scale: float) -> None:
        self.f = time_scale
        self.next_s = 0.0

    def tick(self, now: float, windows: Mapping[str, SliceSnapshot] | None, diagnoses: Mapping[str, Diagnosis] | None) -> None:
        self.sample(now)
        if now >= self.next_s:
            self.next_s = now + self.period_s * self.f
            for t in self.top.tiers:
                self.decide(now, t.name)

    def sample(self, now: float) -> None: ...

    def decide(self, now: float, tier: str) -> None: ...


class RayServeDefault(Periodic):
    name = "ray_serve_default"
    period_s = 10.0  # metrics_interval_s

    def setup(self, sim: ServingSim, top: Topology, log: ActionLog) -> None:
        super().setup(sim, top, log)
        self.settings = {
            t.name: autoscale.AutoscaleSettings(
                target_ongoing_requests=t.target_ongoing_requests,
                replicas_min=max(1, t.replicas_min),
                replicas_max=t.replicas_max,
                look_back_period_s=30.0 * self.f,
                upscale_delay_s=30.0 * self.f,
                downscale_delay_s=600.0 * self.f,
            )
            for t in top.tiers
        }
        self.states = {t.name: autoscale.AutoscaleState(desired=1) for t in top.tiers}

    def sample(self, now: float) -> None:
        for name in self.states:
            self.states[name] = autoscale.observe(self.states[name], self.settings[name], now, self.sim.ongoing_now(name))

    def decide(self, now: float, tier: str) -> None:
        cur = self.sim.tiers[tier].target
        n, self.states[tier] = autoscale.decide(self.states[tier], self.settings[tier], now, cur)
        self.scale(now, tier, n)


class Keda(Periodic):
    name = "keda"
    period_s = 15.0  # pollingInterval

    def setup(self, sim: ServingSim, top: Topology, log: ActionLog) -> None:
        super().setup(sim, top, log)
        self.below_since: dict[str, float | None] = {t.name: None for t in top.tiers}

    def decide(self, now: float, tier: str) -> None:
        cur = self.sim.tiers[tier].target
        desired = max(1, math.ceil(self.sim.waiting_now(tier) / 5.0))  # AverageValue target 5 waiting
        if desired > cur:
            self.below_since[tier] = None
            self.scale(now, tier, desired)
        elif desired < cur:
            since = self.below_since[tier]
            if since is None:
                self.below_since[tier] = now
            elif now - since >= 360.0 * self.f:  # cooldownPeriod
                self.below_since[tier] = None
                self.scale(now, tier, desired)
        else:
            self.below_since[tier] = None


class Wva(Periodic):
    name = "wva"
    period_s = 60.0  # reconcile interval

    def setup(self, sim: ServingSim, top: Topology, log: ActionLog) -> None:
        super().setup(sim, top, log)
        self.peaks: dict[str, deque[tuple[float, int, float, float, float, float]]] = {t.name: deque() for t in top.tiers}

    def sample(self, now: float) -> None:
        for name, ts in self.sim.tiers.items():
            ready = [r for r in ts.replicas if r.state == "ready"]
            n = max(1, len(ready))
            q = len(ts.queue) / n  # the router's queue as the engines would hold it (llm-d has no router queue)
            # KV proxy: a replica at its admission limit is as full as vLLM's KV gets at this load (0.85)
            kv = [len(r.streams) / ts.max_ongoing * 0.85 for r in ready] or [0.0]
            nonsat = [k for k in kv if k < 0.8 and q < 5]
            spare_kv = sum(0.8 - k for k in nonsat) / len(nonsat) if nonsat else 0.0
            spare_q = 5 - q if nonsat else 0.0
            dq = self.peaks[name]
            dq.append((now, len(nonsat), spare_kv, spare_q, sum(kv), q * n))
            while dq and dq[0][0] < now - 60.0 * self.f:
                dq.popleft()

    def decide(self, now: float, tier: str) -> None:
        dq = self.peaks[tier]
        if not dq:
            return
        # peak load over the window: fewest non-saturated replicas, least spare capacity
        nonsat = min(x[1] for x in dq)
        spare_kv = min(x[2] for x in dq)
        spare_q = min(x[3] for x in dq)
        kv_total = max(x[4] for x in dq)
        q_total = max(x[5] for x in dq)
        cur = self.sim.tiers[tier].target
        if nonsat == 0 or spare_kv < 0.1 or spare_q < 3:
            self.scale(now, tier, cur + 1)
        elif nonsat >= 2 and cur >= 2 and kv_total / (cur - 1) < 0.8 - 0.1 and q_total / (cur - 1) < 5 - 3:
            self.scale(now, tier, cur - 1)


class TtftThreshold(SimPolicy):
    name = "ttft_threshold"

    def __init__(self, time_scale: float) -> None:
        self.f = time_scale
        self.last_up: dict[str, float] = {}
        self.good_since: dict[str, float | None] = {}

    def tick(self, now: float, windows: Mapping[str, SliceSnapshot] | None, diagnoses: Mapping[str, Diagnosis] | None) -> None:
        if windows is None:
            return
        for tier, snap in windows.items():
            slo = self.top.tier(tier).slo_ttft_p99_s
            p99 = snap.ttft_p99_s
            cur = self.sim.tiers[tier].target
            if p99 is not None and p99 > slo:
                self.good_since[tier] = None
                if now - self.last_up.get(tier, -1e9) >= 30.0 * self.f:
                    self.last_up[tier] = now
                    self.scale(now, tier, cur + 1)
            elif p99 is None or p99 < 0.5 * slo:
                since = self.good_since.get(tier)
                if since is None:
                    self.good_since[tier] = now
                elif now - since >= 360.0 * self.f:
                    self.good_since[tier] = now
                    self.scale(now, tier, cur - 1)


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
            self.log.add(now, action.slice, "relocation", action.value, action.previous)
            self.sim.relocate(action.slice, action.replica, action.value)
        self.applied.add(action.id)
        return ApplyResult(action.id, ApplyStatus.APPLIED)


def service_rate_prior(top: Topology) -> dict[str, float]:
    """Requests/s one replica completes at its admission limit (what a deployer calibrates once)."""
    return {t.name: t.max_ongoing_requests / (TOKENS_MEAN * (BASE_TPOT_S + PER_SEQ_TPOT_S * t.max_ongoing_requests)) for t in top.tiers}


class InferSlice(SimPolicy):
    name = "inferslice"

    def __init__(self, time_scale: float, settings: ControlSettings | None = None) -> None:
        self.f = time_scale
        # The same compression as the peers: reclaim after Ray's downscale delay (600 s) x time_scale.
        base = ControlSettings()
        self.settings = settings or replace(
            base, reclaim_after_healthy_s=600.0 * time_scale, cooldown_s={**base.cooldown_s, "scale_in": 600.0 * time_scale}
        )

    def setup(self, sim: ServingSim, top: Topology, log: ActionLog) -> None:
        super().setup(sim, top, log)
        self.verdicts: dict[str, tuple[Diagnosis | None, SliceSnapshot | None]] = {}
        policies = tier_policies(top, self.settings, service_rate_prior_rps=service_rate_prior(top))
        self.controller = Controller(
            top,
            policies,
            SimActuator(sim, log, lambda: sim.t),
            AuditLog(":memory:"),
            lambda: self.verdicts,
            clock=lambda: sim.t,
            mode=Mode.AUTO,
        )

    def tick(self, now: float, windows: Mapping[str, SliceSnapshot] | None, diagnoses: Mapping[str, Diagnosis] | None) -> None:
        if windows is None or diagnoses is None:
            return
        self.verdicts = {t: (diagnoses.get(t), windows.get(t)) for t in windows}
        self.controller.tick()

    def futile_count(self) -> int:
        return sum(1 for e in self.controller.audit.events() if e["kind"] == "futile")


PolicyFactory = Callable[[float], SimPolicy]
POLICIES: dict[str, PolicyFactory] = {
    "static": lambda f: Static(),
    "ray_serve_default": RayServeDefault,
    "keda": Keda,
    "wva": Wva,
    "ttft_threshold": TtftThreshold,
    "inferslice": InferSlice,
}


def register_policy(name: str, factory: PolicyFactory) -> None:
    """The hook for other implementations (e.g. Ray Serve's autoscaler run for real)."""
    POLICIES[name] = factory
