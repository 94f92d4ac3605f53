"""Scoring a Ray Serve timeline run of the ramp (bench/control_rayserve.py): pure, no Ray."""

from __future__ import annotations

import pytest

from inferslice.bench.control_rayserve import compare, ramp_schedule, score
from inferslice.testbed.rayserve.timeline import parse_schedule


def test_the_ramp_schedule_is_the_scenarios_for_that_tier() -> None:
    pts = dict(ramp_schedule("standard", 240.0))
    assert pts[0.0] == 1.0 and pts[40.0] == 1.0 and pts[150.0] == 2.3 and pts[240.0] == 2.3
    assert 1.0 < pts[95.0] < 2.3
    spec = ",".join(f"{t:g}:{r:g}" for t, r in ramp_schedule("standard", 240.0))
    assert parse_schedule(spec) == ramp_schedule("standard", 240.0)


def test_score_counts_good_requests_and_integrates_replicas_over_the_scored_span() -> None:
    result = {
        "duration_s": 100.0,
        "slo_ttft_p99_s": 0.5,
        "t0_s": 10.0,  # the load started 10 s into the timeline
        # replicas: 1 until load time 30 s, then 3 (target 3 from 25 s)
        "timeline": [{"t_s": 10.0 + t, "running": 1 if t < 30 else 3, "target": 1 if t < 25 else 3} for t in range(0, 101, 5)],
        "requests": [
            {"start_s": 5.0, "ttft_s": 0.1, "success": True},  # before the scored span (20 s)
            {"start_s": 30.0, "ttft_s": 0.1, "success": True},
            {"start_s": 40.0, "ttft_s": 0.9, "success": True},  # served, but past the SLO
            {"start_s": 50.0, "ttft_s": None, "success": False},
            {"start_s": 60.0, "ttft_s": 0.2, "success": True},
            {"start_s": 95.0, "ttft_s": 0.1, "success": True},  # in the last 10 s: not scored
        ],
    }
    s = score(result)
    assert s["requests"] == 4 and s["goodput_rps"] == pytest.approx(2 / 70.0) and s["slo_attainment"] == 0.5
    assert s["replica_seconds_running"] == pytest.approx(10 * 1 + 60 * 3)  # 20-30 s at 1, 30-90 s at 3
    assert s["replica_seconds_target"] == pytest.approx(5 * 1 + 65 * 3)
    other = {**s, "goodput_rps": s["goodput_rps"] / 2, "replica_seconds_running": s["replica_seconds_running"] * 2}
    assert compare({"inferslice-queue": s, "ray-default": other}) == {"goodput_ratio": 2.0, "replica_seconds_ratio": 0.5}
