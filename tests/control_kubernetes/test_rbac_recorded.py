"""Each component's RBAC is exactly what its own code calls. The controller (as ``make_controller``
builds it for ``inferslice control --backend kubernetes --lease-namespace``) and pods-sync (as its
CLI builds its lister) run against the apiserver stand-in with the in-cluster configuration of
their ServiceAccount's token; the stand-in enforces the rendered Roles and bindings (a call without
a grant is a 403, which fails the component) and records every call. The grants each component's
ServiceAccount holds in the rendered manifests must all be used: no missing grant, no unused one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferslice.deploy import apiserver, platform, podsync, rbac, render
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.service.controller.build import ControllerSettings, make_controller
from inferslice.service.controller.core import Mode
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology

from .conftest import TOKEN, seed

TOKENS = {component: f"token-{component.value}" for component in rbac.Component}


def _user(component: rbac.Component) -> str:
    return rbac.service_account_user(platform.SA_NAMESPACES[component], rbac.service_account(component))


@pytest.fixture
def rendered(topology: Topology) -> list[dict[str, Any]]:
    return [o for objs in render.base_objects(topology, "").values() for o in objs]


@pytest.fixture
def cluster(topology: Topology, rendered: list[dict[str, Any]]) -> Iterator[apiserver.StandIn]:
    rbac_objects = [o for o in rendered if o["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")]
    users = {TOKENS[c]: _user(c) for c in rbac.Component}
    with apiserver.serve(TOKEN, users=users, rbac_objects=rbac_objects) as srv:
        seed(srv.store, topology)
        srv.store.calls.clear()
        yield srv


def _in_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: apiserver.StandIn, component: rbac.Component) -> None:
    """What the kubelet gives a pod: its ServiceAccount token and CA in files, the service host in the
    environment; the client's own in-cluster loader reads them (only the scheme becomes http)."""
    from kubernetes import client, config
    from kubernetes.config.incluster_config import InClusterConfigLoader

    token, ca = tmp_path / f"{component.value}-token", tmp_path / "ca.crt"
    token.write_text(TOKENS[component])
    ca.write_text("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")
    host, port = server.server_address[:2]

    def load_incluster_config(client_configuration: Any = None, try_refresh_token: bool = True) -> None:
        env = {"KUBERNETES_SERVICE_HOST": str(host), "KUBERNETES_SERVICE_PORT": str(port)}
        cfg = client.Configuration()
        InClusterConfigLoader(str(token), str(ca), try_refresh_token=False, environ=env).load_and_set(cfg)
        cfg.host = server.url  # the stand-in speaks plain HTTP on loopback
        client.Configuration.set_default(cfg)

    monkeypatch.setattr(config, "load_incluster_config", load_incluster_config)


def _granted(rendered: list[dict[str, Any]], component: rbac.Component) -> set[tuple[str | None, str, str, str]]:
    """(namespace or None for cluster-wide, group, resource, verb) the component's ServiceAccount holds."""
    user = _user(component)
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in rendered if o["kind"] in ("Role", "ClusterRole")
    }
    out: set[tuple[str | None, str, str, str]] = set()
    for b in (o for o in rendered if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if not any(rbac.service_account_user(s["namespace"], s["name"]) == user for s in b["subjects"]):
            continue
        ns = b["metadata"].get("namespace") if b["kind"] == "RoleBinding" else None
        ref = b["roleRef"]
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role["rules"]:
            out |= {(ns, g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def _used(server: apiserver.StandIn, component: rbac.Component) -> set[tuple[str | None, str, str, str]]:
    calls = [c for c in server.store.calls if c.user == _user(component)]
    denied = [c for c in calls if c.code == 403]
    assert not denied, f"{component.value} made calls its roles do not grant: {denied}"
    return {(c.namespace, c.group, c.resource, c.verb) for c in calls}


def _queueing(tier: str) -> tuple[Diagnosis, SliceSnapshot]:
    return (
        Diagnosis(tier, Regime.QUEUE_LIMITED, confidence=0.9),
        SliceSnapshot(tier, request_rate=2.0, requests_waiting=30.0, queue_time_p99_s=4.0),
    )


def test_the_controller_holds_exactly_what_it_calls(
    cluster: apiserver.StandIn, topology: Topology, rendered: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in_cluster(monkeypatch, tmp_path, cluster, rbac.Component.CONTROLLER)
    monkeypatch.setenv("POD_NAME", "inferslice-controller-0")
    ns = platform.PLATFORM_NS
    settings = ControllerSettings(mode=Mode.AUTO, backend="kubernetes", lease_namespace=ns, actions_namespace=ns)
    verdicts = {"premium": _queueing("premium")}
    run = make_controller(settings, topology, source=lambda: verdicts)
    elector = run.elector
    assert elector is not None
    assert elector.try_acquire_or_renew()  # get (none yet), create
    assert elector.try_acquire_or_renew()  # renew: update
    run.controller.resume()  # a new term: stamp every tier's objects, adopt the trail
    run.controller.tick()  # decide, record, apply (premium scales out)
    assert [o for o in cluster.store.writes if o.resource == "rayservices" and o.user == _user(rbac.Component.CONTROLLER)]
    assert _used(cluster, rbac.Component.CONTROLLER) == _granted(rendered, rbac.Component.CONTROLLER)


def test_pods_sync_holds_exactly_what_it_calls(
    cluster: apiserver.StandIn, rendered: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in_cluster(monkeypatch, tmp_path, cluster, rbac.Component.EXPORTER)
    out = tmp_path / "pods.json"
    assert podsync.sync_once(podsync.kubernetes_lister(), "gpu-node-1", out) == 0
    assert json.loads(out.read_text())["kind"] == "List"
    assert _used(cluster, rbac.Component.EXPORTER) == _granted(rendered, rbac.Component.EXPORTER)


def test_the_api_holds_nothing_and_mounts_no_token(rendered: list[dict[str, Any]]) -> None:
    """The API's code calls no Kubernetes API (nothing under service/ but the controller's room and
    the Lease elector imports the kubernetes client): no grant, no token in its pod. The elector
    (service/lease.py) serves the controller and the sharded diagnosis loop only, which its own Role
    grants (``rbac.SHARD_ROLE``, the fleet overlay); the unsharded API never imports it."""
    assert _granted(rendered, rbac.Component.API) == set()
    api = next(o for o in rendered if o["kind"] == "Deployment" and o["metadata"]["name"] == "inferslice-api")
    pod = api["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and not any("projected" in v for v in pod["volumes"])
    sa = next(o for o in rendered if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == rbac.service_account(rbac.Component.API))
    assert sa["automountServiceAccountToken"] is False
    root = Path(__file__).resolve().parents[2] / "service"
    importers = [
        p
        for p in root.rglob("*.py")
        if "kubernetes" in p.read_text() and "import" in p.read_text() and "controller" not in p.parts and p.name != "lease.py"
    ]
    api_modules = {"app.py", "http.py", "loop.py", "diagnosis.py", "store.py", "sources.py"}  # what `inferslice api` runs unsharded
    assert not any("lease" in (root / m).read_text() for m in api_modules if (root / m).exists())
    assert not [p for p in importers if "from kubernetes" in p.read_text() or "import kubernetes" in p.read_text()]


def test_a_missing_grant_is_a_403_and_fails_the_component(
    cluster: apiserver.StandIn, topology: Topology, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The enforcement has teeth: pods-sync with the controller's token (no cluster-wide pods list) is refused."""
    from inferslice.errors import RetryableError

    _in_cluster(monkeypatch, tmp_path, cluster, rbac.Component.CONTROLLER)
    with pytest.raises(RetryableError, match="403"):
        podsync.sync_once(podsync.kubernetes_lister(), "gpu-node-1", tmp_path / "pods.json")


def test_the_sharded_api_holds_exactly_what_its_leases_call(
    topology: Topology, rendered: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The production overlay's API (``deploy.fleet``: a StatefulSet running ``--shard-groups``) calls
    the Lease API for its diagnosis groups. Built the way the CLI builds it from the StatefulSet's own
    arguments, run against the stand-in enforcing the base's and fleet.yaml's Roles: it takes its
    group's Lease (get, create), renews it (update) and releases it on a clean stop (update); the
    grants of the API's ServiceAccount are exactly those calls."""
    import argparse
    import types

    from inferslice.cli import api as api_cli
    from inferslice.deploy import fleet
    from inferslice.service.shards import lease_name
    from inferslice.service.sources import SourceSettings

    production = rendered + fleet.fleet_objects()
    rbac_objects = [o for o in production if o["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")]
    users = {TOKENS[c]: _user(c) for c in rbac.Component}
    sts = fleet.api_statefulset()
    container = sts["spec"]["template"]["spec"]["containers"][0]
    env = {"$(POD_NAME)": "inferslice-api-0", "$(PROMETHEUS_URL)": fleet.VM_URL}
    parser = argparse.ArgumentParser()
    api_cli.add_arguments(parser)
    assert container["args"][0] == "api"
    args = parser.parse_args([env.get(a, a) for a in container["args"][1:]])  # $(NAME): the kubelet expands it
    assert args.shard_groups == fleet.SHARDS and args.lease_namespace == platform.PLATFORM_NS
    settings = SourceSettings(args.source, args.prometheus_url, (), args.perspective, args.window_s, recorded=args.recorded)
    service = types.SimpleNamespace(ingest=lambda snap: None, store=types.SimpleNamespace(batch=None))
    with apiserver.serve(TOKEN, users=users, rbac_objects=rbac_objects) as srv:
        _in_cluster(monkeypatch, tmp_path, srv, rbac.Component.API)
        shards = api_cli._sharded_loop(args, settings, service, topology)
        assert shards.renew() == [0]  # its own group first: get (none yet), create
        assert shards.renew() == [0]  # renew: update
        shards.stop(release=True)  # hand the Lease back: update
        writes = [w for w in srv.store.writes if w.resource == "leases" and w.name == lease_name(0)]
        assert [w.verb for w in writes] == ["create", "update", "update"]
        assert writes[0].obj["spec"]["holderIdentity"] == "inferslice-api-0" and not writes[-1].obj["spec"].get("holderIdentity")
        used = _used(srv, rbac.Component.API)
    assert {verb for (_, _, _, verb) in used} == {"get", "create", "update"}
    assert used == _granted(production, rbac.Component.API)
    assert _granted(rendered, rbac.Component.API) == set()  # the unsharded base grants the API nothing
