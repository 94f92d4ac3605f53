"""The corpus generator's draws (issue 17): a pure function of the seed, every cause on every tier,
magnitudes in the issue's ranges, compound pairs on one tier, WAN causes only where a link carries the tier."""

from __future__ import annotations

from collections import Counter

import pytest

from inferslice.bench.corpus_draws import (
    ARRIVALS,
    CAP_FRACTION,
    CLASS_OF,
    COMPOUND_PAIRS,
    GPU_SHARE,
    LOAD_MULTIPLE,
    MIXES,
    REAL_ENGINE_KINDS,
    REAL_ENGINE_MIX,
    WAN_CROSS_LOAD,
    WAN_DELAY_S,
    WAN_FRACTION,
    WAN_KINDS,
    breach_point,
    draw_run,
    parse_seeds,
    remote_pops,
    run_topology,
    twins,
)
from inferslice.topology import load_topology, parse_slot, topology_from_dict

TOP = load_topology(None)
PLANS = [draw_run(s, TOP) for s in range(600)]


def test_a_plan_is_a_function_of_its_seed() -> None:
    assert draw_run(17, TOP) == draw_run(17, TOP)
    assert draw_run(17, TOP) != draw_run(18, TOP)


def test_every_cause_class_hits_every_tier_and_every_kind_occurs() -> None:
    cells = Counter((c.cls, c.tier) for p in PLANS for c in p.causes)
    assert {(cls, t) for cls in ("queue", "network", "compute") for t in TOP.tier_names} <= set(cells)
    assert min(cells.values()) > 0.6 * max(cells.values())  # no cell starved
    assert set(CLASS_OF) == {c.kind for p in PLANS for c in p.causes}
    wan_tiers = {c.tier for p in PLANS for c in p.causes if c.kind in WAN_KINDS}
    assert wan_tiers == set(TOP.tier_names)  # free's one replica is sometimes placed off the gateway


def test_magnitudes_stay_in_the_issues_ranges() -> None:
    ranges = {"cap": CAP_FRACTION, "load": LOAD_MULTIPLE, "gpu": GPU_SHARE, "wan_cross": WAN_CROSS_LOAD, "wan_rate": WAN_FRACTION,
              "wan_delay": WAN_DELAY_S}  # fmt: skip
    for p in PLANS:
        for c in p.causes:
            lo, hi = ranges[c.kind]
            assert lo <= c.magnitude <= hi, c
            assert c.onset_s > 0 and c.end_s <= p.run_s + 1e-9


def test_two_causes_overlap_and_compound_pairs_are_all_drawn() -> None:
    pairs = Counter()
    for p in PLANS:
        if len(p.causes) == 2:
            a, b = p.causes
            assert a.tier != b.tier or (a.onset_s < b.end_s and b.onset_s < a.end_s)  # a compound overlaps
            assert (a.cls, a.tier) != (b.cls, b.tier)
            if a.tier == b.tier:
                pairs[tuple(sorted((a.cls, b.cls)))] += 1
    assert set(pairs) == {tuple(sorted(x)) for x in COMPOUND_PAIRS}
    assert sum(len(p.causes) == 0 for p in PLANS) > 0


def test_a_wan_cause_names_a_link_on_its_tiers_path() -> None:
    for p in PLANS:
        for c in p.causes:
            if c.kind not in WAN_KINDS:
                assert c.link is None
                continue
            tp = p.tier(c.tier)
            pops = remote_pops(TOP, tp)
            assert pops, (p.seed, c)
            on_path = set()
            for pop in pops:
                route = TOP.route(pop, TOP.client.gateway)
                on_path |= {f"wan-{route[i + 1]}-{route[i]}" for i in range(len(route) - 1)}
            assert c.link in on_path, (p.seed, c, on_path)


def test_every_drawn_topology_is_valid_and_keeps_the_gpu_slots() -> None:
    for p in PLANS[:100]:
        top = topology_from_dict(run_topology(TOP, p))
        for t in top.tiers:
            tp = p.tier(t.name)
            assert t.placement[: tp.replicas] == list(tp.placement[: tp.replicas])
            assert all(parse_slot(s)[0] in {x.name for x in top.pops} for s in t.placement)


def test_twins_run_clean_first_and_all_last() -> None:
    two = next(p for p in PLANS if len(p.causes) == 2)
    assert [label for label, _ in twins(two)] == ["clean", "-c0", "-c1", "all"]
    assert twins(two)[0][1] == frozenset({"c0", "c1"}) and twins(two)[-1][1] == frozenset()
    one = next(p for p in PLANS if len(p.causes) == 1)
    assert [label for label, _ in twins(one)] == ["clean", "all"]
    none = next(p for p in PLANS if not p.causes)
    assert [label for label, _ in twins(none)] == ["clean"]
    assert two.without(frozenset({"c0"})).causes == (two.causes[1],)


def test_breach_point_is_the_admission_capacity() -> None:
    assert breach_point(TOP, "free", 1) == 12
    assert breach_point(TOP, "premium", 2) == 12


def test_seed_ranges() -> None:
    assert parse_seeds("3-5") == [3, 4, 5]
    assert parse_seeds("7") == [7]
    assert parse_seeds("1-2,9,4-4") == [1, 2, 4, 9]
    for bad in ("", "5-3", "a-b", "-1"):
        with pytest.raises(ValueError):
            parse_seeds(bad)


def test_every_workload_shape_is_drawn_on_every_tier() -> None:
    """Item 1: the workload is drawn too: every length mix and arrival process on every tier, and
    autoscaling (from one replica) beside fixed replicas."""
    seen = Counter((tp.tier, tp.mix, tp.arrivals) for p in PLANS for tp in p.tiers)
    for t in TOP.tier_names:
        assert {m for (tier, m, _) in seen if tier == t} == set(MIXES)
        assert {a for (tier, _, a) in seen if tier == t} == set(ARRIVALS)
        scaled = [tp for p in PLANS for tp in p.tiers if tp.tier == t and tp.autoscale]
        fixed = [tp for p in PLANS for tp in p.tiers if tp.tier == t and not tp.autoscale]
        assert scaled and fixed and all(tp.replicas == 1 for tp in scaled)


def test_a_real_engine_plan_draws_one_single_cause_of_each_kind_on_its_tier() -> None:
    """Item 4: with a real vLLM tier, every single cause (cap cut, load step, compute contention as a
    CPU quota) lands on that tier, one at a time, at one fixed replica with short chat turns."""
    plans = [draw_run(s, TOP, real_tier="standard") for s in range(60)]
    assert all(len(p.causes) == 1 and p.causes[0].tier == "standard" for p in plans)
    assert {p.causes[0].kind for p in plans} == set(REAL_ENGINE_KINDS)
    real = [tp for p in plans for tp in p.tiers if tp.tier == "standard"]
    assert all(tp.replicas == 1 and not tp.autoscale and tp.mix == REAL_ENGINE_MIX for tp in real)
    assert plans[0] != draw_run(0, TOP)  # its own stream: the synthetic corpus's seed 0 is not this one
