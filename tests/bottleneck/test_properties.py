"""Property: classify never raises for any valid snapshot, and its confidence stays in [0, 1]."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferslice.bottleneck import EpisodeState, HysteresisPolicy, classify, step
from inferslice.diagnosis import Regime
from inferslice.snapshot import NUMERIC_FIELDS, RATIO_FIELDS, Reference, snapshot_from_dict

_nonneg = st.one_of(st.none(), st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False), st.integers(0, 10**6))
_ratio = st.one_of(st.none(), st.floats(min_value=0, max_value=1, allow_nan=False))

snapshots = st.fixed_dictionaries(
    {"slice": st.text(min_size=1, max_size=8)},
    optional={k: (_ratio if k in RATIO_FIELDS else _nonneg) for k in sorted(NUMERIC_FIELDS)},
)
references = st.one_of(
    st.none(),
    st.builds(
        Reference,
        ttft_p50_s=_ratio,
        ttft_mean_s=_ratio,
        tpot_p50_s=_ratio,
        tpot_mean_s=_ratio,
        output_tokens_per_s=_nonneg.map(lambda v: None if v is None else float(v)),
    ),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots, references)
def test_classify_total_and_bounded(doc: dict[str, Any], ref: Reference | None) -> None:
    snap = snapshot_from_dict(doc)
    d = classify(snap, ref)
    assert 0.0 <= d.confidence <= 1.0
    assert d.regime in Regime
    assert d.regime not in d.secondary
    bad = [(e.signal, e.value) for e in d.evidence if e.value is not None and not e.value >= 0.0]  # negative or NaN
    assert not bad, bad
    d.to_dict()  # serialisable
    state, _ = step(EpisodeState(), d, 0.0, HysteresisPolicy())
    assert isinstance(state, EpisodeState)
