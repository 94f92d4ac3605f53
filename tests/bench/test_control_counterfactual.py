"""Futility by counterfactual replay (bench/control_counterfactual.py): remedies judged by removing them.

Expectations come from the model's physics, not from the code under test: a Premium replica completes
~1.25 req/s, so 2.5 req/s on one replica misses most first tokens and five replicas hold it; a client
cap at a third of what a tier streams (190 tokens x 2430 bit a request) holds its first tokens back,
and a cap far above the demand holds back nothing.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from inferslice.bench.control import BenchSettings, _reference, run_one
from inferslice.bench.control_counterfactual import Start, counterfactual_futility, replay, span_of, without
from inferslice.bench.control_scenarios import Scenario, scenarios
from inferslice.bench.control_sim import BITS_PER_TOKEN, TOKENS_MEAN
from inferslice.topology import load_topology

TOP = load_topology(None)
SETTINGS = BenchSettings(duration_s=90.0)


def _scenario(load: dict[str, float], caps: list[tuple[float, str, float | None]] | None = None) -> Scenario:
    return Scenario("test", lambda tier, t: load.get(tier, 0.2), lambda slot, t: 1.0, caps=caps or [])


def _start(replicas: dict[str, int]) -> Start:
    return Start({t.name: replicas.get(t.name, 1) for t in TOP.tiers}, {t.name: None for t in TOP.tiers}, {})


def test_a_scale_out_against_a_capacity_shortage_recovers_its_misses() -> None:
    # Early, before the backlog grows past what five replicas drain in seconds (a FIFO backlog makes
    # every later arrival miss until it is gone, with or without the replicas).
    sc = _scenario({"premium": 2.5})
    entries = [(10.0, "premium", "scale_out", 5, 1)]
    (v,) = counterfactual_futility(TOP, sc, 1, SETTINGS, _start({}), entries)
    assert v.misses_without > 100  # one replica at 2x its rate: most of 80 s of arrivals miss
    assert v.misses_with < v.misses_without / 2
    assert not v.futile


def test_a_cap_raise_on_a_tier_its_cap_does_not_bind_is_futile() -> None:
    demand_bps = 4.0 * TOKENS_MEAN * BITS_PER_TOKEN
    sc = _scenario({"premium": 4.0}, caps=[(0.0, "premium", 20 * demand_bps)])
    entries = [(30.0, "premium", "cap_change", 40 * demand_bps, 20 * demand_bps)]
    (v,) = counterfactual_futility(TOP, sc, 1, SETTINGS, _start({}), entries)
    assert v.misses_without > 50  # the tier is short of replicas, not of bandwidth
    assert v.misses_with == v.misses_without
    assert v.futile


def test_a_cap_raise_where_the_cap_binds_is_not_futile() -> None:
    demand_bps = 1.0 * TOKENS_MEAN * BITS_PER_TOKEN
    sc = _scenario({"standard": 1.0}, caps=[(0.0, "standard", demand_bps / 3)])
    entries = [(30.0, "standard", "cap_change", 10 * demand_bps, demand_bps / 3)]
    (v,) = counterfactual_futility(TOP, sc, 1, SETTINGS, _start({"standard": 3}), entries)
    assert v.misses_without > 20
    assert v.recovered >= v.misses_without / 2
    assert not v.futile


def test_a_remedy_in_a_span_without_misses_is_not_futile() -> None:
    sc = _scenario({"premium": 0.3})  # a quarter of one replica's rate: nothing misses
    entries = [(30.0, "premium", "scale_out", 2, 1)]
    (v,) = counterfactual_futility(TOP, sc, 1, SETTINGS, _start({}), entries)
    assert v.misses_without == 0 and not v.futile


def test_a_scale_outs_span_lasts_while_its_replicas_do() -> None:
    entries = [
        (30.0, "premium", "scale_out", 3, 1),  # starts two replicas
        (40.0, "premium", "cap_change", 9e6, 3e6),  # another knob: ends nothing
        (50.0, "standard", "scale_in", 1, 2),  # another tier: neither
        (60.0, "premium", "scale_in", 2, 3),  # retires one of the two
        (70.0, "premium", "scale_in", 1, 2),  # retires the other
        (80.0, "premium", "cap_change", 3e6, 9e6),
    ]
    cold, window = TOP.timing.cold_start_s, SETTINGS.window_s
    assert span_of(TOP, SETTINGS, entries, 0) == (30.0, 70.0 + 2 * window + cold)
    assert span_of(TOP, SETTINGS, entries, 1) == (40.0, 80.0 + 2 * window)  # a cap: to the next cap action
    assert span_of(TOP, SETTINGS, entries[:5], 1) == (40.0, SETTINGS.duration_s)  # none: to the end


def test_without_a_scale_out_later_targets_lose_only_its_own_surviving_replicas() -> None:
    entries = [
        (10.0, "premium", "scale_out", 2, 1),  # A: one replica
        (11.0, "premium", "scale_out", 4, 2),  # B: two more (a stepwise scaler: HPA adds pods per sync)
        (20.0, "premium", "scale_in", 3, 4),  # retires one of B's (newest first): A's survives
        (30.0, "premium", "scale_in", 1, 3),  # retires the rest
        (40.0, "premium", "scale_out", 3, 1),  # new replicas, none of A's
    ]
    rest, ends = without(entries, 0)
    assert [e[3] for _, e in rest] == [3, 2, 1, 3]
    assert ends == 30.0


def test_each_step_of_a_stepwise_scale_out_that_is_needed_is_not_futile() -> None:
    # 4.5 req/s needs five replicas (~6.3 req/s; four give 5.0: utilisation 0.9, the queue stands).
    # A scaler that adds one replica at a time must not have its early steps judged futile because
    # the next step's absolute target would otherwise carry their replicas.
    sc = _scenario({"premium": 4.5})
    entries = [(2.0 + k * 0.5, "premium", "scale_out", 2 + k, 1 + k) for k in range(4)]
    verdicts = counterfactual_futility(TOP, sc, 1, SETTINGS, _start({}), entries)
    assert len(verdicts) == 4
    assert all(not v.futile and v.recovered > 0 for v in verdicts), verdicts


def test_a_remedy_while_the_tier_is_within_its_p99_is_not_futile() -> None:
    sc = _scenario({"premium": 1.0}, caps=[(0.0, "premium", 50e6)])
    entries = [(30.0, "premium", "cap_change", 100e6, 50e6)]
    (v,) = counterfactual_futility(TOP, sc, 1, SETTINGS, _start({"premium": 3}), entries)
    assert v.misses_without <= 0.01 * v.arrived and not v.futile


def test_scale_ins_and_cap_cuts_are_not_judged() -> None:
    sc = _scenario({"premium": 4.0})
    entries = [(20.0, "premium", "scale_out", 3, 1), (40.0, "premium", "scale_in", 1, 3), (50.0, "premium", "cap_change", 1e6, 2e6)]
    verdicts = counterfactual_futility(TOP, sc, 1, SETTINGS, _start({}), entries)
    assert [v.kind for v in verdicts] == ["scale_out"]


def test_removing_an_action_changes_the_replay_and_keeping_all_reproduces_it() -> None:
    sc = _scenario({"premium": 4.0})
    entries = [(30.0, "premium", "scale_out", 5, 1)]
    a = replay(TOP, sc, 1, SETTINGS, _start({}), entries)
    b = replay(TOP, sc, 1, SETTINGS, _start({}), entries)
    c = replay(TOP, sc, 1, SETTINGS, _start({}), entries, drop=0)
    assert len(a.done) == len(b.done) and [r.first_token_s for r in a.done] == [r.first_token_s for r in b.done]
    assert len(c.done) < len(a.done)  # one replica finishes fewer requests in the same 90 s


@pytest.mark.parametrize(("scenario", "policy"), [("overlap", "inferslice"), ("gpu-share-drop", "keda_noc_mover")])
def test_the_replay_of_a_closed_loop_run_reproduces_it_request_by_request(scenario: str, policy: str) -> None:
    # run_one checks it (a RuntimeError otherwise): every action that reached the model was logged,
    # relocations and cap changes included (keda_noc_mover: a composite that moves replicas and needs
    # no Ray, which `make test` runs without).
    settings = replace(BenchSettings(), counterfactual_policies=(policy,))
    cell = run_one(TOP, scenarios()[scenario], policy, 1, settings, _reference(TOP, settings))
    assert cell["counterfactual_remedies_judged"] >= 1
    assert cell["counterfactual_futile_actions"] == len(cell["counterfactual_futile"])


def test_an_action_missing_from_the_log_is_caught() -> None:
    sc = _scenario({"premium": 4.0})
    entries = [(30.0, "premium", "scale_out", 5, 1)]
    ran = replay(TOP, sc, 1, SETTINGS, _start({}), entries)
    with pytest.raises(RuntimeError, match="does not reproduce"):
        counterfactual_futility(TOP, sc, 1, SETTINGS, _start({}), [], reference=ran)
