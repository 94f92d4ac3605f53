"""What schemathesis found once, pinned as plain tests: the OpenAPI document and the API agree.

Strict types (a boolean is not a number: 422 naming the field), documented 404/422/401, 405 with a
true ``Allow`` for undocumented methods (HEAD and OPTIONS included), ``/metrics`` as text/plain,
and bearer auth on exactly the mutating endpoints.
"""

from __future__ import annotations

from typing import Any

from .conftest import TOKEN, TestClient


def test_a_boolean_is_not_a_number_in_a_reference(client: Any) -> None:
    r = client.put("/v1/slices/free/reference", json={"tpot_p50_s": True})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "tpot_p50_s"]
    r = client.put("/v1/slices/free/reference", json={"tpot_p50_s": "0.02"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "tpot_p50_s"]
    assert client.put("/v1/slices/free/reference", json={"tpot_p50_s": 0.02}).status_code == 200


def test_a_boolean_is_not_a_number_in_a_snapshot(client: Any) -> None:
    r = client.post("/v1/diagnose", json={"slice": "free", "ttft_p99_s": False})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "ttft_p99_s"]
    r = client.post("/v1/diagnose", json={"slice": "free", "ttft_p99_s": 10**400})  # beyond any float
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "ttft_p99_s"]


def test_the_snapshot_schema_says_what_the_server_enforces(client: Any) -> None:
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/v1/snapshots"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["slice"] and body["properties"]["slice"]["minLength"] == 1
    assert body["properties"]["gpu_share"]["anyOf"][0]["maximum"] == 1
    assert client.post("/v1/diagnose", json={"slice": ""}).status_code == 422  # what the schema forbids
    assert client.post("/v1/diagnose", json={"slice": "x", "unknown_key": [1]}).status_code == 200  # what it allows


def test_documented_statuses(client: Any) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "404" in paths["/v1/slices/{slice_name}"]["get"]["responses"]
    assert "404" in paths["/v1/slices/{slice_name}/reference"]["get"]["responses"]
    assert {"400", "401", "422"} <= set(paths["/v1/snapshots"]["post"]["responses"])
    assert {"401", "422"} <= set(paths["/v1/alerts"]["post"]["responses"])
    assert "text/plain" in paths["/metrics"]["get"]["responses"]["200"]["content"]
    assert client.get("/v1/slices/nowhere").status_code == 404


def test_undocumented_methods_get_405_with_the_documented_allow(client: Any) -> None:
    for method in ("HEAD", "OPTIONS", "DELETE", "PATCH"):
        r = client.request(method, "/v1/slices/free/reference")
        assert r.status_code == 405 and r.headers["allow"] == "GET, PUT", method
    r = client.request("OPTIONS", "/v1/alerts")
    assert r.status_code == 405 and r.headers["allow"] == "GET, POST"
    assert client.request("HEAD", "/healthz").headers["allow"] == "GET"


def test_metrics_is_text_plain(client: Any) -> None:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")


def test_only_mutations_need_the_token(make_client: Any) -> None:
    authed, _ = make_client(":memory:")
    anonymous = TestClient(authed.app)  # same app, no Authorization header
    snapshot = {"slice": "free", "ttft_p99_s": 0.1}
    assert anonymous.post("/v1/snapshots", json=snapshot).status_code == 401
    assert anonymous.put("/v1/slices/free/reference", json={}).status_code == 401
    assert anonymous.post("/v1/alerts", json={}).status_code == 401
    wrong = TestClient(authed.app, headers={"Authorization": f"Bearer {TOKEN}x"})
    assert wrong.post("/v1/snapshots", json=snapshot).status_code == 401
    assert anonymous.post("/v1/diagnose", json=snapshot).status_code == 200  # classifies, stores nothing
    for path in ("/v1/slices", "/v1/slices/free", "/v1/alerts", "/v1/actions", "/v1/topology", "/metrics", "/healthz"):
        assert anonymous.get(path).status_code == 200, path
    assert authed.post("/v1/snapshots", json=snapshot).status_code == 201
