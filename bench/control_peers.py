"""Peers that can turn every knob: what an operations team runs without a diagnosis.

A composite peer is a replica autoscaler plus two rules an SRE team writes for the other knobs
(CONTRACTS.md, "Peers as their users configure them"):

- the **NOC rule** (``NocRule``): a tier whose client-edge link carries >= 90 % of its cap for two
  windows running gets its cap doubled, within its bandwidth budget (Kube-OVN applies such a raise as
  the ``ovn.kubernetes.io/ingress_rate`` annotation);
- the **mover** (``Mover``): a ready replica whose GPU share reads below 0.5 is relocated,
  make-before-break, to a free slot (a GPU rebalancer acting on the Run:ai fraction / NVML share).

Composites get what inferslice gets: the same windows (the snapshots the diagnosis reads: link rate
and cap), the same actuator observation (replicas, placements, GPU shares, caps), the same actuator,
and the same guardrails (``control.guardrails.guard`` with the same tier policies, cooldowns and
rate limit). Their replica autoscaler reads its own native signal, as deployed: Ray Serve's
ongoing requests, KEDA's waiting requests.

- ``ray_noc_mover``: Ray Serve's default autoscaler (Ray 2.60's own policy functions) + NOC + mover;
- ``keda_noc_mover``: KEDA as its users configure it (``KedaHpa``) + NOC + mover.

``KedaHpa`` is KEDA made faithful: KEDA feeds the metric to a Kubernetes HPA, and it is the HPA's
algorithm that sizes N >= 1 (``cooldownPeriod``, 300 s by default, governs only the last replica to
zero, which a ``minReplicaCount`` of 1 or more never reaches): every sync period (15 s) desired =
ceil(waiting / 5) (AverageValue), no change within the 10 % tolerance; scale-up at most
max(100 %, 4 pods) per 15 s and no stabilisation; scale-down to the highest desired count seen over
the stabilisation window (300 s); between ``minReplicaCount`` (the tier's guaranteed count,
``replicas_min`` in the tiers file) and the ceiling. Every time constant is compressed like the
others (x ``time_scale``). Sources: Kubernetes HPA ``behavior`` defaults (scaleDown
``stabilizationWindowSeconds`` 300, scaleUp 0; default policies; ``--horizontal-pod-autoscaler-
sync-period`` 15 s, tolerance 0.1), KEDA's ScaledObject reference (``pollingInterval`` 30 s,
``cooldownPeriod`` 300 s, "only applies to scaling to/from zero"), vLLM production-stack's KEDA
tutorial (``vllm:num_requests_waiting``, ``pollingInterval`` 15 s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from inferslice.actions import Action, ActionKind
from inferslice.bench.control_backend import ActionLog, Backend
from inferslice.bench.control_policies import POLICIES as REFERENCE_POLICIES
from inferslice.bench.control_policies import InferSlice, KedaHpa, PolicyFactory, RayServeDefault, SimPolicy, bench_settings
from inferslice.control.actuators.base import Actuator, TierObservation
from inferslice.control.guardrails import GuardState, free_gpu_for, guard
from inferslice.control.placement import destinations, pair_key
from inferslice.control.settings import ControlSettings, TierPolicy, tier_policies
from inferslice.control.view import all_slots, cluster_view
from inferslice.diagnosis import Diagnosis
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology

NOC_PINNED_RATIO = 0.9  # the link carries >= 90 % of its cap ...
NOC_WINDOWS = 2  # ... for two windows running
NOC_FACTOR = 2.0  # double the cap, within the budget
MOVER_SHARE = 0.5  # a replica reading under half its GPU share is moved


class Shell:
    """Proposals -> the guardrails -> the actuator, as the inferslice controller's loop does it."""

    def __init__(self, name: str, top: Topology, policies: Mapping[str, TierPolicy], actuator: Actuator) -> None:
        self.name, self.top, self.policies, self.actuator = name, top, dict(policies), actuator
        self.gstate = GuardState()
        self.seq = 0
        self.proposed: list[Action] = []
        self.refused = 0

    def observe(self) -> Mapping[str, TierObservation]:
        return self.actuator.observe()

    def propose(
        self,
        kind: ActionKind,
        tier: str,
        value: float | str,
        previous: float | str | None,
        now: float,
        why: str,
        replica: str | None = None,
    ) -> None:
        self.seq += 1
        self.proposed.append(
            Action(
                kind,
                tier,
                value,
                reason=why,
                regime=self.name,
                id=f"{self.name}-{tier}-{self.seq}-{kind.value}",
                previous=previous,
                decided_s=now,
                replica=replica,
            )
        )

    def flush(self, now: float) -> None:
        if not self.proposed:
            return
        cluster = cluster_view(self.observe(), self.policies)
        allowed, refused, self.gstate = guard(self.proposed, cluster, self.policies, self.gstate, now)
        self.refused += len(refused)
        self.proposed = []
        for a in allowed:
            self.actuator.apply(a)


class NocRule:
    """Double a tier's cap (within budget) when its link carries >= 90 % of the cap for two windows."""

    def __init__(self) -> None:
        self.streak: dict[str, int] = {}

    def step(self, now: float, windows: Mapping[str, SliceSnapshot], shell: Shell, observed: Mapping[str, TierObservation]) -> None:
        for tier, snap in windows.items():
            obs = observed.get(tier)
            policy = shell.policies.get(tier)
            if obs is None or policy is None:
                continue
            cap = obs.cap_bps
            rx = snap.link_rx_bps
            pinned = cap is not None and rx is not None and rx >= NOC_PINNED_RATIO * cap
            self.streak[tier] = self.streak.get(tier, 0) + 1 if pinned else 0
            if cap is not None and self.streak[tier] >= NOC_WINDOWS and cap < policy.bandwidth_budget_bps:
                new = min(NOC_FACTOR * cap, policy.bandwidth_budget_bps)
                shell.propose(
                    ActionKind.SET_CAP,
                    tier,
                    round(new),
                    cap,
                    now,
                    f"NOC: link at >= {NOC_PINNED_RATIO:.0%} of its {cap / 1e6:.2f} Mbit/s cap for {NOC_WINDOWS} windows: x2",
                )
                self.streak[tier] = 0


class Mover:
    """Relocate the ready replica with the lowest GPU share under 0.5 to a free slot (one per tier per window)."""

    def step(self, now: float, shell: Shell, observed: Mapping[str, TierObservation]) -> None:
        top = shell.top
        cluster = cluster_view(observed, shell.policies)
        gw = top.client.gateway
        pop_rtt = {p.name: top.rtt_s(gw, p.name) if top.link_between(gw, p.name) or p.name == gw else math.inf for p in top.pops}
        pairs = {pair_key(lk.a, lk.b): lk.rtt_s for lk in top.links}
        for tier, obs in observed.items():
            policy = shell.policies.get(tier)
            if policy is None:
                continue
            low = sorted((r for r in obs.replicas if r.state == "ready" and r.gpu_share < MOVER_SHARE), key=lambda r: r.gpu_share)
            if not low:
                continue
            rep = low[0]
            free = free_gpu_for(tier, cluster.slot_use, shell.policies, all_slots(top))
            slots = destinations(rep, list(obs.replicas), policy.parallelism, policy.gpu_per_replica, free, pairs, pop_rtt)
            if slots:
                shell.propose(
                    ActionKind.RELOCATE,
                    tier,
                    slots[0],
                    f"{rep.pop}/gpu{rep.gpu}",
                    now,
                    f"mover: {rep.id} reads GPU share {rep.gpu_share:.2f} < {MOVER_SHARE}",
                    replica=rep.id,
                )


class Composite(SimPolicy):
    """A replica autoscaler (its own signal) + the NOC rule + the mover, through one guarded shell."""

    def __init__(self, name: str, replicas: SimPolicy, settings: ControlSettings, noc: bool = True, mover: bool = True) -> None:
        self.name = name
        self.inner = replicas
        self.settings = settings
        self.noc = NocRule() if noc else None
        self.mover = Mover() if mover else None

    def setup(self, backend: Backend, top: Topology, log: ActionLog) -> None:
        self.backend, self.top, self.log = backend, top, log
        self.shell = Shell(self.name, top, tier_policies(top, self.settings), backend.actuator(log))
        self.inner.setup(backend, top, log)  # its starting replicas, as when the peer runs alone
        self.inner.scaler = self._scale

    def _scale(self, now: float, tier: str, n: int) -> None:
        cur = self.backend.reading(tier).target
        if n != cur:
            self.shell.propose(ActionKind.SET_REPLICAS, tier, n, cur, now, f"{self.inner.name}: {cur} -> {n}")

    def tick(self, now: float, windows: Mapping[str, SliceSnapshot] | None, diagnoses: Mapping[str, Diagnosis] | None) -> None:
        self.inner.tick(now, windows, diagnoses)
        if windows is not None and (self.noc is not None or self.mover is not None):
            observed = self.shell.observe()
            if self.noc is not None:
                self.noc.step(now, windows, self.shell, observed)
            if self.mover is not None:
                self.mover.step(now, self.shell, observed)
        self.shell.flush(now)


class InferSliceNocCaps(InferSlice):
    """Ablation: inferslice's controller with its own cap sizing off, and the NOC rule on the cap instead."""

    def __init__(self, time_scale: float) -> None:
        super().__init__(time_scale, replace(bench_settings(time_scale), cap_raises=False))

    def setup(self, backend: Backend, top: Topology, log: ActionLog) -> None:
        super().setup(backend, top, log)
        self.shell = Shell("noc", top, tier_policies(top, self.settings), backend.actuator(log))
        self.noc = NocRule()

    def tick(self, now: float, windows: Mapping[str, SliceSnapshot] | None, diagnoses: Mapping[str, Diagnosis] | None) -> None:
        super().tick(now, windows, diagnoses)
        if windows is not None:
            self.noc.step(now, windows, self.shell, self.shell.observe())
            self.shell.flush(now)


PEERS = ("ray_serve_default", "keda", "wva", "ttft_threshold", "ray_noc_mover", "keda_noc_mover")  # what inferslice is compared with
REFERENCE = ("static",)  # the paper's fixed setting: every tier at its ceiling
ABLATIONS = ("inferslice_no_caps", "inferslice_no_relocation", "inferslice_no_forecast", "inferslice_noc_caps")

POLICIES: dict[str, PolicyFactory] = {
    **REFERENCE_POLICIES,
    "ray_noc_mover": lambda f: Composite("ray_noc_mover", RayServeDefault(f), bench_settings(f)),
    "keda_noc_mover": lambda f: Composite("keda_noc_mover", KedaHpa(f), bench_settings(f)),
    "inferslice_no_caps": lambda f: InferSlice(f, replace(bench_settings(f), cap_raises=False)),
    "inferslice_no_relocation": lambda f: InferSlice(f, drop_kinds=frozenset({ActionKind.RELOCATE})),
    "inferslice_no_forecast": lambda f: InferSlice(f, replace(bench_settings(f), forecasting=False)),
    "inferslice_noc_caps": InferSliceNocCaps,
}
