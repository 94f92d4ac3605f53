"""The policies the control benchmark compares, each behind one interface.

Peers follow their documentation and code (the project's CONTRACTS.md, "Peers' autoscaling
policies"), with every time constant multiplied by ``time_scale`` = testbed cold start / the paper's
285 s (the Run:ai-streamer cold start, the peers' most favourable case), the same compression the
testbed applies to cold starts:

- static: the paper's setting, every tier at its ceiling (1 / 3 / 6) all the time;
- ray_serve_default: Ray Serve's default policy, Ray's own decision code (``ray.serve.autoscaling_policy``,
  ray 2.60: mean ongoing over look_back_period / target_ongoing_requests, upscale/downscale delays 30 / 600 s);
- keda: vLLM production-stack's KEDA trigger, ``vllm:num_requests_waiting`` > 5 (AverageValue:
  desired = ceil(waiting / 5)), sized as the HPA behind KEDA does (``KedaHpa``: 15 s sync, 10 %
  tolerance, scale-down to the highest desired count of the last 300 s, minReplicas = the tier's
  guaranteed count; KEDA's ``cooldownPeriod`` only governs scaling to zero, which never happens here);
- wva: llm-d workload-variant-autoscaler's saturation analyzer (a replica is saturated at KV >= 0.8
  or queue >= 5; +1 over the ready replicas when spare KV < 0.1 or spare queue < 3, never while a
  replica is pending: its cascade-scaling prevention; -1 only if the load fits one fewer and >= 2
  replicas are non-saturated; peak metrics over 60 s, reconcile 60 s; the defaults of its
  ``capacity-scaling-config`` ConfigMap, docs/saturation-analyzer.md);
- ttft_threshold: +1 when P99 TTFT exceeds the SLO (at most every 30 s), -1 after 360 s under half of it;
- inferslice: this project's controller (``service.controller.Controller`` in auto mode, with the
  real ``decide``, ``guard`` and audit log) diagnosing with the real classifier.

Composite peers that also turn the cap and move replicas, and inferslice's ablations, are in
``control_peers`` (its ``POLICIES`` is the whole registry). ``register_policy`` adds more.
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from inferslice.actions import Action, ActionKind
from inferslice.bench.control_backend import ActionLog, Backend
from inferslice.bench.control_sim import BASE_TPOT_S, PER_SEQ_TPOT_S, TOKENS_MEAN
from inferslice.control.actuators.base import Actuator, ApplyResult, TierObservation
from inferslice.control.settings import ControlSettings, tier_policies
from inferslice.diagnosis import Diagnosis
from inferslice.errors import ConfigError
from inferslice.service.controller import Controller, Mode
from inferslice.service.controller.audit import AuditLog
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology

PAPER_COLD_START_S = 285.0  # brief: ~285 s per pod with the Run:ai model streamer

__all__ = ["PAPER_COLD_START_S", "POLICIES", "ActionLog", "InferSlice", "register_policy"]


class SimPolicy:
    """A policy over a ``Backend`` (the model or the testbed: the same code on both)."""

    name = "base"

    def setup(self, backend: Backend, top: Topology, log: ActionLog) -> None:
        self.backend, self.top, self.log = backend, top, log
        for t in top.tiers:
            backend.set_replicas(t.name, max(1, t.replicas_min), instant=True)

    def tick(self, now: float, windows: Mapping[str, SliceSnapshot] | None, diagnoses: Mapping[str, Diagnosis] | None) -> None:
        """Called every step; ``windows`` / ``diagnoses`` only when a window just closed."""

    def target(self, tier: str) -> int:
        return self.backend.reading(tier).target

    # Set by a composite peer: replica decisions then go through its guarded shell instead of straight to the backend.
    scaler: Callable[[float, str, int], None] | None = None

    def scale(self, now: float, tier: str, n: int) -> None:
        t = self.top.tier(tier)
        n = max(max(1, t.replicas_min), min(t.replicas_max, n))
        if self.scaler is not None:
            self.scaler(now, tier, n)
            return
        cur = self.target(tier)
        if n != cur:
            self.backend.set_replicas(tier, n)
            self.log.add(now, tier, "scale_out" if n > cur else "scale_in", n, cur)


class Static(SimPolicy):
    name = "static"

    def setup(self, backend: Backend, top: Topology, log: ActionLog) -> None:
        self.backend, self.top, self.log = backend, top, log
        for t in top.tiers:
            backend.set_replicas(t.name, t.replicas_max, instant=True)


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
    """Ray Serve's default policy, Ray's own code: ``replica_queue_length_autoscaling_policy`` (desired =
    running x mean ongoing / (target_ongoing x running)), then the steps Ray's controller wraps every
    policy in (``_apply_autoscaling_config``): scaling factors, the up/downscale delays, the bounds.
    The delay step is called with this run's clock (Ray's wrapper reads ``time.time()``, which the
    model's clock is not). What the bench supplies is Ray's input: ongoing requests (running +
    queued) averaged over ``look_back_period_s``, as Ray's controller aggregates its handles'
    reports, and the target/running replica counts."""

    name = "ray_serve_default"
    period_s = 10.0  # metrics_interval_s: how often Ray's handles report, and so how often a decision can change

    def setup(self, backend: Backend, top: Topology, log: ActionLog) -> None:
        try:
            from ray.serve._private.common import DeploymentID
            from ray.serve.config import AutoscalingConfig
        except ImportError as err:  # Ray is an optional extra: say how to get it instead of a traceback
            raise ConfigError(
                "policy ray_serve_default runs Ray Serve's own policy code and needs Ray: "
                "pip install 'inferslice[ray]' (make bench does), or leave it out with --policies"
            ) from err

        super().setup(backend, top, log)
        with warnings.catch_warnings():  # Ray warns of its deprecated metrics_interval_s, which sets the decision period here
            warnings.simplefilter("ignore")
            self.configs = {
                t.name: AutoscalingConfig(
                    min_replicas=max(1, t.replicas_min),
                    max_replicas=t.replicas_max,
                    target_ongoing_requests=t.target_ongoing_requests,
                    metrics_interval_s=self.period_s * self.f,
                    look_back_period_s=30.0 * self.f,
                    upscale_delay_s=30.0 * self.f,
                    downscale_delay_s=600.0 * self.f,
                )
                for t in top.tiers
            }
        self.ids = {t.name: DeploymentID(name=t.name, app_name=t.name) for t in top.tiers}
        self.samples: dict[str, deque[tuple[float, int]]] = {t.name: deque() for t in top.tiers}
        self.states: dict[str, dict[str, Any]] = {t.name: {} for t in top.tiers}

    def sample(self, now: float) -> None:
        for name, dq in self.samples.items():
            dq.append((now, self.backend.reading(name).ongoing))
            while dq and dq[0][0] < now - self.configs[name].look_back_period_s:
                dq.popleft()

    def decide(self, now: float, tier: str) -> None:
        from ray.serve.autoscaling_policy import _apply_delay_logic, _apply_scaling_factors, replica_queue_length_autoscaling_policy
        from ray.serve.config import AutoscalingContext

        cfg, r = self.configs[tier], self.backend.reading(tier)
        dq = self.samples[tier]
        running = len(r.ready)
        ctx = AutoscalingContext(
            deployment_id=self.ids[tier],
            deployment_name=tier,
            app_name=tier,
            current_num_replicas=running,
            target_num_replicas=r.target,
            running_replicas=[],
            total_num_requests=sum(v for _, v in dq) / len(dq) if dq else 0.0,
            total_queued_requests=float(r.queued),
            aggregated_metrics=None,
            raw_metrics=None,
            capacity_adjusted_min_replicas=cfg.min_replicas,
            capacity_adjusted_max_replicas=cfg.max_replicas,
            policy_state=self.states[tier],
            last_scale_up_time=None,
            last_scale_down_time=None,
            current_time=now,
            config=cfg,
        )
        desired, _ = replica_queue_length_autoscaling_policy(ctx)
        if running > 0:  # Ray's wrapper: scaling factors, then the delays (its cold-start path skips both)
            desired = _apply_scaling_factors(desired, running, cfg)
            desired, self.states[tier] = _apply_delay_logic(max(0, math.ceil(desired)), r.target, cfg, dict(self.states[tier]), _now=now)
        self.scale(now, tier, max(cfg.min_replicas, min(cfg.max_replicas, math.ceil(desired))))


class KedaHpa(Periodic):
    """KEDA's prometheus trigger on waiting requests, sized by the HPA's algorithm (module docstring)."""

    name = "keda"
    period_s = 15.0  # the HPA's sync period (KEDA's metrics adapter answers each one); production-stack polls every 15 s
    target_waiting = 5.0  # AverageValue target of vllm:num_requests_waiting (the production-stack's threshold)
    tolerance = 0.1  # the HPA does nothing while metric / target is within 10 % of the replicas
    stabilisation_down_s = 300.0  # HPA scaleDown.stabilizationWindowSeconds default: the highest desired count over it

    def setup(self, backend: Backend, top: Topology, log: ActionLog) -> None:
        super().setup(backend, top, log)
        self.recommendations: dict[str, deque[tuple[float, int]]] = {t.name: deque() for t in top.tiers}

    def decide(self, now: float, tier: str) -> None:
        t = self.top.tier(tier)
        r = self.backend.reading(tier)
        cur = r.target
        lo, hi = max(1, t.replicas_min), t.replicas_max
        metric = float(r.queued)  # the router queue: where this stack's requests wait (the engines' waiting queue in vLLM's)
        ratio = metric / (self.target_waiting * max(cur, 1))
        desired = cur if abs(ratio - 1.0) <= self.tolerance else math.ceil(metric / self.target_waiting)
        desired = max(lo, min(hi, desired))
        recs = self.recommendations[tier]
        recs.append((now, desired))
        while recs and recs[0][0] < now - self.stabilisation_down_s * self.f:
            recs.popleft()
        if desired < cur:
            desired = min(cur, max(n for _, n in recs))  # scale down only to the highest recommendation in the window
        elif desired > cur:
            desired = min(desired, max(2 * cur, cur + 4))  # default scale-up policy: 100 % or 4 pods per period, the larger
        self.scale(now, tier, desired)


class Wva(Periodic):
    name = "wva"
    period_s = 60.0  # reconcile interval

    def setup(self, backend: Backend, top: Topology, log: ActionLog) -> None:
        super().setup(backend, top, log)
        self.peaks: dict[str, deque[tuple[float, int, float, float, float, float]]] = {t.name: deque() for t in top.tiers}

    def sample(self, now: float) -> None:
        for name in self.peaks:
            reading = self.backend.reading(name)
            ready = reading.ready
            n = max(1, len(ready))
            q = reading.queued / n  # the router's queue as the engines would hold it (llm-d has no router queue)
            kv = [r.kv_usage or 0.0 for r in ready] or [0.0]  # the model's proxy or the engine's own gauge
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
        reading = self.backend.reading(tier)
        cur, ready = reading.target, len(reading.ready)
        if nonsat == 0 or spare_kv < 0.1 or spare_q < 3:
            # WVA's target is ready + 1, and a variant with pending replicas (asked for, not yet ready)
            # is skipped for scale-up until they serve: without that it asked for one more every
            # reconcile of a cold start (~42 scale-outs a run in the earlier benchmark).
            if ready >= cur:
                self.scale(now, tier, ready + 1)
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
            cur = self.target(tier)
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


def service_rate_prior(top: Topology) -> dict[str, float]:
    """Requests/s one replica completes at its admission limit (what a deployer calibrates once)."""
    return {t.name: t.max_ongoing_requests / (TOKENS_MEAN * (BASE_TPOT_S + PER_SEQ_TPOT_S * t.max_ongoing_requests)) for t in top.tiers}


def bench_settings(time_scale: float) -> ControlSettings:
    """The controller's settings in the bench, and the guardrails' for every peer that acts through them:
    the same compression as the peers, reclaim (and the scale-in cooldown) after Ray's downscale delay
    (600 s) x time_scale."""
    base = ControlSettings()
    return replace(base, reclaim_after_healthy_s=600.0 * time_scale, cooldown_s={**base.cooldown_s, "scale_in": 600.0 * time_scale})


class WithoutKinds:
    """An actuator that cannot do some kinds (the controller then never proposes them: an ablation)."""

    def __init__(self, inner: Actuator, drop: frozenset[ActionKind]) -> None:
        self.inner = inner
        self.name = inner.name
        self.kinds = frozenset(inner.kinds) - drop

    def observe(self) -> Mapping[str, TierObservation]:
        return self.inner.observe()

    def apply(self, action: Action) -> ApplyResult:
        return self.inner.apply(action)


class InferSlice(SimPolicy):
    name = "inferslice"

    def __init__(self, time_scale: float, settings: ControlSettings | None = None, drop_kinds: frozenset[ActionKind] = frozenset()) -> None:
        self.f = time_scale
        self.settings = settings or bench_settings(time_scale)
        self.drop_kinds = drop_kinds

    def setup(self, backend: Backend, top: Topology, log: ActionLog) -> None:
        super().setup(backend, top, log)
        self.verdicts: dict[str, tuple[Diagnosis | None, SliceSnapshot | None]] = {}
        policies = tier_policies(top, self.settings, service_rate_prior_rps=service_rate_prior(top))
        actuator = backend.actuator(log)
        self.controller = Controller(
            top,
            policies,
            WithoutKinds(actuator, self.drop_kinds) if self.drop_kinds else actuator,
            AuditLog(":memory:"),
            lambda: self.verdicts,
            clock=lambda: backend.t,
            mode=Mode.AUTO,
            path_excess_s=backend.path_excess_s,
        )

    def tick(self, now: float, windows: Mapping[str, SliceSnapshot] | None, diagnoses: Mapping[str, Diagnosis] | None) -> None:
        if windows is None or diagnoses is None:
            return
        self.verdicts = {t: (diagnoses.get(t), windows.get(t)) for t in windows}
        self.controller.tick()

    def futile_count(self) -> int:
        # The controller's own verdict "ineffective" (before the outcome names changed: "futile").
        return sum(1 for e in self.controller.audit.events() if e["kind"] in ("ineffective", "futile"))


PolicyFactory = Callable[[float], SimPolicy]
POLICIES: dict[str, PolicyFactory] = {
    "static": lambda f: Static(),
    "ray_serve_default": RayServeDefault,
    "keda": KedaHpa,
    "wva": Wva,
    "ttft_threshold": TtftThreshold,
    "inferslice": InferSlice,
}


def register_policy(name: str, factory: PolicyFactory) -> None:
    """The hook for other implementations (e.g. Ray Serve's autoscaler run for real)."""
    POLICIES[name] = factory
