"""The exporter's Ray Serve discovery and ray_vllm_* / ray_serve_* reading against a real Ray 2.60 capture.

tests/fixtures/ray-2.60.0/ was written by tests/rayserve/ray_check.py (a real Ray Serve testbed: one
application per tier, Serve replicas wrapping the engine emulator, whose vLLM families go through
Ray's metrics agent the way vLLM's Ray stat logger records them); see the README there.
"""

from __future__ import annotations

import json
from pathlib import Path

from inferslice.common.exposition import parse_exposition
from inferslice.exporters.engine.readings import front_readings_from_exposition, reading_from_exposition
from inferslice.exporters.engine.targets import targets_from_serve_applications

RAY = Path(__file__).resolve().parents[1] / "fixtures" / "ray-2.60.0"


def _apps(d: Path) -> dict[str, object]:
    return dict(json.loads((d / "serve-applications.json").read_text()))


def check_discovery(d: Path) -> None:
    disc = targets_from_serve_applications(_apps(d), metrics_port=8080)
    assert sorted(t.slice for t in disc.replicas) == ["free", "premium", "standard"]
    assert {t.url for t in disc.replicas} == {"http://127.0.0.1:8080/metrics"}  # one node: one agent serves all
    assert all(t.state == "ready" for t in disc.replicas)
    expo = (d / "ray-agent-metrics.txt").read_text()
    for t in disc.replicas:  # the REST API's replica_id is the ReplicaId label Ray's agent exports
        assert t.ray_replica_id and f'ReplicaId="{t.ray_replica_id}"' in expo


def check_reading(d: Path) -> None:
    disc = targets_from_serve_applications(_apps(d), metrics_port=8080)
    rid = next(t.ray_replica_id for t in disc.replicas if t.slice == "free")
    ray = reading_from_exposition(parse_exposition((d / "ray-agent-metrics.txt").read_text()), rid)
    own = reading_from_exposition(parse_exposition((d / "free-engine-metrics.txt").read_text()))
    # Ray exports a counter only once it has been incremented (vLLM's wrapper skips inc(0) too): zeros are absent.
    assert ray.counters == {k: v for k, v in own.counters.items() if v}
    assert ray.success == {k: v for k, v in own.success.items() if v}
    assert own.counters["generation_tokens"] > 0
    for key, h in own.histograms.items():  # bucket counts exact (the mirror's sums are bucket upper bounds)
        assert ray.histograms[key].edges == h.edges
        assert ray.histograms[key].cumulative == h.cumulative


def check_fronts(d: Path) -> None:
    fronts = front_readings_from_exposition(parse_exposition((d / "ray-agent-metrics.txt").read_text()), None)
    assert set(fronts) == {"free", "standard", "premium"}
    assert all(f.target_replicas == 1.0 and f.queued == 0.0 and f.ongoing == 0.0 for f in fronts.values())


def test_discovery_finds_one_target_per_serve_replica_at_the_node_agent() -> None:
    check_discovery(RAY)


def test_ray_vllm_reading_equals_the_engines_own_metrics() -> None:
    check_reading(RAY)


def test_serve_router_metrics_per_application() -> None:
    check_fronts(RAY)
