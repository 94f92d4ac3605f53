"""Sharded diagnosis: a replica answers a slice another replica holds with a 307 to that replica."""

from __future__ import annotations

from typing import Any


def test_a_slice_held_elsewhere_redirects_and_a_held_one_is_answered(client: Any) -> None:
    client.app.state.slice_owner = lambda name: "http://inferslice-api-2.inferslice-api:8080" if name == "premium" else None
    moved = client.get("/v1/slices/premium", follow_redirects=False)
    assert moved.status_code == 307
    assert moved.headers["location"] == "http://inferslice-api-2.inferslice-api:8080/v1/slices/premium"
    assert client.get("/v1/slices/free").status_code == 200
    del client.app.state.slice_owner
    assert client.get("/v1/slices/premium").status_code == 200
