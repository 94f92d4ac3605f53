"""v16: the attribution as the verdict reads it (``attribution.settle``).

The counterfactual corpus measures a cause's share as the excess that removing it alone removes. On
the seen seeds the physics left two parts of an excess where no cause removes them: the part no
relation placed (``base_s`` above the reference) at a verdict that names one binding resource, and
waiting at a compute or network verdict whose judge found no queue material (the backlog the slow
engine or the full link leaves behind). Expectations below are written from that reading, by hand.
"""

from __future__ import annotations

import importlib

import pytest
from hypothesis import given

from inferslice.bottleneck import classify
from inferslice.bottleneck.attribution import attribute, settle
from inferslice.bottleneck.thresholds import DEFAULT
from inferslice.diagnosis import Attribution, LatencyShare, Regime
from inferslice.snapshot import SliceSnapshot, snapshot_from_dict
from tests.bottleneck.test_attribution_properties import SETTINGS, snapshots

classify_module = importlib.import_module("inferslice.bottleneck.classify")  # the package exports the function under its name

# P99 TTFT 2.0 s over a 0.1 s reference: 1.9 s of excess, 0.5 s of it queue, 1.0 s compute, 0.4 s placed nowhere.
TTFT = LatencyShare("ttft_p99", 2.0, 0.1, queue_s=0.5, network_s=0.0, compute_s=1.0, base_s=0.5)
# A statistic under its reference has no excess: nothing to settle.
TPOT = LatencyShare("tpot_p99", 0.03, 0.034, base_s=0.03)
RAW = Attribution((TTFT, TPOT), (("queue", 0.2632), ("network", 0.0), ("compute", 0.5263)))


def _parts(s: LatencyShare | None) -> tuple[float, float, float, float]:
    assert s is not None
    return (s.queue_s, s.network_s, s.compute_s, s.base_s)


def test_a_compute_verdict_naming_no_queue_takes_the_wait_and_the_rest() -> None:
    a = settle(RAW, "compute", queue_named=False, material=frozenset({"ttft_p99"}))
    assert _parts(a.share("ttft_p99")) == pytest.approx((0.0, 0.0, 1.9, 0.1))
    assert a.share("tpot_p99") == TPOT
    assert a.fraction("compute") == 1.0 and a.fraction("queue") == 0.0 and a.fraction("network") == 0.0


def test_a_named_queue_keeps_its_wait() -> None:
    a = settle(RAW, "compute", queue_named=True, material=frozenset({"ttft_p99"}))
    assert _parts(a.share("ttft_p99")) == pytest.approx((0.5, 0.0, 1.4, 0.1))
    assert a.fraction("queue") == pytest.approx(0.2632) and a.fraction("compute") == pytest.approx(1.4 / 1.9, abs=1e-4)


def test_a_queue_verdict_takes_the_rest_and_no_one_elses_share() -> None:
    a = settle(RAW, "queue", queue_named=True, material=frozenset({"ttft_p99"}))
    assert _parts(a.share("ttft_p99")) == pytest.approx((0.9, 0.0, 1.0, 0.1))


def test_a_statistic_the_judge_did_not_weigh_moves_its_seconds_not_the_fraction() -> None:
    a = settle(RAW, "compute", queue_named=True, material=frozenset())
    assert _parts(a.share("ttft_p99")) == pytest.approx((0.5, 0.0, 1.4, 0.1))
    assert a.fraction("compute") == pytest.approx(0.5263)


def test_the_physics_keeps_its_own_reading_and_the_diagnosis_settles_it() -> None:
    # A 0.2 s added round trip on a 0.3 s median TTFT excess, nothing waiting: the measured delay
    # explains 0.2 s; the network verdict takes the 0.1 s no relation placed.
    snap = snapshot_from_dict(
        {
            "slice": "standard", "slo_ttft_p99_s": 0.5, "ref_ttft_p50_s": 0.05, "ref_ttft_p99_s": 0.1,
            "ref_tpot_p50_s": 0.025, "ref_tpot_p99_s": 0.034, "ref_output_tokens_per_s": 370.0,
            "ttft_p50_s": 0.35, "ttft_p99_s": 0.5, "tpot_p50_s": 0.025, "tpot_p99_s": 0.034,
            "output_tokens_per_s": 370.0, "requests_waiting": 0.0, "replicas": 1.0,
            "wan_rtt_s": 0.22, "wan_base_rtt_s": 0.02,
        }
    )  # fmt: skip
    raw, _ = attribute(snap, DEFAULT)
    assert _parts(raw.share("ttft_p50"))[1] == pytest.approx(0.2)
    d = classify(snap)
    assert d.regime is Regime.NETWORK_LIMITED and d.attribution is not None
    assert _parts(d.attribution.share("ttft_p50")) == pytest.approx((0.0, 0.3, 0.0, 0.05))


@SETTINGS
@given(snapshots)
def test_settling_moves_no_verdict(snap: SliceSnapshot) -> None:
    settled = classify(snap)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(classify_module, "settle", lambda a, *_args: a)
        raw = classify(snap)
    assert (settled.regime, settled.secondary, settled.confidence, settled.network_cause) == (
        raw.regime,
        raw.secondary,
        raw.confidence,
        raw.network_cause,
    )
    assert settled.evidence == raw.evidence
    if settled.attribution is None or raw.attribution is None or settled.regime not in classify_module.RESOURCE_OF:
        assert settled.attribution == raw.attribution
        return
    primary = classify_module.RESOURCE_OF[settled.regime]
    named_queue = settled.regime is Regime.QUEUE_LIMITED or Regime.QUEUE_LIMITED in settled.secondary
    for s in settled.attribution.shares:
        before = raw.attribution.share(s.stat)
        assert before is not None and s.observed_s == before.observed_s and s.reference_s == before.reference_s
        if s.excess_s <= 0:
            assert s == before
            continue
        # Every second of the excess is placed, the reference level is not, and only the primary gains.
        assert s.queue_s + s.network_s + s.compute_s == pytest.approx(s.excess_s, rel=1e-9, abs=1e-12)
        for r in ("queue", "network", "compute"):
            if r != primary:
                expected = 0.0 if r == "queue" and not named_queue else before.seconds(r)
                assert s.seconds(r) == pytest.approx(expected, abs=1e-12)
