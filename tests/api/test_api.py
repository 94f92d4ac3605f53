"""Every endpoint of the diagnosis API, through FastAPI's test client (real app, real SQLite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from inferslice import metric_names as mn
from inferslice.actions import Action, ActionKind

FIXTURES = Path(__file__).parent / "fixtures"
QUEUE = {
    "slice": "free",
    "ttft_p99_s": 5,
    "tpot_p50_s": 0.026,
    "ref_tpot_p50_s": 0.025,
    "link_rx_bps": 9e5,
    "link_cap_bps": 1e7,
    "requests_waiting": 4,
}
HEALTHY = {"slice": "free", "ttft_p99_s": 0.1, "ttft_p50_s": 0.05, "tpot_p50_s": 0.025, "link_rx_bps": 2e5, "link_cap_bps": 1e7}


def push(client: Any, clock: Any, body: dict[str, Any], n: int = 1, dt: float = 2.0) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        clock.t += dt
        r = client.post("/v1/snapshots", json=body)
        assert r.status_code == 201, r.text
        out.append(r.json())
    return out


def test_health_and_docs(client: Any) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200
    spec = client.get("/openapi.json").json()
    assert {"/v1/diagnose", "/v1/snapshots", "/v1/alerts", "/v1/topology", "/v1/slices/{slice_name}/reference"} <= set(spec["paths"])
    assert client.get("/docs").status_code == 200


def test_readyz_fails_when_the_database_is_gone(make_client: Any) -> None:
    client, store = make_client(":memory:")
    store.close()
    r = client.get("/readyz")
    assert r.status_code == 503


def test_diagnose_copies_id_and_classifies(client: Any) -> None:
    r = client.post("/v1/diagnose", json={"id": 42, **QUEUE})
    assert r.status_code == 200
    body = r.json()
    assert body["id"] == 42 and body["regime"] == "queue_limited" and body["slo"] == "breached"
    assert client.get("/v1/slices/free/diagnoses").json() == []  # diagnose stores nothing


def test_diagnose_422_names_the_field(client: Any) -> None:
    for body, field in (
        ({"slice": "free", "ttft_p99_s": "slow"}, "ttft_p99_s"),
        ({"ttft_p99_s": 1.0}, "slice"),
        ({"slice": "free", "gpu_share": 1.7}, "gpu_share"),
        ({"slice": "free", "link_rx_bps": -5}, "link_rx_bps"),
    ):
        r = client.post("/v1/diagnose", json=body)
        assert r.status_code == 422
        detail = r.json()["detail"][0]
        assert detail["loc"] == ["body", field] and field in detail["msg"]
    assert client.post("/v1/snapshots", json={"slice": "free", "replicas": "two"}).json()["detail"][0]["loc"] == ["body", "replicas"]
    assert client.post("/v1/diagnose", json=[1, 2]).status_code == 422


def test_slices_known_from_topology_and_from_data(client: Any, clock: Any) -> None:
    names = [s["slice"] for s in client.get("/v1/slices").json()]
    assert names == ["free", "standard", "premium"]
    assert client.get("/v1/slices/lab-9").status_code == 404
    assert client.get("/v1/slices/lab-9/diagnoses").status_code == 404
    assert client.get("/v1/slices/lab-9/episodes").status_code == 404
    push(client, clock, {**QUEUE, "slice": "lab-9"})
    listed = {s["slice"]: s for s in client.get("/v1/slices").json()}
    assert listed["lab-9"]["configured"] is False and listed["lab-9"]["regime"] == "queue_limited"
    one = client.get("/v1/slices/lab-9").json()
    assert one["snapshot"]["ttft_p99_s"] == 5.0 and one["diagnosis"]["regime"] == "queue_limited" and one["tier"] is None
    # A configured tier with no data yet is known (200) but empty.
    free = client.get("/v1/slices/free").json()
    assert free["configured"] is True and free["tier"]["replicas_max"] == 1 and free["diagnosis"] is None


def test_snapshots_open_and_close_episodes(client: Any, clock: Any) -> None:
    t0 = clock.t
    results = push(client, clock, QUEUE, n=3)
    assert results[0]["events"] == [] and results[1]["events"] == []
    opened = results[2]["events"]
    assert [(e["kind"], e["regime"]) for e in opened] == [("open", "queue_limited")]
    assert opened[0]["start_s"] == t0 + 2.0
    eps = client.get("/v1/slices/free/episodes").json()
    assert len(eps) == 1 and eps[0]["open"] is True
    assert client.get("/v1/slices/free").json()["episode"]["regime"] == "queue_limited"
    closing = push(client, clock, HEALTHY, n=2)
    assert [e["kind"] for e in closing[1]["events"]] == ["close"]
    ep = client.get("/v1/slices/free/episodes").json()[0]
    assert ep["open"] is False and ep["end_s"] == t0 + 8.0 and ep["peak_confidence"] >= 0.7


def test_snapshot_tier_defaults_fill_the_replica_ceiling(client: Any, clock: Any) -> None:
    # Free's ceiling is 1 replica (topology): replicas=1 confirms the queue without replicas_max in the body.
    res = push(client, clock, {**QUEUE, "requests_waiting": None, "replicas": 1})[0]
    ev = {e["signal"]: e for e in res["diagnosis"]["evidence"]}
    assert ev["replicas"]["crossed"] is True and ev["replicas"]["threshold"] == 1.0


def test_diagnoses_history_window(client: Any, clock: Any) -> None:
    start = clock.t
    push(client, clock, QUEUE, n=5, dt=10.0)
    everything = client.get("/v1/slices/free/diagnoses").json()
    assert [d["ts"] for d in everything] == [start + 10 * i for i in range(1, 6)]
    window = client.get("/v1/slices/free/diagnoses", params={"since": start + 20, "until": start + 40}).json()
    assert [d["ts"] for d in window] == [start + 20, start + 30, start + 40]
    # window_end_s in the snapshot, when given, is the time the diagnosis is filed under
    push(client, clock, {**QUEUE, "window_end_s": 1000.0})
    assert client.get("/v1/slices/free/diagnoses", params={"until": 1000.0}).json()[0]["window_end_s"] == 1000.0


def test_reference_put_get_and_use(client: Any, clock: Any) -> None:
    assert client.get("/v1/slices/free/reference").status_code == 404
    r = client.put("/v1/slices/free/reference", json={"tpot_p50_s": 0.025, "output_tokens_per_s": 370})
    assert r.status_code == 200 and r.json()["source"] == "configured"
    bad = client.put("/v1/slices/free/reference", json={"tpot_p50_s": -1})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "tpot_p50_s"
    # No inline reference: the configured one makes 60 ms TPOT an inflation.
    body = {"slice": "free", "ttft_p99_s": 0.3, "tpot_p50_s": 0.06, "link_rx_bps": 1e5, "link_cap_bps": 1e7}
    assert client.post("/v1/diagnose", json=body).json()["regime"] == "compute_limited"
    # Learning never overwrites configuration.
    push(client, clock, HEALTHY, n=3)
    assert client.get("/v1/slices/free/reference").json()["tpot_p50_s"] == 0.025


def test_reference_is_learned_from_healthy_windows(client: Any, clock: Any) -> None:
    push(client, clock, {**HEALTHY, "slice": "standard"}, n=4)
    ref = client.get("/v1/slices/standard/reference").json()
    assert ref["source"] == "learned" and ref["samples"] == 4 and abs(ref["tpot_p50_s"] - 0.025) < 1e-9


def test_topology(client: Any) -> None:
    topo = client.get("/v1/topology").json()
    assert {p["name"] for p in topo["pops"]} == {"bristol", "london", "dublin"}
    links = {(link["a"], link["b"]): link for link in topo["links"]}
    mid = links[("bristol", "london")]
    assert mid["rtt_s"] == 0.009 and mid["latency_tier"] == "mid" and mid["feasible_parallelism"] == ["replication", "pipeline"]
    assert links[("bristol", "dublin")]["latency_tier"] == "distant"
    assert links[("bristol", "dublin")]["feasible_parallelism"] == ["replication"]
    assert set(topo["intra_pop"]["feasible_parallelism"]) == {"replication", "pipeline", "tensor", "prefill_decode"}
    assert [t["name"] for t in topo["tiers"]] == ["free", "standard", "premium"]


def test_alertmanager_webhook_real_payloads(client: Any, clock: Any) -> None:
    # Captured from prometheus-alertmanager 0.25 posting to a webhook receiver (firing, then resolved).
    firing = json.loads((FIXTURES / "alertmanager-0.25-firing.json").read_text())
    resolved = json.loads((FIXTURES / "alertmanager-0.25-resolved.json").read_text())
    assert client.post("/v1/alerts", json=firing).json() == {"stored": 1}
    alerts = client.get("/v1/alerts", params={"slice": "free"}).json()
    assert len(alerts) == 1
    a = alerts[0]
    assert a["status"] == "firing" and a["endsAt"] is None and a["alertname"] == "InferSliceTTFTBurnRateHigh"
    assert a["labels"]["severity"] == "page" and a["annotations"]["summary"].startswith("free tier")
    assert a["startsAt"].startswith("2026-11-30T00:00:07.589315") and a["fingerprint"] == "37c09318222933d1"
    clock.t += 5
    client.post("/v1/alerts", json=resolved)
    alerts = client.get("/v1/alerts").json()
    assert len(alerts) == 1  # same alert (fingerprint, startsAt): updated, not duplicated
    assert alerts[0]["status"] == "resolved" and alerts[0]["endsAt"] == "2026-11-30T00:00:11Z"
    assert alerts[0]["ends_at_s"] > alerts[0]["starts_at_s"]
    assert client.get("/v1/alerts", params={"slice": "premium"}).json() == []


def test_alertmanager_webhook_422(client: Any) -> None:
    firing = json.loads((FIXTURES / "alertmanager-0.25-firing.json").read_text())
    r = client.post("/v1/alerts", json={**firing, "version": "3"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "version"]
    broken = json.loads(json.dumps(firing))
    broken["alerts"][0]["startsAt"] = "yesterday"
    r = client.post("/v1/alerts", json=broken)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "alerts", 0, "startsAt"]


def test_actions_empty_until_control_writes(make_client: Any) -> None:
    client, store = make_client(":memory:")
    assert client.get("/v1/actions").json() == []
    store.put_action(Action(ActionKind.SET_REPLICAS, "free", 2, reason="queue_limited", regime="queue_limited"), ts=5.0)
    acts = client.get("/v1/actions", params={"slice": "free"}).json()
    assert acts == [
        {
            "ts": 5.0,
            "outcome": "proposed",
            "kind": "set_replicas",
            "slice": "free",
            "value": 2,
            "reason": "queue_limited",
            "regime": "queue_limited",
        }
    ]


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics(client: Any, clock: Any) -> None:
    push(client, clock, QUEUE, n=3)
    client.get("/v1/slices/nope")
    samples = _samples(client.get("/metrics").text)
    assert samples[(mn.DIAGNOSIS_REGIME, (("regime", "queue_limited"), ("slice", "free")))] == 1.0
    assert samples[(mn.DIAGNOSIS_REGIME, (("regime", "healthy"), ("slice", "free")))] == 0.0
    assert samples[(mn.DIAGNOSIS_CONFIDENCE, (("slice", "free"),))] >= 0.7
    assert samples[(mn.DIAGNOSIS_EPISODES, (("regime", "queue_limited"), ("slice", "free")))] == 1.0
    assert (mn.DIAGNOSIS_REQUESTS, (("slice", "free"),)) not in samples  # the windows reported no request count
    # Where the latency goes: the four resources add up to the observed P99 TTFT (5 s), most of it queue.
    attributed = {
        r: samples[(mn.LATENCY_ATTRIBUTION, (("resource", r), ("slice", "free"), ("stat", "ttft_p99")))]
        for r in ("queue", "network", "compute", "base")
    }
    assert abs(sum(attributed.values()) - 5.0) < 1e-6 and attributed["queue"] > 4.0
    assert samples[(mn.API_REQUESTS, (("method", "POST"), ("route", "/v1/snapshots"), ("status", "201")))] == 3.0
    # the route template labels requests, never the raw path
    assert samples[(mn.API_REQUESTS, (("method", "GET"), ("route", "/v1/slices/{slice_name}"), ("status", "404")))] == 1.0
    push(client, clock, {**QUEUE, "request_count": 42})
    samples = _samples(client.get("/metrics").text)
    assert samples[(mn.DIAGNOSIS_REQUESTS, (("slice", "free"),))] == 42.0


def test_state_survives_a_restart(make_client: Any, clock: Any, tmp_path: Path) -> None:
    db = tmp_path / "inferslice.db"
    client, store = make_client(db)
    push(client, clock, QUEUE, n=3)  # opens an episode
    client.put("/v1/slices/premium/reference", json={"tpot_p50_s": 0.02})
    client.post("/v1/alerts", json=json.loads((FIXTURES / "alertmanager-0.25-firing.json").read_text()))
    push(client, clock, HEALTHY)  # one healthy window: the episode machine is mid-way to closing
    store.close()

    client2, _ = make_client(db)
    assert len(client2.get("/v1/slices/free/diagnoses").json()) == 4
    assert client2.get("/v1/slices/premium/reference").json()["tpot_p50_s"] == 0.02
    assert len(client2.get("/v1/alerts").json()) == 1
    assert client2.get("/v1/slices/free/episodes").json()[0]["open"] is True
    # The machine's state persisted too: one more healthy window closes the episode (close_windows=2).
    res = push(client2, clock, HEALTHY)[0]
    assert [e["kind"] for e in res["events"]] == ["close"]
    samples = _samples(client2.get("/metrics").text)
    assert samples[(mn.DIAGNOSIS_EPISODES, (("regime", "queue_limited"), ("slice", "free")))] == 1.0
    assert samples[(mn.DIAGNOSIS_REGIME, (("regime", "healthy"), ("slice", "free")))] == 1.0
