"""`inferslice testbed up --serving ray` without Ray or root: option parsing, the service specs, the
registry's Ray entries, slot claims, the relay's filter, and the exporter reading a real capture.

tests/fixtures/ray-2.60.0-testbed/ was captured from a real Ray 2.60 Serve on the netns testbed (see
its README): the relay's agent metrics, the PoP engine's own /metrics, the published registry entries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferslice.common.exposition import parse_exposition
from inferslice.common.registry import FrontEntry, Registry, ReplicaEntry, read_registry, write_registry, write_replicas_fragment
from inferslice.errors import ConfigError
from inferslice.exporters.engine.readings import front_readings_from_exposition, reading_from_exposition
from inferslice.exporters.engine.targets import RegistryDiscovery
from inferslice.testbed.net.lifecycle import _registry, default_services
from inferslice.testbed.net.plan import net_plan
from inferslice.testbed.rayserve.pop_engine import NoFreeSlot, SlotClaim, claim_path, claim_slot, read_claims
from inferslice.testbed.rayserve.services import SERVICE, ray_services, resolve_serving
from inferslice.testbed.rayserve.serving import filter_exposition, serve_replicas, tier_entries
from inferslice.topology import default_topology_path, load_topology

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ray-2.60.0-testbed"
TIERS = ["free", "standard", "premium"]


def test_serving_option_per_tier_and_for_all() -> None:
    assert resolve_serving([], TIERS) == dict.fromkeys(TIERS, "front")
    assert resolve_serving(["ray"], TIERS) == dict.fromkeys(TIERS, "ray")
    assert resolve_serving(["premium=ray"], TIERS) == {"free": "front", "standard": "front", "premium": "ray"}
    assert resolve_serving(["ray", "free=front"], TIERS)["free"] == "front"
    for bad in (["serve"], ["gold=ray"]):
        with pytest.raises(ConfigError) as err:
            resolve_serving(bad, TIERS)
        assert err.value.field == "serving"


def test_ray_tiers_lose_their_front_and_gain_one_ray_service(tmp_path: Path) -> None:
    top = load_topology()
    plan = net_plan(top, "isl-")
    path = str(default_topology_path())
    specs = ray_services({"free": "front", "standard": "ray", "premium": "ray"})(top, path, tmp_path, plan)
    names = [s.name for s in specs]
    assert "front-free" in names and "front-standard" not in names and "front-premium" not in names
    ray = [s for s in specs if s.name == SERVICE]
    assert len(ray) == 1 and ray[0].netns == plan.gateway_netns
    assert "--tier=standard" in ray[0].argv and "--tier=premium" in ray[0].argv and "--tier=free" not in ray[0].argv
    # Everything else is what the default factory makes.
    assert sorted(names) == sorted([n for n in (s.name for s in default_services(top, path, tmp_path, plan))
                                    if n not in ("front-standard", "front-premium")] + [SERVICE])  # fmt: skip
    caps: dict[str, dict[str, float | None]] = {t: {"receive": None, "transmit": None} for t in TIERS}
    reg = _registry(top, path, tmp_path, plan, specs, {SERVICE: 4242, "front-free": 4343}, caps)
    premium, standard, free = reg.front("premium"), reg.front("standard"), reg.front("free")
    assert premium is not None and standard is not None and free is not None
    # Same front IP as the TierFront (so the same client-edge class), Serve's port and route prefix.
    assert premium.url == "http://10.203.0.1:8001/premium"
    assert premium.pid == 4242 and standard.pid == 4242
    assert premium.metrics_url == f"http://{plan.mgmt_gateway_ip}:8266/metrics"
    assert premium.admin_url == f"http://{plan.mgmt_gateway_ip}:8266/tiers/premium"  # the relay's per-tier admin API
    assert (free.url, free.metrics_url, free.pid) == ("http://10.201.0.1:8000", None, 4343)
    assert reg.services[SERVICE] == f"http://{plan.mgmt_gateway_ip}:8266"
    assert ray_services(dict.fromkeys(TIERS, "front"))(top, path, tmp_path, plan) == default_services(top, path, tmp_path, plan)


def test_slot_claims_take_the_lowest_free_slot_and_free_it_with_the_lock(tmp_path: Path) -> None:
    k0, f0 = claim_slot(tmp_path, "premium", 2)
    k1, f1 = claim_slot(tmp_path, "premium", 2)
    assert (k0, k1) == (0, 1)
    with pytest.raises(NoFreeSlot):
        claim_slot(tmp_path, "premium", 2)
    for k in (0, 1):
        c = SlotClaim("premium", k, f"rid{k}", f"premium-{k}", "bristol", 1, f"http://10.203.0.{10 + k}:8000", 1)
        claim_path(tmp_path, "premium", k).write_text(json.dumps(c.__dict__))
    assert [c.serve_replica_id for c in read_claims(tmp_path, "premium")] == ["rid0", "rid1"]
    f0.close()  # the replica process died: its record is stale, its slot free again
    assert [c.serve_replica_id for c in read_claims(tmp_path, "premium")] == ["rid1"]
    k, f = claim_slot(tmp_path, "premium", 2)
    assert k == 0
    f.close()
    f1.close()


def test_registry_entries_join_serve_replicas_with_their_claims() -> None:
    top = load_topology()
    apps = {"applications": {"premium": {"deployments": {"LLMServer": {"replicas": [
        {"replica_id": "aaaa", "state": "RUNNING"}, {"replica_id": "bbbb", "state": "STARTING"},
        {"replica_id": "cccc", "state": "STARTING"}]}}}}}  # fmt: skip
    serve = serve_replicas(apps, "premium")
    assert serve == {"aaaa": "RUNNING", "bbbb": "STARTING", "cccc": "STARTING"}
    claims = [SlotClaim("premium", 1, "bbbb", "premium-1", "bristol", 1, "http://10.203.0.11:8000", 7),
              SlotClaim("premium", 0, "aaaa", "premium-0", "bristol", 1, "http://10.203.0.10:8000", 6),
              SlotClaim("premium", 2, "gone", "premium-2", "london", 0, "http://10.203.0.12:8000", 8)]  # fmt: skip
    got = tier_entries(top, "premium", serve, claims, "http://relay/metrics")
    # cccc has no engine yet, "gone" is no longer Serve's: neither is published
    assert [(e.id, e.pop, e.state, e.ray_replica_id, e.metrics_url) for e in got] == [
        ("premium-0", "bristol", "ready", "aaaa", "http://relay/metrics"),
        ("premium-1", "bristol", "starting", "bbbb", "http://relay/metrics"),
    ]
    assert all(e.gpu_fraction == top.tier("premium").gpu_per_replica for e in got)


def test_relay_keeps_only_serve_and_vllm_families_unchanged() -> None:
    text = (
        "# HELP ray_node_cpu_count cpus\n# TYPE ray_node_cpu_count gauge\nray_node_cpu_count{a=\"1\"} 2.0\n"
        "# HELP ray_vllm_prompt_tokens_total p\n# TYPE ray_vllm_prompt_tokens_total counter\n"
        "ray_vllm_prompt_tokens_total{ReplicaId=\"x\"} 5.0\n"
        "# TYPE ray_serve_deployment_queued_queries gauge\nray_serve_deployment_queued_queries{application=\"premium\"} 0.0\n"
    )
    assert filter_exposition(text) == (
        "# HELP ray_vllm_prompt_tokens_total p\n# TYPE ray_vllm_prompt_tokens_total counter\n"
        "ray_vllm_prompt_tokens_total{ReplicaId=\"x\"} 5.0\n"
        "# TYPE ray_serve_deployment_queued_queries gauge\nray_serve_deployment_queued_queries{application=\"premium\"} 0.0\n"
    )
    assert filter_exposition("# TYPE ray_gcs_x gauge\nray_gcs_x 1\n") == ""
    captured = (CAPTURE / "relay-metrics.txt").read_text()
    assert filter_exposition(captured) == captured  # the capture is what the relay passed on


def _captured_registry(tmp_path: Path) -> Path:
    front = FrontEntry(**json.loads((CAPTURE / "premium-front.json").read_text()))
    replicas = [ReplicaEntry(**e) for e in json.loads((CAPTURE / "replicas-premium.json").read_text())]
    write_registry(Registry(topology_path=str(default_topology_path()), state_dir=str(tmp_path), fronts=(front,)), tmp_path)
    write_replicas_fragment(tmp_path, "premium", replicas)
    return tmp_path


def test_exporter_discovers_the_ray_replica_through_the_registry_and_reads_it(tmp_path: Path) -> None:
    found = RegistryDiscovery(str(_captured_registry(tmp_path))).discover()
    entry = read_registry(tmp_path).replicas_of("premium")[0]
    assert [(t.slice, t.pop, t.replica, t.url, t.ray_replica_id) for t in found.replicas] == [
        ("premium", "bristol", "premium-0", entry.metrics_url, entry.ray_replica_id)
    ]
    # The agent's exposition is every Ray tier's: one front target, slices from the application label.
    assert [(f.url, f.slice) for f in found.fronts] == [(entry.metrics_url, None)]
    agent = parse_exposition((CAPTURE / "relay-metrics.txt").read_text())
    ray = reading_from_exposition(agent, found.replicas[0].ray_replica_id)
    own = reading_from_exposition(parse_exposition((CAPTURE / "premium-0-engine-metrics.txt").read_text()))
    # Ray exports a counter only once incremented: the engine's zeros are absent, the rest equal.
    assert ray.counters == {k: v for k, v in own.counters.items() if v}
    assert ray.success == {k: v for k, v in own.success.items() if v}
    assert sum(own.success.values()) == 3  # the three requests of the capture
    for key, h in own.histograms.items():
        assert ray.histograms[key].cumulative == h.cumulative
    fronts = front_readings_from_exposition(agent, None)
    assert set(fronts) == {"premium"} and fronts["premium"].target_replicas == 1.0


async def test_a_ray_tiers_admin_api_rewrites_serve_config_like_a_fronts(tmp_path: Path) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from inferslice.testbed.rayserve.serving import RayServing, relay_app

    top = load_topology()
    rs = RayServing(top, str(default_topology_path()), ["standard", "premium"], str(tmp_path), "http://relay")
    applied: list[tuple[dict[str, str], dict[str, int]]] = []
    rs.apply = lambda: applied.append((dict(rs.modes), dict(rs.targets)))  # type: ignore[method-assign]
    rs.entries["premium"] = [ReplicaEntry("premium-0", "premium", "bristol", 1, 0.5, 1.0, "http://10.203.0.10:8000",
                                          ray_replica_id="aaaa")]  # fmt: skip
    async with TestClient(TestServer(relay_app(rs))) as c:
        r = await c.get("/tiers/premium/admin/state")
        st = await r.json()
        assert (st["mode"], st["target"], [x["id"] for x in st["replicas"]]) == ("fixed", 1, ["premium-0"])
        r = await c.put("/tiers/premium/admin/replicas", json={"replicas": 3})
        assert r.status == 200 and (await r.json())["target"] == 3
        assert applied[-1] == ({"standard": "fixed", "premium": "fixed"}, {"standard": 1, "premium": 3})
        r = await c.put("/tiers/premium/admin/replicas", json={"replicas": 7})  # premium has 6 slots
        assert r.status == 422
        r = await c.put("/tiers/standard/admin/autoscale", json={"enabled": True})
        assert r.status == 200 and (await r.json())["mode"] == "autoscale"
        assert applied[-1][0] == {"standard": "ray-default", "premium": "fixed"}
        r = await c.put("/tiers/standard/admin/replicas", json={"replicas": 2})
        assert r.status == 409  # a count only with the autoscaler off, as on a TierFront
        r = await c.post("/tiers/premium/admin/moves", json={"id": "m", "replica": "premium-0", "pop": "london", "gpu": 0})
        assert r.status == 409
        assert (await c.get("/healthz")).status == 503  # not running yet


def test_engine_load_for_the_queue_policy_from_a_pop_engines_metrics() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from inferslice.testbed.rayserve.replica import engine_load

    fams = list(text_string_to_metric_families((CAPTURE / "premium-0-engine-metrics.txt").read_text()))
    assert engine_load(fams) == {"finished_requests": 3.0, "waiting": 0.0, "running": 0.0}  # at rest after 3 requests
