"""Reference learning: only qualifying windows teach it, overrides win, state persists."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferslice.collectors import (
    JsonFileReferenceStore,
    LearnerSettings,
    LearnerState,
    ReferenceLearner,
    build_snapshots,
    load_reference_overrides,
    load_state,
    save_state,
)
from inferslice.errors import ConfigError
from inferslice.snapshot import SliceSnapshot


def calm(i: int = 0, **kw: float | None) -> SliceSnapshot:
    """An unconstrained Premium window (values from the brief's low-load behaviour)."""
    base: dict[str, float | None] = dict(
        window_end_s=1000.0 + 10 * i,
        slo_ttft_p99_s=0.5,
        ttft_p50_s=0.09 + 0.001 * i,
        ttft_p99_s=0.12,
        ttft_mean_s=0.1,
        tpot_p50_s=0.025,
        tpot_mean_s=0.026,
        output_tokens_per_s=370.0,
        request_rate=2.0,
        requests_running=10.0,
        requests_waiting=0.0,
        link_rx_bps=0.9e6,
        link_cap_bps=5e6,
    )
    base.update(kw)
    return SliceSnapshot(slice="premium", **base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"requests_waiting": 4.0}, "queue"),
        ({"link_rx_bps": 0.46e6, "link_cap_bps": 0.5e6}, "link near its cap"),
        ({"ttft_p99_s": 2.5}, "TTFT SLO missed"),
        ({"request_rate": 0.0, "output_tokens_per_s": 0.0}, "no traffic"),
        ({"preemptions_per_s": 0.2}, "preemptions"),
        ({"ttft_p50_s": None, "ttft_mean_s": None, "tpot_p50_s": None, "tpot_mean_s": None}, "no latency"),
    ],
)
def test_congested_windows_do_not_qualify(changes: dict[str, float], reason: str) -> None:
    learner = ReferenceLearner()
    snap = calm(**changes)
    assert reason in (learner.disqualification(snap) or "")
    assert learner.observe(LearnerState(), snap, 1000.0) == LearnerState()


def test_missing_queue_and_uncapped_link_still_qualify() -> None:
    assert ReferenceLearner().disqualification(calm(requests_waiting=None, link_cap_bps=None)) is None


def test_learns_median_of_qualifying_windows_only() -> None:
    learner = ReferenceLearner(LearnerSettings(min_observations=3, max_observations=5))
    state = LearnerState()
    assert learner.reference(state, "premium").source == "unset"
    for i in range(8):
        state = learner.observe(state, calm(i), 1000.0 + 10 * i)
        # a congested window in between: TTFT x30, TPOT x8 — must not move the reference
        state = learner.observe(state, calm(i, ttft_p50_s=3.0, tpot_p50_s=0.2, ttft_p99_s=5.0, requests_waiting=20.0), 1000.0 + 10 * i)
    ref = learner.reference(state, "premium")
    assert ref.source == "learned" and ref.samples == 5  # bounded to the last five
    assert ref.ttft_p50_s == pytest.approx(0.09 + 0.001 * 5)  # median of windows 3..7
    assert ref.tpot_p50_s == pytest.approx(0.025)
    assert ref.output_tokens_per_s == pytest.approx(370.0)
    assert learner.tokens_per_s_per_request(state, "premium") == pytest.approx(37.0)


def test_old_observations_expire() -> None:
    learner = ReferenceLearner(LearnerSettings(min_observations=1, max_age_s=100))
    state = learner.observe(LearnerState(), calm(0), 1000.0)
    assert learner.reference(state, "premium").samples == 1
    state = learner.observe(state, calm(0, requests_waiting=3.0), 1200.0)  # not qualifying, but time passed
    assert learner.reference(state, "premium").source == "unset"


def test_configured_values_win_field_by_field(tmp_path: Path) -> None:
    cfg = tmp_path / "refs.yaml"
    cfg.write_text("references:\n  premium:\n    tpot_p50_s: 0.03\n")
    learner = ReferenceLearner(LearnerSettings(min_observations=1), overrides=load_reference_overrides(cfg))
    state = learner.observe(LearnerState(), calm(0), 1000.0)
    ref = learner.reference(state, "premium")
    assert ref.tpot_p50_s == 0.03 and ref.source == "configured"
    assert ref.ttft_p50_s == pytest.approx(0.09)  # learned where configuration is silent
    # configured before anything was learned
    assert learner.reference(LearnerState(), "premium").tpot_p50_s == 0.03
    cfg.write_text("references:\n  premium:\n    tpot_p50: 0.03\n")
    with pytest.raises(ConfigError) as err:
        load_reference_overrides(cfg)
    assert err.value.field == "references.premium.tpot_p50"
    cfg.write_text("premium: {ttft_p50_s: -1}\n")
    with pytest.raises(ConfigError):
        load_reference_overrides(cfg)


def test_json_store_round_trip(tmp_path: Path) -> None:
    learner = ReferenceLearner(LearnerSettings(min_observations=2))
    state = LearnerState()
    for i in range(3):
        state = learner.observe(state, calm(i), 1000.0 + 10 * i)
    store = JsonFileReferenceStore(tmp_path / "refs" / "learned.json")
    assert store.get("premium") is None
    save_state(store, state)
    loaded = load_state(JsonFileReferenceStore(tmp_path / "refs" / "learned.json"), ["premium", "free"])
    assert loaded == state
    assert learner.reference(loaded, "premium") == learner.reference(state, "premium")


class _Fixed:
    """A MetricSource returning prepared snapshots (the real sources are tested elsewhere)."""

    def __init__(self, snaps: list[SliceSnapshot]) -> None:
        self.snaps = snaps

    def snapshot(self, slice: str, window_s: float, now_s: float) -> SliceSnapshot:
        return next(s for s in self.snaps if s.slice == slice)

    def snapshots(self, now_s: float, window_s: float | None = None) -> list[SliceSnapshot]:
        return self.snaps

    def health(self) -> dict[str, object]:
        return {"source": "fixed", "ok": True}


def test_build_snapshots_uses_reference_from_earlier_windows() -> None:
    learner = ReferenceLearner(LearnerSettings(min_observations=2))
    state = LearnerState()
    for i in range(2):
        snaps, state = build_snapshots(_Fixed([calm(i)]), state, 1000.0 + 10 * i, 10.0, learner)
        assert snaps[0].ref_ttft_p50_s is None  # not yet two qualifying windows before this one
    congested = calm(2, ttft_p50_s=3.0, ttft_p99_s=6.0, requests_waiting=12.0)
    snaps, new_state = build_snapshots(_Fixed([congested]), state, 1020.0, 10.0, learner)
    assert snaps[0].ref_ttft_p50_s == pytest.approx(0.0905) and snaps[0].ttft_p50_s == 3.0
    assert new_state == state  # the congested window taught nothing
    # an input that already carries a reference keeps it
    given = calm(3, ref_ttft_p50_s=0.2)  # type: ignore[arg-type]
    snaps, _ = build_snapshots(_Fixed([given]), state, 1030.0, 10.0, learner)
    assert snaps[0].ref_ttft_p50_s == 0.2 and snaps[0].ref_tpot_p50_s == pytest.approx(0.025)
