"""Typed control settings: the controller-wide knobs and each tier's policy (bounds and budgets).

Every default carries its reason. Times are in seconds of the testbed's compressed clock: the
testbed's cold start (``timing.cold_start_s``) stands for the paper's 285-560 s, and every delay here
is scaled by the same factor (see ``Timing`` in ``inferslice.topology``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from inferslice.actions import ActionKind
from inferslice.topology import Parallelism, Topology, parse_slot

EDGE_RATE_BPS = 10e9  # the brief's 10 Gbps NICs: what "uncapped" means at the client edge


@dataclass(frozen=True)
class ControlSettings:
    # -- sizing -----------------------------------------------------------------------------------
    target_utilisation: float = 0.8  # size replicas to 80 % of measured service rate: Poisson bursts queue above ~0.85
    queue_drain_s: float = 8.0  # clear the attributed backlog within about one cold start, so the tail recovers in one load step
    min_confidence: float = 0.4  # weaker verdicts change nothing: a wrong remedy costs a cold start
    persist_windows: int = 2  # replicas or a move for compute (or a less-than-sure queue) after two windows: one straddling window misreads
    act_at_once_confidence: float = 0.75  # a queue verdict this sure acts in its first window: a queue grows within one load step
    # -- network ----------------------------------------------------------------------------------
    cap_headroom: float = 1.3  # cap = demand x 1.3: demand grew 0.91 -> 1.32 Mbps (+45 %) per load step in the brief
    # A link pinned at its cap hides demand (it never carries more): step x3, not x2. The brief's squeeze is 0.5 Mbit/s
    # under ~0.9 (1.8x), and the backlog built behind the cap must drain through the new one; at x2 the
    # raise bound again while draining (a second step, one window before the demo's 20 s phase settled). Reclaim trims later.
    cap_probe_factor: float = 3.0
    link_used_ratio: float = 0.8  # a raised cap is used when the link carries >= 80 % of it (HTB pins ~0.92 x cap)
    link_pinned_ratio: float = 0.9  # the link binds when it carries >= 90 % of its cap (HTB holds a binding one at 0.92-1.0)
    network_settle_s: float = 6.0  # three windows after the link last bound: no replicas for queue/compute read behind it
    compute_settle_s: float = 8.0  # after a co-tenant left: TPOT quantiles span ~2 windows and the diagnosis lags ~1 (demo: 6 s)
    demand_inflation_max: float = 8.0  # unconstrained demand is at most 8x what a pinned link carries (brief: TPOT 26 -> 280 ms)
    # False: the client-edge cap is someone else's (a NOC's rule, or an ablation): never raise or trim it.
    cap_raises: bool = True
    # A WAN path 30 ms slower than configured is queueing or rerouted (the classifier's wan_rtt_excess_binding_s):
    # replicas behind it move to a PoP on another path; a cap raise or a scale-out cannot help them.
    wan_excess_s: float = 0.03
    # -- compute ----------------------------------------------------------------------------------
    contended_share: float = 0.9  # a replica below 90 % of its GPU share has a neighbour (the classifier's gpu_share_reduced)
    # -- forecasting ------------------------------------------------------------------------------
    forecast_alpha: float = 0.5  # Holt level smoothing: one 2 s window of a ramp moves the level half-way
    forecast_beta: float = 0.2  # Holt trend smoothing: a trend needs ~5 windows to establish, one burst does not make one
    forecast_z: float = 1.28  # one-sided 90 % prediction bound: pre-scale for the likely upper demand, not the worst
    forecast_min_samples: int = 4  # a trend from fewer windows is noise
    forecasting: bool = True  # False: react to measured arrivals only (no pre-scale, no forecast in sizing or reclaim)
    # -- reclaim ----------------------------------------------------------------------------------
    reclaim_after_healthy_s: float = 60.0  # Ray's downscale_delay_s (600 s) scaled like the cold start
    reclaim_utilisation: float = 0.6  # scale in only if n-1 replicas would still run below 60 % at the forecast upper bound
    # No scale-in while a replica runs below ``contended_share`` nor for this long after one last did: a tier that
    # looks healthy at a reduced share has no capacity to spare (testbed gpu-share-drop: Standard 3 -> 2 queued, P99 TTFT 2-5 s).
    reclaim_share_hold_s: float = 60.0
    cap_reclaim_margin: float = 2.0  # lower a cap only when it exceeds twice demand x headroom (never into a squeeze)
    # -- guardrails -------------------------------------------------------------------------------
    cooldown_s: Mapping[str, float] = field(
        default_factory=lambda: {
            "scale_out": 4.0,  # two windows: let the last scale-out show in the next measurements
            "scale_in": 60.0,  # as slow as the reclaim delay: scaling in is the risky direction
            "set_cap": 4.0,  # caps bind within ms; two windows to measure the effect
            "relocate": 12.0,  # a move is a cold start (8 s) plus two windows to see its successor serve: never two in flight per tier
        }
    )
    max_actions_per_tier: int = 6  # at most six actions per tier per rate window: a cap escalation needs ~3, a scale-out 1-2
    rate_window_s: float = 60.0
    outcome_grace_s: float = 4.0  # two windows past the expected time before an action is judged futile
    window_s: float = 2.0  # the diagnosis window (the testbed's scrape interval)


def cooldown_key(kind: ActionKind, up: bool) -> str:
    if kind is ActionKind.SET_REPLICAS:
        return "scale_out" if up else "scale_in"
    return kind.value


@dataclass(frozen=True)
class TierPolicy:
    """One tier's bounds and budgets, from the topology plus control's own settings."""

    tier: str
    replicas_min: int
    replicas_max: int  # the ceiling (Ray Serve max_replicas)
    gpu_quota: float  # Run:ai project quota: also what the tier is guaranteed
    gpu_per_replica: float
    cpu_quota: float
    cpu_per_replica: float
    max_ongoing_requests: int  # the admission policy the "at ceiling" event names
    placement: tuple[str, ...]  # the tier's own GPU slots, in scale-out order (guaranteed to it)
    priority: int = 0
    parallelism: Parallelism = Parallelism.REPLICATION  # replicas are independent copies unless configured otherwise
    bandwidth_budget_bps: float = EDGE_RATE_BPS  # the most this tier's client-edge cap may be raised to
    bandwidth_guaranteed_bps: float = 0.0  # what the tier keeps whatever the others do
    base_cap_bps: float | None = None  # the configured cap: reclaim never lowers below it
    cold_start_s: float = 8.0  # until measured: the testbed's configured cold start
    service_rate_prior_rps: float = 1.0  # requests/s one replica completes until measured (brief: Free peaks at ~2.5 req/s)
    slo_ttft_p99_s: float = 0.5
    controlled: bool = True  # False: observe and forecast, never act (a tier left to its own autoscaler)
    settings: ControlSettings = field(default_factory=ControlSettings)

    @property
    def replicas_limit(self) -> int:
        """The most replicas the ceiling and both quotas allow."""
        by_gpu = math.floor(self.gpu_quota / self.gpu_per_replica + 1e-9)
        by_cpu = math.floor(self.cpu_quota / self.cpu_per_replica + 1e-9) if self.cpu_per_replica > 0 else self.replicas_max
        return max(0, min(self.replicas_max, by_gpu, by_cpu))

    @property
    def admission_policy(self) -> str:
        return f"max_ongoing_requests={self.max_ongoing_requests} per replica; excess requests wait in the router queue"


def tier_policies(
    topology: Topology,
    settings: ControlSettings | None = None,
    budgets_bps: Mapping[str, float] | None = None,
    service_rate_prior_rps: Mapping[str, float] | None = None,
) -> dict[str, TierPolicy]:
    """Each tier's policy from the topology. Bandwidth: the edge is split into guarantees in
    proportion to GPU quota (the brief sizes tiers by GPU), a tier's budget defaults to its share
    plus what no tier is guaranteed."""
    s = settings or ControlSettings()
    total_quota = sum(t.gpu_quota for t in topology.tiers)
    out: dict[str, TierPolicy] = {}
    for t in topology.tiers:
        guaranteed = EDGE_RATE_BPS * 0.5 * t.gpu_quota / total_quota  # half the edge is guaranteed, half shared
        budget = (budgets_bps or {}).get(t.name, guaranteed + EDGE_RATE_BPS * 0.5)
        out[t.name] = TierPolicy(
            tier=t.name,
            replicas_min=t.replicas_min,
            replicas_max=t.replicas_max,
            gpu_quota=t.gpu_quota,
            gpu_per_replica=t.gpu_per_replica,
            cpu_quota=t.cpu_quota,
            cpu_per_replica=t.cpu_quota / t.replicas_max,
            max_ongoing_requests=t.max_ongoing_requests,
            placement=tuple(t.placement),
            priority=t.priority,
            bandwidth_budget_bps=budget,
            bandwidth_guaranteed_bps=min(guaranteed, budget),
            base_cap_bps=t.client_cap_bps,
            cold_start_s=topology.timing.cold_start_s,
            service_rate_prior_rps=(service_rate_prior_rps or {}).get(t.name, 1.0),
            slo_ttft_p99_s=t.slo_ttft_p99_s,
            settings=replace(s, window_s=topology.timing.scrape_interval_s),
        )
    return out


def slot_pop(slot: str) -> str:
    return parse_slot(slot)[0]
