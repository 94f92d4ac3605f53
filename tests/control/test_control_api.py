"""The API's control endpoints over the controller's audit log: list by state, approve/reject with
the bearer token (401 without), 404 unknown, 409 not pending, 422 naming the bad field."""

from __future__ import annotations

import warnings
from pathlib import Path

from fastapi import Depends

from inferslice.actions import Action, ActionKind
from inferslice.control.guardrails import GuardState
from inferslice.service.app import create_app
from inferslice.service.controller.api import mount_control
from inferslice.service.controller.audit import AuditLog, Decided
from inferslice.service.http import BearerAuth
from inferslice.service.store import Store
from inferslice.topology import load_topology

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _client(tmp_path: Path) -> tuple[TestClient, AuditLog]:
    audit = AuditLog(tmp_path / "audit.db")
    act = Action(ActionKind.SET_REPLICAS, "premium", 4, reason="queue_limited: ...", regime="queue_limited", id="premium-1-set_replicas")
    audit.record_decision(10.0, "approve", [Decided(act, "pending", {"regime": "queue_limited"})], [], [], {}, GuardState())
    app = create_app(Store(":memory:"), load_topology(), token=TOKEN)
    mount_control(app, audit, [Depends(BearerAuth(TOKEN))], lambda: 20.0)
    return TestClient(app), audit


def test_pending_listed_and_approved_with_the_token(tmp_path: Path) -> None:
    client, audit = _client(tmp_path)
    [row] = client.get("/v1/actions", params={"state": "pending"}).json()
    assert row["id"] == "premium-1-set_replicas" and row["action"]["value"] == 4 and row["diagnosis"]["regime"] == "queue_limited"
    assert client.post("/v1/actions/premium-1-set_replicas/approve").status_code == 401
    r = client.post("/v1/actions/premium-1-set_replicas/approve", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and TOKEN not in r.text
    r = client.post("/v1/actions/premium-1-set_replicas/approve", json={"by": "alice"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["state"] == "approved" and r.json()["approved_by"] == "alice"
    assert audit.action("premium-1-set_replicas")["state"] == "approved"  # type: ignore[index]
    assert client.post("/v1/actions/premium-1-set_replicas/reject", headers=AUTH).status_code == 409
    assert client.get("/v1/actions", params={"state": "pending"}).json() == []


def test_reject_unknown_and_bad_requests(tmp_path: Path) -> None:
    client, _ = _client(tmp_path)
    assert client.post("/v1/actions/nope/approve", headers=AUTH).status_code == 404
    r = client.get("/v1/actions", params={"state": "bogus"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "state"]
    r = client.post("/v1/actions/premium-1-set_replicas/reject", json={"by": "bob", "extra": 1}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "extra"
    r = client.post("/v1/actions/premium-1-set_replicas/reject", headers=AUTH)
    assert r.status_code == 200 and r.json()["state"] == "rejected" and r.json()["approved_by"] == "api"
