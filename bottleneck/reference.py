"""Learn a slice's reference (its unconstrained behaviour) from healthy windows. Pure.

Only latency centres (TTFT/TPOT p50 and mean) are learned: they barely move with load while a
slice is healthy. Output tokens/s grows with load, so a throughput reference learned at one load
would misjudge another; it comes from configuration or from the input (``ref_output_tokens_per_s``).
A configured reference is never overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferslice.diagnosis import Diagnosis, Regime, SloState
from inferslice.snapshot import Reference, SliceSnapshot


@dataclass(frozen=True)
class LearningPolicy:
    alpha: float = 0.1  # EWMA weight of one window: ~10 windows (20 s at a 2 s scrape) to follow a real shift
    min_confidence: float = 0.6  # learn only from windows the classifier is sure are healthy
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
        output_tokens_per_s=base.output_tokens_per_s,
        source="learned",
        samples=base.samples + 1,
    )
    if all(v is None for v in (learned.ttft_p50_s, learned.ttft_mean_s, learned.tpot_p50_s, learned.tpot_mean_s)):
        return current
    return learned


def usable_reference(reference: Reference | None, policy: LearningPolicy | None = DEFAULT_LEARNING) -> Reference | None:
    """The reference to judge with: a learned one only once it has seen ``min_samples`` windows."""
    if reference is None or reference.source != "learned" or policy is None:
        return reference
    return reference if reference.samples >= policy.min_samples else None
