"""Learn a slice's reference (its unconstrained behaviour) from healthy windows. Pure.

Learned: latency centres and tails (TTFT/TPOT p50, mean, P99; a P99 is judged against a P99), the
output token rate they were measured at, and the decode load relation: each window at a token rate
at least ``min_rate_step`` away from the reference's gives one estimate of the saturation rate of
``TPOT = a / (1 - rate / saturation)`` (the line through the two points in ``1/TPOT`` vs rate),
averaged like the rest. Throughput alone would misjudge another load; paired with the TPOT it was
measured at and the relation, it lets the classifier tell load from contention. A configured
reference is never overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferslice.diagnosis import Diagnosis, Regime, SloState
from inferslice.snapshot import Reference, SliceSnapshot


@dataclass(frozen=True)
class LearningPolicy:
    alpha: float = 0.1  # EWMA weight of one window: ~10 windows (20 s at a 2 s scrape) to follow a real shift
    # Healthy windows judged without a reference stay below the classifier's confident bar (0.55): the
    # first windows must still teach it, so the bar sits just under that cap.
    min_confidence: float = 0.5
    min_rate_step: float = 0.2  # a saturation estimate needs the token rate 20 % away from the reference's: closer is noise
    max_saturation_ratio: float = 10.0  # TPOT flat across loads: saturation far away, capped at 10x the reference rate
    min_samples: int = 5  # a learned reference judges only after 5 windows (10 s at a 2 s scrape): one window's few requests mislead


DEFAULT_LEARNING = LearningPolicy()


def _ewma(old: float | None, new: float | None, alpha: float) -> float | None:
    if new is None:
        return old
    if old is None:
        return new
    return (1.0 - alpha) * old + alpha * new


def learn_reference(
    current: Reference | None, snapshot: SliceSnapshot, diagnosis: Diagnosis, policy: LearningPolicy = DEFAULT_LEARNING
) -> Reference | None:
    """The reference after this window; ``current`` unchanged when the window must not teach anything."""
    if current is not None and current.source == "configured":
        return current
    if diagnosis.regime is not Regime.HEALTHY or diagnosis.slo is not SloState.MET or diagnosis.confidence < policy.min_confidence:
        return current
    if snapshot.requests_waiting is not None and snapshot.requests_waiting > 0:
        return current  # a queue inflates TTFT even while the SLO still holds
    base = current or Reference()
    # An equal-weight mean over the first windows, then the EWMA: the first window must not dominate.
    a = max(policy.alpha, 1.0 / (base.samples + 1))
    learned = Reference(
        ttft_p50_s=_ewma(base.ttft_p50_s, snapshot.ttft_p50_s, a),
        ttft_mean_s=_ewma(base.ttft_mean_s, snapshot.ttft_mean_s, a),
        tpot_p50_s=_ewma(base.tpot_p50_s, snapshot.tpot_p50_s, a),
        tpot_mean_s=_ewma(base.tpot_mean_s, snapshot.tpot_mean_s, a),
        output_tokens_per_s=_ewma(base.output_tokens_per_s, snapshot.output_tokens_per_s, a),
        ttft_p99_s=_ewma(base.ttft_p99_s, snapshot.ttft_p99_s, a),
        tpot_p99_s=_ewma(base.tpot_p99_s, snapshot.tpot_p99_s, a),
        tokens_per_s_saturation=_ewma(base.tokens_per_s_saturation, _saturation(base, snapshot, policy), a),
        source="learned",
        samples=base.samples + 1,
    )
    if all(v is None for v in (learned.ttft_p50_s, learned.ttft_mean_s, learned.tpot_p50_s, learned.tpot_mean_s)):
        return current
    return learned


def _saturation(ref: Reference, snap: SliceSnapshot, policy: LearningPolicy) -> float | None:
    """One estimate of the decode saturation rate from the reference point and this window."""
    r0, t0 = ref.output_tokens_per_s, ref.tpot_p50_s if ref.tpot_p50_s is not None else ref.tpot_mean_s
    r1 = snap.output_tokens_per_s
    t1 = snap.tpot_p50_s if snap.tpot_p50_s is not None else snap.tpot_mean_s
    if r0 is None or t0 is None or r1 is None or t1 is None or min(r0, t0, r1, t1) <= 0:
        return None
    if abs(r1 - r0) < policy.min_rate_step * r0:
        return None
    slope = (1.0 / t0 - 1.0 / t1) / (r1 - r0)  # 1/TPOT falls by `slope` per token/s
    cap = policy.max_saturation_ratio * max(r0, r1)
    if slope <= 0:
        return cap
    # A healthy window ran below saturation: the estimate never falls under the rates seen.
    return min(cap, max(r0 + 1.0 / (slope * t0), 1.05 * max(r0, r1)))


def usable_reference(reference: Reference | None, policy: LearningPolicy | None = DEFAULT_LEARNING) -> Reference | None:
    """The reference to judge with: a learned one only once it has seen ``min_samples`` windows."""
    if reference is None or reference.source != "learned" or policy is None:
        return reference
    return reference if reference.samples >= policy.min_samples else None
