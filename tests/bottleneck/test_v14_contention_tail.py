"""v14: the window after a co-tenant leaves. Requests that decoded under it finish there, their TPOT
tail carrying its slower steps, while the window's own statistics and gauges read clean; the GPU
share the window before reported (``prior_gpu_share``) says why. The verdict names compute below the
controller's action bar: the cause has left, nothing is to be remedied."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from inferslice.actions import Action
from inferslice.bench.corpus_score import load
from inferslice.bottleneck import classify
from inferslice.bottleneck.classify import TAIL
from inferslice.bottleneck.episodes import DEFAULT_HYSTERESIS, EpisodeState, step
from inferslice.control.policy import ControlState, decide
from inferslice.control.settings import ControlSettings
from inferslice.diagnosis import CONFIDENT, Regime
from inferslice.errors import InputError
from inferslice.service.diagnosis import DiagnosisService
from inferslice.service.store import Store
from inferslice.snapshot import SliceSnapshot, snapshot_from_dict

from ..control.helpers import POLICIES, TOPOLOGY, state_of

ROOT = Path(__file__).resolve().parents[2]

# Every statistic at its reference, the link far from its cap, requests in flight: healthy by itself.
CLEAN = SliceSnapshot(
    "premium", window_end_s=1000.0, window_s=6.0, slo_ttft_p99_s=0.5,
    ttft_p50_s=0.08, ttft_p99_s=0.2, tpot_p50_s=0.05, tpot_p99_s=0.05, output_tokens_per_s=100.0,
    request_count=12.0, tpot_request_count=10.0, requests_running=3.0, requests_waiting=0.0,
    replicas=2.0, replicas_max=6.0, gpu_share=1.0,
    link_rx_bps=4e5, link_cap_bps=1e10, link_capacity_bps=1e10,
    ref_ttft_p50_s=0.08, ref_ttft_p99_s=0.2, ref_tpot_p50_s=0.05, ref_tpot_p99_s=0.05, ref_output_tokens_per_s=100.0,
)  # fmt: skip


def test_a_clean_window_after_a_share_drop_reads_the_tail_below_the_action_bar() -> None:
    alone = classify(CLEAN)
    assert alone.regime is Regime.HEALTHY and alone.confidence >= CONFIDENT
    d = classify(dataclasses.replace(CLEAN, prior_gpu_share=0.4))
    assert d.regime is Regime.COMPUTE_LIMITED
    assert d.confidence == TAIL
    # Below what the controller acts on and what the episodes count: nobody acts or is paged on it.
    assert d.confidence < DEFAULT_HYSTERESIS.min_confidence and d.confidence < ControlSettings().min_confidence
    prior = [e for e in d.evidence if e.signal == "prior_gpu_share"]
    assert prior and prior[0].value == 0.4 and prior[0].crossed
    assert any(e.signal == "verdict" and "co-tenant" in (e.note or "") for e in d.evidence)


def test_the_tail_needs_a_drop_before_that_has_ended_and_requests_that_saw_it() -> None:
    # No drop before (0.9 is the reduced-share bar, not under it).
    assert classify(dataclasses.replace(CLEAN, prior_gpu_share=0.9)).regime is Regime.HEALTHY
    # The share still reduced now: the window is judged on its own share, not as a tail.
    still = classify(dataclasses.replace(CLEAN, gpu_share=0.5, prior_gpu_share=0.4))
    assert not any(e.signal == "prior_gpu_share" for e in still.evidence)
    # Nothing served, running or finished in the window: idle, whatever came before.
    idle = dataclasses.replace(
        CLEAN, prior_gpu_share=0.4, request_count=0.0, tpot_request_count=0.0, requests_running=0.0,
        output_tokens_per_s=0.0, ttft_p50_s=None, ttft_p99_s=None, tpot_p50_s=None, tpot_p99_s=None,
    )  # fmt: skip
    assert classify(idle).regime is Regime.HEALTHY
    # A decode tail under its measured reference (or without one) shows no slower step finishing here.
    assert classify(dataclasses.replace(CLEAN, prior_gpu_share=0.4, tpot_p99_s=0.045)).regime is Regime.HEALTHY
    assert classify(dataclasses.replace(CLEAN, prior_gpu_share=0.4, ref_tpot_p99_s=None)).regime is not Regime.COMPUTE_LIMITED
    # A share the window does not report cannot say the co-tenant is still there: still the tail.
    assert classify(dataclasses.replace(CLEAN, gpu_share=None, prior_gpu_share=0.4)).regime is Regime.COMPUTE_LIMITED


def test_a_binding_cause_of_the_window_itself_comes_first() -> None:
    # A full link binds by itself, whatever the share before.
    capped = dataclasses.replace(CLEAN, link_rx_bps=9.9e5, link_cap_bps=1e6, tpot_p50_s=0.2, tpot_p99_s=0.3, prior_gpu_share=0.4)
    d = classify(capped)
    assert d.regime is Regime.NETWORK_LIMITED and not any(e.signal == "prior_gpu_share" for e in d.evidence)
    # v18 changed one case: a queue after the drop is the backlog the slowed engines left (compute,
    # at TAIL, the queue secondary: ``test_v18_rules.py``); v14 read it as the queue.
    queued = dataclasses.replace(CLEAN, ttft_p50_s=2.0, ttft_p99_s=3.0, requests_waiting=40.0, replicas=6.0, prior_gpu_share=0.4)
    assert classify(queued).regime is Regime.COMPUTE_LIMITED


def test_the_controller_leaves_a_tail_alone() -> None:
    """At the default settings a tail verdict moves nothing: the replicas read their full share, so a
    compute remedy could only scale out, for a co-tenant that has gone."""
    ss = state_of("premium", {"premium": 2}, CLEAN)

    def actions_over_ticks(trusted: float | None) -> list[Action]:
        st, out = ControlState(), []
        for k in range(6):
            d = classify(dataclasses.replace(CLEAN, window_end_s=1000.0 + 6.0 * k, prior_gpu_share=0.4))
            assert d.regime is Regime.COMPUTE_LIMITED
            verdict = d if trusted is None else dataclasses.replace(d, confidence=trusted)
            acts, st = decide(verdict, ss, POLICIES["premium"], d.window_end_s or 0.0, st)
            out += acts
        return out

    assert actions_over_ticks(None) == []
    # The same verdicts trusted would cost a replica: what the bar prevents.
    assert actions_over_ticks(0.9)


def test_prior_share_is_a_validated_ratio() -> None:
    assert snapshot_from_dict({"slice": "p", "prior_gpu_share": 0.3}).prior_gpu_share == 0.3
    with pytest.raises(InputError, match="prior_gpu_share"):
        snapshot_from_dict({"slice": "p", "prior_gpu_share": 1.5})


def test_a_tail_neither_opens_nor_closes_an_episode() -> None:
    """Two compute windows under the co-tenant, then its tail: three windows would open an episode if
    the tail counted; it is neutral, so none opens (and an open one is not closed by it either)."""
    under = dataclasses.replace(CLEAN, gpu_share=0.4, tpot_p50_s=0.12, tpot_p99_s=0.13)
    st, events = EpisodeState(), []
    for k, snap in enumerate([CLEAN, under, under, dataclasses.replace(CLEAN, prior_gpu_share=0.4), CLEAN]):
        d = classify(dataclasses.replace(snap, window_end_s=1000.0 + 6.0 * k))
        st, ev = step(st, d, 1000.0 + 6.0 * k, DEFAULT_HYSTERESIS)
        events += ev
    assert classify(under).regime is Regime.COMPUTE_LIMITED
    assert events == []


def test_the_service_fills_the_share_of_the_window_before() -> None:
    service = DiagnosisService(Store(":memory:"), TOPOLOGY, clock=lambda: 1000.0)
    first = dataclasses.replace(CLEAN, window_end_s=994.0, gpu_share=0.4)
    service.ingest(first)
    got = service.ingest(CLEAN)
    assert got.diagnosis.regime is Regime.COMPUTE_LIMITED and got.diagnosis.confidence == TAIL
    _, snap = service.latest_verdicts()["premium"]
    assert snap.prior_gpu_share == 0.4
    # A missed round is no predecessor: 12 s after a 6 s window.
    service2 = DiagnosisService(Store(":memory:"), TOPOLOGY, clock=lambda: 1000.0)
    service2.ingest(dataclasses.replace(CLEAN, window_end_s=988.0, gpu_share=0.4))
    assert service2.ingest(CLEAN).diagnosis.regime is Regime.HEALTHY
    # Windows that overlap (8 s every 2 s, the API loop's default): the one before ended at this one's start.
    service3 = DiagnosisService(Store(":memory:"), TOPOLOGY, clock=lambda: 1000.0)
    for end in (986.0, 988.0, 990.0, 992.0, 994.0, 996.0, 998.0):
        service3.ingest(dataclasses.replace(CLEAN, window_end_s=end, window_s=8.0, gpu_share=0.4 if end <= 992.0 else 1.0))
    got3 = service3.ingest(dataclasses.replace(CLEAN, window_end_s=1000.0, window_s=8.0))
    assert service3.latest_verdicts()["premium"][1].prior_gpu_share == 0.4 and got3.diagnosis.regime is Regime.COMPUTE_LIMITED
    later = service3.ingest(dataclasses.replace(CLEAN, window_end_s=1002.0, window_s=8.0))  # the one before (994) read 1.0
    assert later.diagnosis.regime is Regime.HEALTHY
    # A late window does not become the predecessor of one that began before it ended.
    service3.ingest(dataclasses.replace(CLEAN, window_end_s=1001.0, window_s=8.0, gpu_share=0.4))
    assert service3.ingest(dataclasses.replace(CLEAN, window_end_s=1004.0, window_s=8.0)).diagnosis.regime is Regime.HEALTHY
    # A window that carries its own prior share keeps it; ``diagnose`` keeps no state.
    kept = service.ingest(dataclasses.replace(CLEAN, window_end_s=1006.0, prior_gpu_share=1.0))
    assert kept.diagnosis.regime is Regime.HEALTHY
    service.ingest(dataclasses.replace(CLEAN, window_end_s=1012.0, gpu_share=0.4))
    assert service.diagnose(dataclasses.replace(CLEAN, window_end_s=1018.0)).regime is Regime.HEALTHY


def test_corpus_windows_carry_their_predecessors_share() -> None:
    """Seed 1004 (tune): a co-tenant at 0.395 on Premium from 14.8 s to 36.5 s, 6 s windows."""
    ws = {w.id: w for w in load([ROOT / "bench" / "results" / "diagnosis" / "corpus17" / "tune"]) if w.seed == 1004}
    for src in ("embedded", "prometheus"):
        during = ws[f"s1004-all-premium-w05/{src}"]  # 30-36 s: under the co-tenant
        after = ws[f"s1004-all-premium-w06/{src}"]
        assert during.snapshot.gpu_share is not None and during.snapshot.gpu_share < 0.9
        assert after.snapshot.prior_gpu_share == during.snapshot.gpu_share
        assert ws[f"s1004-all-premium-w01/{src}"].snapshot.prior_gpu_share is None  # the run's first window kept (w00 is warm-up) has none
        # The twin without the co-tenant never saw it: nothing to carry.
        assert ws[f"s1004--c1-premium-w06/{src}"].snapshot.prior_gpu_share in (None, 1.0)
