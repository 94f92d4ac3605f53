"""The apiserver stand-in answers failures as kube-apiserver does: each captured response in
tests/fixtures/kube-apiserver/ (see its README for where each was published) is provoked on the
stand-in over HTTP, as kubectl or curl would, and compared field by field."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferslice.actions import Action, ActionKind
from inferslice.deploy import apiserver
from inferslice.deploy import custom_resources as cr

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kube-apiserver"
ADMIN = "admin-token"
SA_TOKEN = "gluu-default-token"
POD = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def _fixture(name: str) -> tuple[int, dict[str, Any]]:
    doc = json.loads((FIXTURES / name).read_text())
    return int(doc["http_status"]), doc["body"]


@pytest.fixture
def server() -> Iterator[apiserver.StandIn]:
    # One ServiceAccount with no grant at all: RBAC is enforced for it from an empty set of roles.
    with apiserver.serve(ADMIN, users={SA_TOKEN: "system:serviceaccount:gluu:default"}, rbac_objects=[]) as srv:
        yield srv


def _request(
    server: apiserver.StandIn, method: str, path: str, body: Any = None, token: str = ADMIN, content_type: str = "application/json"
) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        server.url + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": content_type, "Accept": "application/json"},
    )
    try:
        # Generous: the first validating request of a worker loads the schemas (seconds on a loaded machine); no timing is tested here.
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _same(got: tuple[int, dict[str, Any]], want: tuple[int, dict[str, Any]], **names: str) -> None:
    """``got`` equals the captured ``want`` once the captured names are replaced by ours
    (``names``: captured text -> ours, applied to the message and the details)."""
    code, body = want
    text = json.dumps(body)
    for theirs, ours in names.items():
        text = text.replace(theirs, ours)
    expected = json.loads(text)
    assert got[0] == code
    assert got[1] == expected
    assert list(got[1]) == list(expected), "the fields come in kube-apiserver's order"


def test_not_found(server: apiserver.StandIn) -> None:
    _same(_request(server, "GET", "/api/v1/namespaces/default/pods/grafana"), _fixture("not-found.json"))


def test_already_exists_on_create(server: apiserver.StandIn) -> None:
    name = "nifi-apache-configmap-opnfv06"
    assert _request(server, "POST", "/api/v1/namespaces/default/pods", {**POD, "metadata": {"name": name}})[0] == 201
    got = _request(server, "POST", "/api/v1/namespaces/default/pods", {**POD, "metadata": {"name": name}})
    _same(got, _fixture("already-exists.json"), configmaps="pods")


def test_conflict_on_a_stale_resource_version(server: apiserver.StandIn) -> None:
    _, pod = _request(server, "POST", "/api/v1/namespaces/default/pods", {**POD, "metadata": {"name": "quota"}})
    stale = pod["metadata"]["resourceVersion"]
    assert (
        _request(server, "PUT", "/api/v1/namespaces/default/pods/quota", {**pod, "metadata": {**pod["metadata"], "labels": {"a": "b"}}})[0]
        == 200
    )
    got = _request(
        server, "PUT", "/api/v1/namespaces/default/pods/quota", {**pod, "metadata": {**pod["metadata"], "resourceVersion": stale}}
    )
    _same(got, _fixture("conflict.json"), resourcequotas="pods")
    # A merge patch carrying the stale resourceVersion is the same precondition, the same answer.
    patch = {"metadata": {"resourceVersion": stale, "labels": {"c": "d"}}}
    got = _request(server, "PATCH", "/api/v1/namespaces/default/pods/quota", patch, content_type="application/merge-patch+json")
    _same(got, _fixture("conflict.json"), resourcequotas="pods")


def test_forbidden_without_a_grant(server: apiserver.StandIn) -> None:
    _same(_request(server, "GET", "/api/v1/namespaces/gluu/pods", token=SA_TOKEN), _fixture("forbidden.json"))


def test_a_lease_update_needs_a_resource_version(server: apiserver.StandIn) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "test"}, "spec": {"holderIdentity": "a"}}
    assert _request(server, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", lease)[0] == 201
    got = _request(server, "PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/test", {**lease, "spec": {"holderIdentity": "b"}})
    _same(got, _fixture("invalid-resourceversion.json"))


def _slice_action(server: apiserver.StandIn) -> str:
    body = cr.action_to_cr(Action(ActionKind.SET_REPLICAS, "premium", 3, id="premium-1-set_replicas"), "default")
    code, obj = _request(server, "POST", f"/apis/{cr.GROUP}/{cr.VERSION}/namespaces/default/{cr.ACTION_PLURAL}", body)
    assert code == 201
    return f"/apis/{cr.GROUP}/{cr.VERSION}/namespaces/default/{cr.ACTION_PLURAL}/{obj['metadata']['name']}"


def test_a_failed_json_patch_test_op_is_422_not_409(server: apiserver.StandIn) -> None:
    path = _slice_action(server)
    ops = [{"op": "test", "path": "/spec/slice", "value": "free"}, {"op": "replace", "path": "/spec/slice", "value": "standard"}]
    _same(_request(server, "PATCH", path, ops, content_type="application/json-patch+json"), _fixture("json-patch-not-applicable.json"))
    # Any op that cannot be applied answers the same (kube-apiserver drops the patch library's text).
    missing = [{"op": "replace", "path": "/spec/nothing/there", "value": 1}]
    _same(_request(server, "PATCH", path, missing, content_type="application/json-patch+json"), _fixture("json-patch-not-applicable.json"))
    assert _request(server, "GET", path)[1]["spec"]["slice"] == "premium", "a refused patch changes nothing"


def test_unauthorized_without_a_valid_token(server: apiserver.StandIn) -> None:
    _same(_request(server, "GET", "/api/v1/namespaces/default/pods", token="not-a-token"), _fixture("unauthorized.json"))


def test_no_strategic_merge_patch_for_custom_resources(server: apiserver.StandIn) -> None:
    path = _slice_action(server)
    got = _request(server, "PATCH", path, {"spec": {"slice": "free"}}, content_type="application/strategic-merge-patch+json")
    _same(got, _fixture("unsupported-media-type.json"))


def test_every_fixture_is_exercised() -> None:
    tested = {"not-found", "already-exists", "conflict", "forbidden", "invalid-resourceversion", "json-patch-not-applicable"}
    tested |= {"unauthorized", "unsupported-media-type"}
    assert {p.stem for p in FIXTURES.glob("*.json")} == tested
    readme = (FIXTURES / "README.md").read_text()
    assert all(f"`{name}.json`" in readme for name in tested), "each fixture's provenance is in the README"


def test_concurrent_patches_lose_no_update(server: apiserver.StandIn) -> None:
    """A patch is applied to the stored object under the store's lock (GuaranteedUpdate): 16
    concurrent patches, each adding its own annotation without a precondition, all land."""
    import threading

    path = _slice_action(server)
    codes: list[int] = []

    def add(i: int) -> None:
        op = [{"op": "add", "path": f"/metadata/annotations/k{i}" if i else "/metadata/annotations", "value": "v" if i else {"k0": "v"}}]
        codes.append(_request(server, "PATCH", path, op, content_type="application/json-patch+json")[0])

    add(0)
    threads = [threading.Thread(target=add, args=(i,)) for i in range(1, 17)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert codes == [200] * 17
    annotations = _request(server, "GET", path)[1]["metadata"]["annotations"]
    assert set(annotations) == {f"k{i}" for i in range(17)}
