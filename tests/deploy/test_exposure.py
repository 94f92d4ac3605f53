"""Exposure and privilege of the rendered platform: the NetworkPolicies select the rendered pods and
admit exactly the peers they should (judged by NetworkPolicy's semantics on the pods' own labels and
named ports), tokens only where the apiserver is called, the exporter non-root without capability
(its OVSDB proxy the only uid 0), a priority class clusters accept, overlays that patch by name."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferslice.deploy import fleet, network_policies, platform, policy, render, validate
from inferslice.deploy.network_policies import Pod, allowed
from inferslice.topology import Topology

from .conftest import kubectl_or_skip


def _by(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def _pod_of(workload: dict[str, Any]) -> Pod:
    """The pod a Deployment/DaemonSet runs, as the policies see it: its namespace, labels, named ports."""
    template = workload["spec"]["template"]
    ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", []) if "name" in p}
    return Pod(workload["metadata"]["namespace"], template["metadata"]["labels"], ports=ports)


def _peer(namespace: str, **labels: str) -> Pod:
    return Pod(namespace, labels)


@pytest.fixture(scope="module")
def pods(base_objects: list[dict[str, Any]]) -> dict[str, Pod]:
    ds = next(o for o in base_objects if o["kind"] == "DaemonSet")
    return {
        "api": _pod_of(_by(base_objects, "Deployment", "inferslice-api")),
        "controller": _pod_of(_by(base_objects, "Deployment", "inferslice-controller")),
        "exporter": _pod_of(ds),
    }


def test_the_api_and_console_only_from_the_ingress_grafana_prometheus_and_the_controller(
    base_objects: list[dict[str, Any]], pods: dict[str, Pod], topology: Topology
) -> None:
    api, port = pods["api"], platform.API_PORT
    assert allowed(base_objects, api, _peer("ingress-nginx", **{"app.kubernetes.io/name": "ingress-nginx"}), port)
    assert allowed(base_objects, api, _peer("monitoring", **{"app.kubernetes.io/name": "grafana"}), port)
    assert allowed(base_objects, api, _peer("monitoring", **{"app.kubernetes.io/name": "prometheus"}), port)
    controller_pod = Pod(platform.PLATFORM_NS, dict(pods["controller"].labels))
    assert allowed(base_objects, api, controller_pod, port), "a split controller reads the API's verdicts"
    tier_ns = f"{topology.name}-{topology.tiers[0].name}"
    for stranger in (_peer("default"), _peer(tier_ns, **{"ray.io/node-type": "head"}), _peer(platform.NODE_NS, **pods["exporter"].labels)):
        assert not allowed(base_objects, api, stranger, port), stranger
    assert not allowed(base_objects, api, _peer(platform.PLATFORM_NS, app="something-else"), port), "default-deny in the namespace"
    assert not allowed(base_objects, api, _peer("monitoring"), 22), "only the http port"


def test_the_controller_and_exporter_only_from_prometheus(base_objects: list[dict[str, Any]], pods: dict[str, Pod]) -> None:
    prometheus = _peer("monitoring", **{"app.kubernetes.io/name": "prometheus"})
    for target, port in ((pods["controller"], platform.CONTROLLER_PORT), (pods["exporter"], platform.EXPORTER_PORT)):
        assert allowed(base_objects, target, prometheus, port)
        assert not allowed(base_objects, target, _peer("ingress-nginx"), port)
        assert not allowed(base_objects, target, _peer(platform.PLATFORM_NS, **pods["api"].labels), port)
        assert not allowed(base_objects, target, _peer("default"), port)
    # Every pod of both namespaces is under a default deny: something new there is closed until a policy opens it.
    for ns in (platform.PLATFORM_NS, platform.NODE_NS):
        assert not allowed(base_objects, Pod(ns, {"app": "new"}), prometheus, 8080)


def test_the_exporter_listens_on_the_node_address_only(base_objects: list[dict[str, Any]]) -> None:
    for ds in (o for o in base_objects if o["kind"] == "DaemonSet"):
        exporter = ds["spec"]["template"]["spec"]["containers"][0]
        args = exporter["args"]
        assert args[args.index("--host") + 1] == "$(POD_IP)"
        assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in exporter["env"]


def test_the_evaluator_follows_networkpolicy_semantics() -> None:
    """Written from the NetworkPolicy reference, independently of our policies."""
    ns = "team"
    allow_all = {"kind": "NetworkPolicy", "metadata": {"name": "a", "namespace": ns}, "spec": {"podSelector": {}, "ingress": [{}]}}
    deny = {"kind": "NetworkPolicy", "metadata": {"name": "d", "namespace": ns}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    web = Pod(ns, {"app": "web", "tier": "front"}, ports={"http": 80})
    other = Pod("elsewhere", {"app": "x"}, namespace_labels={"env": "prod"})
    assert allowed([], web, other, 80), "no policy selects the pod: open"
    assert not allowed([deny], web, other, 80)
    assert allowed([deny, allow_all], web, other, 80), "policies add up"
    expr = {
        "kind": "NetworkPolicy",
        "metadata": {"name": "e", "namespace": ns},
        "spec": {
            "podSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]},
            "ingress": [
                {
                    "from": [{"namespaceSelector": {"matchLabels": {"env": "prod"}}, "podSelector": {"matchLabels": {"app": "x"}}}],
                    "ports": [{"port": "http"}],
                }
            ],
        },
    }
    assert allowed([expr], web, other, 80)
    assert not allowed([expr], web, other, 443)
    assert not allowed([expr], web, Pod("elsewhere", {"app": "y"}, namespace_labels={"env": "prod"}), 80), "both selectors must match"
    assert not allowed([expr], web, Pod("staging", {"app": "x"}, namespace_labels={"env": "staging"}), 80)
    same_ns_only = copy.deepcopy(expr)
    same_ns_only["spec"]["ingress"][0]["from"] = [{"podSelector": {"matchLabels": {"app": "x"}}}]
    assert not allowed([same_ns_only], web, other, 80), "a bare podSelector means the policy's namespace"
    assert allowed([same_ns_only], web, Pod(ns, {"app": "x"}), 80)


def test_tokens_only_where_the_apiserver_is_called(base_objects: list[dict[str, Any]]) -> None:
    controller = _by(base_objects, "Deployment", "inferslice-controller")["spec"]["template"]["spec"]
    assert controller["automountServiceAccountToken"] is True
    for ds in (o for o in base_objects if o["kind"] == "DaemonSet"):
        spec = ds["spec"]["template"]["spec"]
        assert spec["automountServiceAccountToken"] is False
        holding = [c["name"] for c in spec["containers"] if any(m["mountPath"] == platform.SA_TOKEN_DIR for m in c.get("volumeMounts", []))]
        assert holding == ["pods-sync"], "only the sidecar that lists pods holds the token"
    objs = copy.deepcopy(base_objects)
    _by(objs, "Deployment", "inferslice-api")["spec"]["template"]["spec"]["automountServiceAccountToken"] = True
    assert any("calls no Kubernetes API" in v for v in policy.violations(objs))


def test_the_exporter_is_not_root_and_adds_no_capability(base_objects: list[dict[str, Any]]) -> None:
    for ds in (o for o in base_objects if o["kind"] == "DaemonSet"):
        containers = {c["name"]: c for c in ds["spec"]["template"]["spec"]["containers"]}
        assert set(containers) == {"exporter", "ovsdb-proxy", "pods-sync"}
        for name, c in containers.items():
            sc = c["securityContext"]
            assert sc["capabilities"] == {"drop": ["ALL"]} and sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"]
            if name == "ovsdb-proxy":
                assert sc["runAsUser"] == 0, "owner of OVSDB's socket, with no capability"
            else:
                assert sc["runAsNonRoot"] is True and sc["runAsUser"] == platform.NONROOT_UID
        config = yaml.safe_load(
            _by(base_objects, "ConfigMap", f"inferslice-exporter-{ds['metadata']['labels']['inferslice.io/pop']}")["data"]["exporter.yaml"]
        )
        assert config["network"]["ovs"]["socket"] == f"{platform.OVSDB_PROXY_DIR}/db.sock"
    objs = copy.deepcopy(base_objects)
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = False
    assert any("runAsNonRoot not set" in v for v in policy.violations(objs))


def test_a_priority_class_clusters_accept(base_objects: list[dict[str, Any]]) -> None:
    pc = _by(base_objects, "PriorityClass", platform.PRIORITY_CLASS)
    assert 0 < pc["value"] <= 1_000_000_000 and not pc["globalDefault"]  # user-defined classes may not exceed 1e9
    for ds in (o for o in base_objects if o["kind"] == "DaemonSet"):
        assert ds["spec"]["template"]["spec"]["priorityClassName"] == platform.PRIORITY_CLASS
    objs = copy.deepcopy(base_objects)
    next(o for o in objs if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
    assert any("system-node-critical outside kube-system" in v for v in policy.violations(objs))


def test_a_namespace_without_default_deny_is_flagged(base_objects: list[dict[str, Any]]) -> None:
    objs = [o for o in base_objects if not (o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "default-deny-ingress")]
    assert {v for v in policy.violations(objs) if "default-deny" in v} == {
        f"namespace {platform.PLATFORM_NS}: no default-deny ingress NetworkPolicy",
        f"namespace {platform.NODE_NS}: no default-deny ingress NetworkPolicy",
    }


def test_overlays_patch_by_name(tmp_path: Path, tree: render.Tree) -> None:
    """The production overlay's patches are strategic merges addressed by kind and name (containers
    and env entries merge on their names): they still hit their target when the base's lists are
    reordered or grow, which a patch by list position (``args/14``) does not survive."""
    kubectl_or_skip()
    kustomization = yaml.safe_load(tree.files["overlays/production/kustomization.yaml"])
    assert all("path" in p and "target" not in p for p in kustomization["patches"])
    for p in kustomization["patches"]:
        for doc in yaml.safe_load_all(tree.files[f"overlays/production/{p['path']}"]):
            assert doc["kind"] and doc["metadata"]["name"], "each patch names its object"
    render.write(tree, tmp_path)
    patch_file = tmp_path / "overlays/production/api-prometheus.yaml"
    # production's API is the StatefulSet of diagnosis groups (deploy/fleet.py), reading the query layer
    patch_file.write_text(patch_file.read_text().replace(fleet.VM_URL, "http://query.example:9090"))
    api_file = tmp_path / "overlays/production/fleet.yaml"
    docs = list(yaml.safe_load_all(api_file.read_text()))
    api = next(d for d in docs if d and d["kind"] == "StatefulSet" and d["metadata"]["name"] == "inferslice-api")
    container = api["spec"]["template"]["spec"]["containers"][0]
    container["env"].insert(0, {"name": "EXTRA", "value": "1"})  # the base's lists grow and reorder
    container["args"] = ["--log-level", "info", *container["args"]]
    api["spec"]["template"]["spec"]["containers"].insert(0, {**copy.deepcopy(container), "name": "sidecar"})
    api_file.write_text(render.dump_all([d for d in docs if d]))
    objects = validate.kustomize(tmp_path / "overlays" / "production")
    got = _by(objects, "StatefulSet", "inferslice-api")["spec"]["template"]["spec"]["containers"]
    env = {c["name"]: {e["name"]: e.get("value") for e in c["env"]} for c in got}
    assert env["api"]["PROMETHEUS_URL"] == "http://query.example:9090" and env["api"]["EXTRA"] == "1"
    assert env["sidecar"]["PROMETHEUS_URL"] == fleet.VM_URL, "only the container named api is patched"


def test_network_peers_are_an_operator_value(tree: render.Tree) -> None:
    text = tree.files["overlays/production/network-peers.yaml"]
    assert "OPERATOR" in text
    names = {d["metadata"]["name"] for d in yaml.safe_load_all(text) if d}
    assert names == {"inferslice-api", "inferslice-controller", "inferslice-exporter"}
    peers = network_policies.Peers(ingress_namespace="traefik")
    api = next(o for o in platform.network_policy_objects(peers) if o["metadata"]["name"] == "inferslice-api")
    assert {"namespaceSelector": {"matchLabels": {network_policies.NAME_LABEL: "traefik"}}} in api["spec"]["ingress"][0]["from"]
