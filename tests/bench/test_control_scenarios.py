"""The control benchmark's scenarios and ground truth (bench/control_scenarios.py) and the model's
capacity they are sized from: expected values are worked out from the model's constants (24 ms +
0.2 ms per sequence, x1.15 per busy neighbour on a GPU, ~190 tokens per request) and the default
topology, independently of the code under test."""

from __future__ import annotations

import pytest

from inferslice.bench.control_scenarios import (
    RAMP_PEAK_RPS,
    Serving,
    addresses,
    causes,
    futile,
    model_of,
    scenarios,
    step_model,
)
from inferslice.bench.control_sim import ServingSim, tier_max_capacity_rps
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import load_topology

TOP = load_topology()


def test_capacity_at_the_ceiling_is_the_models_and_what_the_model_serves_when_saturated() -> None:
    # Standard: 3 replicas, each sharing its GPU with one other -> 6 / (190 x (24 + 1.2) ms x 1.15) = 1.09 req/s each.
    assert tier_max_capacity_rps(TOP, "standard") == pytest.approx(3 * 6 / (190 * 0.0252 * 1.15), rel=1e-9)
    assert tier_max_capacity_rps(TOP, "free") == pytest.approx(12 / (190 * 0.0264 * 1.15), rel=1e-9)
    # Saturate every tier at its ceiling (twice its capacity offered): the completions approach that capacity.
    offered = {t.name: 2 * tier_max_capacity_rps(TOP, t.name) for t in TOP.tiers}
    sim = ServingSim(TOP, lambda tier, t: offered[tier], lambda slot, t: 1.0, seed=3, cold_start_s=8.0)
    for t in TOP.tiers:
        sim.set_replicas(t.name, t.replicas_max, instant=True)
    while sim.t < 120.0:
        sim.step(0.25)
    for t in TOP.tiers:
        served = sum(1 for r in sim.done if r.tier == t.name and r.finish_s is not None and r.finish_s > 30.0) / 90.0
        assert served == pytest.approx(tier_max_capacity_rps(TOP, t.name), rel=0.12), t.name


def test_the_ramp_stays_inside_every_tiers_ceiling() -> None:
    sc = scenarios()["load-ramp"]
    for t in TOP.tiers:
        peak = max(sc.arrivals(t.name, x) for x in range(0, 241))
        assert peak == RAMP_PEAK_RPS[t.name]
        assert peak <= 0.9 * tier_max_capacity_rps(TOP, t.name)


def test_truth_names_what_binds_each_tier() -> None:
    sc = scenarios()["wan-cross-traffic"]
    serving = Serving(
        {"free": ["bristol/gpu0"], "standard": ["bristol/gpu0", "london/gpu1"], "premium": ["bristol/gpu1", "bristol/gpu1"]},
        {"standard": None, "premium": 0.5e6, "free": None},
    )
    before, during = causes(TOP, sc, 10.0, serving), causes(TOP, sc, 100.0, serving)
    assert before["standard"] == frozenset() and during["standard"] == {"wan:bristol|london"}  # only via its london replica
    assert "wan:bristol|london" not in during["premium"]  # Premium serves from bristol only here
    # Premium at 3 req/s: 2 replicas at bristol/gpu1 (each 1 busy neighbour: 1.09 req/s) -> 3 > 0.8 x 2.18: capacity;
    # its 0.5 Mbit/s cap < 3 x 190 x 2430 bit/s: the edge.
    assert during["premium"] == {"capacity", "edge_cap"}
    shared = causes(TOP, scenarios()["gpu-share-drop"], 100.0, serving)
    assert "contention" in shared["standard"] and "contention" not in shared["free"]


def test_futile_is_a_remedy_that_cannot_address_what_binds() -> None:
    sc = scenarios()["wan-delay-step"]
    wan = [(t, {"standard": frozenset({"wan:bristol|london"})}) for t in range(50, 80, 2)]
    assert futile(TOP, sc, (60.0, "standard", "scale_out", 3, 2), wan, 12.0)
    assert futile(TOP, sc, (60.0, "standard", "cap_change", 2e6, 1e6), wan, 4.0)
    assert not futile(TOP, sc, (60.0, "standard", "relocation", "dublin/gpu1", "london/gpu1"), wan, 12.0)
    assert futile(TOP, sc, (60.0, "standard", "relocation", "london/gpu0", "london/gpu1"), wan, 12.0)  # same path
    assert not futile(TOP, sc, (60.0, "standard", "scale_in", 2, 3), wan, 12.0)  # not a remedy
    quiet = [(t, {"standard": frozenset()}) for t in range(0, 50, 2)]
    assert not futile(TOP, sc, (20.0, "standard", "scale_out", 3, 2), quiet, 12.0)  # nothing bound: waste, not futility
    # A scale-out just before a ramp's shortage addresses it (the shortage is within its horizon).
    ramp = [(20.0, {"standard": frozenset({"wan:bristol|london"})}), (28.0, {"standard": frozenset({"capacity"})})]
    assert not futile(TOP, sc, (20.0, "standard", "scale_out", 3, 2), ramp, 12.0)
    assert addresses(TOP, sc, 100.0, "cap_change", 1e6, 2e6) == frozenset()  # a cap cut remedies nothing


def _run(
    scenario: str, replicas: dict[str, int], until_s: float, seed: int = 1, moves: tuple[tuple[float, str, str], ...] = ()
) -> tuple[ServingSim, dict[str, list[tuple[float, SliceSnapshot]]]]:
    """The model playing ``scenario`` with fixed replicas (no policy), its cap events applied, and
    ``moves`` (time, tier, slot: every replica of the tier not already there moves, make-before-break);
    per tier, the windows (end time, snapshot) every 2 s."""
    sc = scenarios()[scenario]
    sim = model_of(TOP, sc, seed)
    for tier, n in replicas.items():
        sim.set_replicas(tier, n, instant=True)
    caps, todo = sorted(sc.caps), sorted(moves)
    windows: dict[str, list[tuple[float, SliceSnapshot]]] = {t.name: [] for t in TOP.tiers}
    steps = 0
    while sim.t < until_s:
        while todo and todo[0][0] <= sim.t:
            _, tier, slot = todo.pop(0)
            for r in [r for r in sim.tiers[tier].replicas if r.state == "ready" and r.slot != slot]:
                sim.relocate(tier, r.id, slot)
        step_model(sim, caps, 0.25)
        steps += 1
        if steps % 8 == 0:
            for t in TOP.tiers:
                windows[t.name].append((sim.t, sim.window(t.name, 2.0)))
    return sim, windows


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def test_the_backpressure_trap_grows_the_router_queue_and_replicas_do_not_drain_it() -> None:
    """Premium at 2 req/s (~0.92 Mbit/s) capped at 0.5 Mbit/s from 50 s: its streams hold their
    admission slots longer, so requests wait in the router although replicas have room; twice the
    replicas leave the queue standing (the cap, not the replicas, paces it)."""
    _, w4 = _run("backpressure-trap", {"free": 1, "standard": 2, "premium": 4}, 150.0)
    _, w6 = _run("backpressure-trap", {"free": 1, "standard": 2, "premium": 6}, 150.0)

    def waiting(ws: list[tuple[float, SliceSnapshot]], t0: float, t1: float) -> float:
        return _mean([float(s.requests_waiting or 0.0) for t, s in ws if t0 <= t <= t1])

    assert waiting(w4["premium"], 20.0, 50.0) < 0.5  # 4 replicas x 5 slots carry 2 req/s with room
    assert waiting(w4["premium"], 100.0, 150.0) > 5.0  # behind the cap the queue stands
    assert waiting(w6["premium"], 100.0, 150.0) > 0.5 * waiting(w4["premium"], 100.0, 150.0)
    serving = Serving({"premium": ["bristol/gpu1", "bristol/gpu1", "london/gpu0", "london/gpu0"]}, {"premium": 0.5e6})
    assert causes(TOP, scenarios()["backpressure-trap"], 100.0, serving)["premium"] == {"edge_cap"}  # capacity does not bind


def test_moving_off_the_slowed_path_cures_the_wan_delay_step_and_the_cross_traffic() -> None:
    """Standard's replicas at london stream over the bristol-london link: with +0.45 s on it (or
    cross-traffic filling it) their first tokens miss the 0.5 s SLO; moved to dublin/gpu1 (another
    path, a GPU no tier reserves) they meet it again. A cap raise or more replicas at london cannot."""
    for scenario in ("wan-delay-step", "wan-cross-traffic"):
        stay = {"free": 1, "standard": 2, "premium": 2}
        _, held = _run(scenario, stay, 180.0)
        _, moved = _run(scenario, stay, 180.0, moves=((60.0, "standard", "dublin/gpu1"),))

        def ttft(ws: list[tuple[float, SliceSnapshot]]) -> float:
            return _mean([s.ttft_p99_s for t, s in ws if 100.0 <= t <= 180.0 and s.ttft_p99_s is not None])

        assert ttft(held["standard"]) > 0.5, scenario
        assert ttft(moved["standard"]) < 0.5 * ttft(held["standard"]), scenario


def test_the_flash_crowd_lands_on_premium_inside_standards_squeeze() -> None:
    sc = scenarios()["flash-crowd-squeeze"]
    cut = [(t, cap) for t, tier, cap in sorted(sc.caps) if tier == "standard"]
    (t_cut, cap), (t_lift, lifted) = cut[0], cut[-1]
    assert cap is not None and cap < 1e6 and lifted is None
    crowd = [t for t in range(0, 241) if sc.arrivals("premium", float(t)) > 3.0]
    assert crowd and t_cut < crowd[0] and crowd[-1] < t_lift  # inside the squeeze
    assert sc.arrivals("premium", float(crowd[0] - 5)) == pytest.approx(2.0)
    assert max(sc.arrivals("premium", float(t)) for t in crowd) == pytest.approx(4.5)
