"""The demo's script: phases of load, caps and GPU shares, and what each tier should be diagnosed as.

Pure data plus a pure judge; the orchestration lives in ``inferslice.cli.demo``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from inferslice.bottleneck.episodes import DEFAULT_HYSTERESIS


@dataclass(frozen=True)
class TierLoad:
    concurrency: int
    cap_bps: float | None = None  # client-edge receive cap; None = uncapped
    gpu_share: float = 1.0  # effective GPU share of the tier's replicas; < 1 = a co-tenant
    keep_cap: bool = False  # leave the cap as it is (the controller owns it in this phase)


@dataclass(frozen=True)
class Phase:
    name: str
    description: str
    duration_s: float
    loads: Mapping[str, TierLoad]
    expect: Mapping[str, str]  # tier -> regime the platform should diagnose once settled
    control: str = "dry-run"  # the controller's mode in this phase: dry-run (propose only) | auto | approve
    # approve mode: the segment waits for this tier's action to be pending, approves it through the API
    # and judges the phase from when it was applied (the phase's duration runs from then)
    approve_tier: str | None = None
    # tier -> the kind of action the controller must have applied in this phase (CI checks it)
    expect_actions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Story:
    phases: tuple[Phase, ...]
    replicas: Mapping[str, int] = field(default_factory=dict)  # fixed replica counts for the story

    def scaled(self, factor: float) -> Story:
        return replace(self, phases=tuple(replace(p, duration_s=max(8.0, p.duration_s * factor)) for p in self.phases))

    def with_phase_s(self, seconds: float) -> Story:
        """Every phase ``seconds`` long (at least 8 s: a few windows must settle for a verdict)."""
        return replace(self, phases=tuple(replace(p, duration_s=max(8.0, seconds)) for p in self.phases))


# Free's admission limit is 12 in flight (1 replica), so 24 clients queue; Standard needs ~0.9 Mbit/s
# at 10 clients, so 0.5 Mbit/s binds; a 0.35 share slows Premium's decode ~3x with no queue.
# The controller watches throughout: in dry-run while the regimes develop (it records what it would
# do), in auto for the remedies (Standard's cap is the controller's to raise; Free is at its ceiling,
# which the controller reports instead of acting; Premium's co-tenant stays on bristol/gpu1, so only
# moving its replicas make-before-break to GPUs with room cures it), in approve for a second squeeze of Standard's edge:
# its cap raise waits for an operator, whom the demo plays through the API. A squeeze always yields an
# action (a tier's bandwidth budget is far above its cap), where a load step may find the tier
# already scaled by the remedies' forecast.
DEFAULT_STORY = Story(
    phases=(
        Phase(
            "baseline",
            "every tier at low load: healthy, and the platform learns each tier's reference",
            40.0,
            {"free": TierLoad(4), "standard": TierLoad(4), "premium": TierLoad(4)},
            {"free": "healthy", "standard": "healthy", "premium": "healthy"},
        ),
        Phase(
            "three regimes",
            "Free past its admission limit; Standard's edge capped at 0.5 Mbit/s; a co-tenant on Premium's GPUs",
            75.0,
            {"free": TierLoad(24), "standard": TierLoad(10, cap_bps=0.5e6), "premium": TierLoad(8, gpu_share=0.35)},
            {"free": "queue_limited", "standard": "network_limited", "premium": "compute_limited"},
        ),
        Phase(
            "remedies",
            "the controller in auto: it raises Standard's cap, reports Free at its ceiling and moves Premium's"
            " replicas off the co-tenant, which stays",
            45.0,
            {"free": TierLoad(24), "standard": TierLoad(10, keep_cap=True), "premium": TierLoad(8, gpu_share=0.35)},
            {"free": "queue_limited", "standard": "healthy", "premium": "healthy"},
            control="auto",
            expect_actions={"standard": "set_cap", "premium": "relocate"},
        ),
        Phase(
            "approval",
            "the controller in approve: Standard's edge squeezed to 0.5 Mbit/s again; its cap raise waits for an operator,"
            " the demo approves it through the API",
            50.0,
            {"free": TierLoad(4), "standard": TierLoad(10, cap_bps=0.5e6), "premium": TierLoad(8)},
            {"free": "healthy", "standard": "healthy", "premium": "healthy"},
            control="approve",
            approve_tier="standard",
        ),
    ),
    replicas={"free": 1, "standard": 2, "premium": 2},
)


@dataclass(frozen=True)
class PhaseVerdict:
    phase: str
    tier: str
    expected: str
    observed: str | None  # majority regime over the settled windows
    share: float  # fraction of settled windows with the expected regime
    windows: int
    # Where the P99 TTFT went over the settled windows: mean seconds per resource (queue, network,
    # compute, base) of the diagnoses' attribution; empty when none carried one.
    attribution: Mapping[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.observed == self.expected


def judge(
    phase: Phase,
    diagnoses: Mapping[str, Sequence[Mapping[str, Any]]],
    start_s: float,
    end_s: float,
    settle_fraction: float = 0.4,
    neutral_below: float = DEFAULT_HYSTERESIS.min_confidence,
) -> list[PhaseVerdict]:
    """Compare each tier's diagnoses in the settled part of a phase (after ``settle_fraction``) with the script.

    A verdict naming a regime under the episodes' neutral bar (``HysteresisPolicy.min_confidence``:
    the tail of a cause that has left, the classifier's v14) is neutral here as it is for the
    episodes: it counts for no regime. ``unknown`` still counts (a phase the classifier cannot read fails)."""
    settled_from = start_s + settle_fraction * (end_s - start_s)
    out = []
    for tier, expected in phase.expect.items():
        settled = [
            d for d in diagnoses.get(tier, []) if d.get("window_end_s") is not None and settled_from <= float(d["window_end_s"]) <= end_s
        ]
        regimes = [
            str(d["regime"]) for d in settled if d["regime"] == "unknown" or float(d.get("confidence") or 0.0) >= neutral_below
        ]
        counts = Counter(regimes)
        observed = counts.most_common(1)[0][0] if counts else None
        share = counts[expected] / len(regimes) if regimes else 0.0
        out.append(PhaseVerdict(phase.name, tier, expected, observed, share, len(regimes), attribution_mean(settled)))
    return out


def attribution_mean(diagnoses: Sequence[Mapping[str, Any]], stat: str = "ttft_p99") -> dict[str, float]:
    """Mean seconds of ``stat`` per resource over the diagnoses that carry an attribution for it."""
    shares: list[Mapping[str, Any]] = []
    for d in diagnoses:
        share = (d.get("attribution") or {}).get(stat)
        if share:
            shares.append(share)
    if not shares:
        return {}
    return {r: sum(float(s.get(f"{r}_s", 0.0)) for s in shares) / len(shares) for r in ("queue", "network", "compute", "base")}
