"""The control benchmark's backend mapping (front state + engine exposition -> policy input), the
testbed run's scoring helpers, and Ray's own default policy driven through the shared interface."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferslice.bench.control import BenchSettings
from inferslice.bench.control_backend import ActionLog, ModelBackend, ReplicaLoad, TierReading, kv_usage, tier_reading
from inferslice.bench.control_policies import PAPER_COLD_START_S, POLICIES
from inferslice.bench.control_scenarios import scenarios
from inferslice.bench.control_sim import ServingSim
from inferslice.bench.control_testbed_bench import live_slots, schedule, tier_outcomes, window_p99
from inferslice.topology import load_topology

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_kv_usage_reads_vllms_gauge_and_the_fullest_engine() -> None:
    assert kv_usage((FIXTURES / "vllm-0.32.0-cpu-metrics-after-bench.txt").read_text()) == 0.0
    two = '# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine="0"} 0.25\nvllm:kv_cache_usage_perc{engine="1"} 0.75\n'
    assert kv_usage(two) == 0.75
    assert kv_usage("# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.5\n") == 0.5  # the older name
    assert kv_usage("up 1\n") is None
    assert kv_usage("not an exposition {{{\n") is None


def test_front_state_maps_to_what_policies_read() -> None:
    state = json.loads((FIXTURES / "testbed-front-admin-state.json").read_text())
    kv = kv_usage((FIXTURES / "testbed-engine-metrics.txt").read_text())
    assert kv is not None and 0.0 < kv < 1.0  # 4 streams in flight hold some KV blocks
    r = tier_reading(state, {state["replicas"][0]["id"]: kv})
    assert r.target == state["target"] and r.queued == state["queued"] and r.ongoing == state["ongoing"]
    assert [x.id for x in r.replicas] == [x["id"] for x in state["replicas"]]
    first = r.replicas[0]
    assert first.slot == f"{state['replicas'][0]['pop']}/gpu{state['replicas'][0]['gpu']}"
    assert first.running == state["replicas"][0]["in_flight"]
    assert first.kv_usage == kv
    assert all(x.kv_usage is None for x in r.replicas[1:])  # no reading: not invented


def test_stopping_replicas_drain_and_unknown_states_do_not_serve() -> None:
    state = {
        "target": 2, "queued": 3, "ongoing": 1,  # ongoing below queued: a torn read; ongoing includes the queue
        "replicas": [
            {"id": "a", "pop": "bristol", "gpu": 0, "state": "ready", "in_flight": 1},
            {"id": "b", "pop": "london", "gpu": 1, "state": "stopping", "in_flight": 2},
            {"id": "c", "pop": "london", "gpu": 1, "state": "failed", "in_flight": 0},
        ],
    }  # fmt: skip
    r = tier_reading(state, {})
    assert [x.state for x in r.replicas] == ["ready", "draining", "starting"]
    assert [x.id for x in r.ready] == ["a"]
    assert r.ongoing == 3


def test_a_moves_successor_is_not_an_extra_replica() -> None:
    top = load_topology()
    reps = (
        ReplicaLoad("s0", "bristol/gpu0", "ready", 1, None),
        ReplicaLoad("s1", "london/gpu1", "ready", 1, None),
        ReplicaLoad("s2", "dublin/gpu0", "starting", 0, None),  # successor of s1, cold-starting
        ReplicaLoad("s3", "london/gpu1", "draining", 1, None),
    )
    live = live_slots(top, {"standard": TierReading(2, 0, 2, reps)})
    assert live == {"standard": ["bristol/gpu0", "london/gpu1"]}


def test_a_ready_successor_before_its_predecessor_stops_is_not_an_extra_replica() -> None:
    """The front marks a successor ready a poll before the move stops the replica it relieves: for
    that instant both serve slot 1. Premium at its ceiling must not read as one beyond it."""
    top = load_topology()
    n = top.tier("premium").replicas_max
    state = {
        "target": n,
        "replicas": [{"id": f"p{i}", "slot": i, "pop": "london", "gpu": i % 2, "state": "ready"} for i in range(n)]
        + [{"id": "p1-next", "slot": 1, "pop": "dublin", "gpu": 0, "state": "ready"}],
    }
    r = tier_reading(state, {})
    assert len(r.ready) == n + 1  # both are ready in the front's answer
    assert len(live_slots(top, {"premium": r})["premium"]) == n
    other = {**state, "replicas": [*state["replicas"][:-1], {**state["replicas"][-1], "slot": n}]}
    assert len(live_slots(top, {"premium": tier_reading(other, {})})["premium"]) == n + 1  # a real extra replica still counts


def test_window_p99_and_outcomes_from_records() -> None:
    top = load_topology()
    t0 = 1000.0
    recs = [{"start_s": t0 + 10 + i * 0.1, "success": True, "ttft_s": 0.1} for i in range(9)]
    recs.append({"start_s": t0 + 10.95, "success": False, "ttft_s": None})
    assert window_p99(recs, t0, 11.0, 2.0, 30.0) == 30.0  # the failed request is the P99 of 10
    assert window_p99(recs, t0, 5.0, 2.0, 30.0) is None
    bs = BenchSettings(duration_s=20.0, warmup_s=5.0)
    early = {"start_s": t0 + 1.0, "success": True, "ttft_s": 0.1}  # in the warm-up: not scored
    late = {"start_s": t0 + 18.0, "success": False, "ttft_s": None}  # in the last 4 s: not scored either
    slow = {"start_s": t0 + 12.0, "success": True, "ttft_s": 0.9}  # served, but past the SLO
    out = tier_outcomes(top, {"standard": [early, *recs, slow, late]}, t0, bs, 4.0)
    assert out["standard"]["goodput_rps"] == pytest.approx(9 / 11.0)  # scored span: 5 s to 16 s
    assert out["standard"]["slo_attainment"] == pytest.approx(9 / 11)  # 9 good of 9 + failed + slow
    assert out["free"] == {"goodput_rps": 0.0, "slo_attainment": 1.0}


def test_schedule_follows_the_compressed_scenario() -> None:
    sc = scenarios(0.25)["load-ramp"]  # Free 0.8 -> 1.4 req/s from 10 to 37.5 s
    pts = dict(schedule(sc, "free", 60.0))
    assert pts[0.0] == 0.8 and pts[10.0] == 0.8 and pts[40.0] == 1.4
    assert 0.8 < pts[20.0] < 1.4
    assert max(pts) == 60.0
    pre = schedule(sc, "free", 60.0, preroll_s=12.0)  # the t = 0 rate first, then the scenario 12 s later
    assert pre[0] == (0.0, 0.8) and dict(pre)[12.0 + 40.0] == 1.4 and pre[-1][0] == 72.0


def test_ray_serves_own_policy_scales_a_queueing_tier_out_and_stays_in_bounds() -> None:
    # Ray is the optional `ray` extra (about 500 MB); CI's real-engine hook installs it and runs this test.
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed: pip install 'inferslice[ray]'")
    top = load_topology()
    sim = ServingSim(top, lambda tier, t: 4.0 if tier == "standard" else 0.2, lambda slot, t: 1.0, seed=1, cold_start_s=8.0)
    log = ActionLog()
    policy = POLICIES["ray_serve_default"](top.timing.cold_start_s / PAPER_COLD_START_S)
    backend = ModelBackend(sim)
    policy.setup(backend, top, log)
    while sim.t < 40.0:
        sim.step(0.25)
        policy.tick(sim.t, None, None)
    ups = [e for e in log.entries if e[1] == "standard" and e[2] == "scale_out"]
    assert ups and backend.reading("standard").target == top.tier("standard").replicas_max
    assert all(e[3] <= top.tier(e[1]).replicas_max for e in log.entries)
    assert not [e for e in log.entries if e[1] == "free" and e[2] == "scale_out"]  # 0.2 req/s needs no second replica


def test_the_ray_policy_without_ray_is_a_clear_error_before_any_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import argparse
    import importlib.util

    from inferslice.bench import control
    from inferslice.errors import InputError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    ran: list[object] = []
    monkeypatch.setattr(control, "run_control_bench", lambda *a, **k: ran.append(a))
    args = argparse.Namespace(scenarios="load-ramp", policies="static,ray_serve_default", seeds="1", backend="model", out=tmp_path)
    with pytest.raises(InputError) as err:
        control.run(args)
    assert "inferslice[ray]" in str(err.value) and ran == []


def test_the_models_window_reports_the_lowest_replicas_gpu_share_as_the_collectors_do() -> None:
    # Standard on bristol/gpu0 (full) and london/gpu1 twice (0.35): the collectors' gpu_share is the
    # min over replicas (collectors/fields.py), so the model's window reads 0.35, not the mean 0.57
    top = load_topology(None)
    sim = ServingSim(top, lambda tier, t: 0.5, lambda slot, t: 0.35 if slot.startswith("london") else 1.0, seed=1, cold_start_s=8.0)
    sim.set_replicas("standard", 3, instant=True)
    for _ in range(8):
        sim.step(0.25)
    assert sim.window("standard", 2.0).gpu_share == pytest.approx(0.35)
