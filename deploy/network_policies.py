"""Who may reach the platform's pods: NetworkPolicies, and a pure evaluator of their ingress rules.

Both platform namespaces deny all ingress by default; then:

- the API (and the console it serves) on its http port from the ingress controller's namespace,
  Grafana's and Prometheus's (Prometheus scrapes /metrics; Alertmanager, beside it, posts
  /v1/alerts), and from the controller's pods (a split deployment reads verdicts over HTTP);
- the controller's /metrics from Prometheus's namespace;
- the exporter's /metrics from Prometheus's namespace. The exporter uses the host's network
  namespace, which a NetworkPolicy may not govern (Kubernetes leaves host-network pods to the CNI),
  so it also listens on the node's address only (``--host $(POD_IP)``), not on every interface.

Namespaces are matched on ``kubernetes.io/metadata.name``, which the apiserver sets on every
namespace. Egress is not restricted (the controller must reach the apiserver, whose address is the
cluster's own). ``allowed(policies, target, source, port)`` answers "may this pod reach that one
on that port" with NetworkPolicy's semantics, for the tests and ``deploy check``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Peers:
    """The namespaces allowed in (production overlay: OPERATOR values)."""

    ingress_namespace: str = "ingress-nginx"  # ingress-nginx's default namespace
    grafana_namespace: str = "monitoring"  # kube-prometheus-stack installs Grafana beside Prometheus
    prometheus_namespace: str = "monitoring"  # and Prometheus (and Alertmanager) in its release namespace


def _from_namespace(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {NAME_LABEL: name}}}


def _policy(name: str, namespace: str, pod_labels: Mapping[str, str], rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "inferslice"}},
        "spec": {"podSelector": {"matchLabels": dict(pod_labels)} if pod_labels else {}, "policyTypes": ["Ingress"], "ingress": rules},
    }


def default_deny(namespace: str) -> dict[str, Any]:
    return _policy("default-deny-ingress", namespace, {}, [])


def policies(
    platform_ns: str,
    node_ns: str,
    api_labels: Mapping[str, str],
    controller_labels: Mapping[str, str],
    exporter_labels: Mapping[str, str],
    peers: Peers | None = None,
) -> list[dict[str, Any]]:
    p = peers or Peers()
    api_from = [_from_namespace(n) for n in dict.fromkeys((p.ingress_namespace, p.grafana_namespace, p.prometheus_namespace))]
    api_from.append({"podSelector": {"matchLabels": dict(controller_labels)}})
    return [
        default_deny(platform_ns),
        _policy("inferslice-api", platform_ns, api_labels, [{"from": api_from, "ports": [{"protocol": "TCP", "port": "http"}]}]),
        _policy(
            "inferslice-controller",
            platform_ns,
            controller_labels,
            [{"from": [_from_namespace(p.prometheus_namespace)], "ports": [{"protocol": "TCP", "port": "http"}]}],
        ),
        default_deny(node_ns),
        _policy(
            "inferslice-exporter",
            node_ns,
            exporter_labels,
            [{"from": [_from_namespace(p.prometheus_namespace)], "ports": [{"protocol": "TCP", "port": "metrics"}]}],
        ),
    ]


# -- evaluation --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)  # NAME_LABEL is implied
    ports: Mapping[str, int] = field(default_factory=dict)  # container port name -> number


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist); {} selects all."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        present = key in labels
        if (
            (op == "In" and (not present or labels[key] not in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def _peer_matches(peer: Mapping[str, Any], policy_ns: str, source: Pod) -> bool:
    ns_labels = {**source.namespace_labels, NAME_LABEL: source.namespace}
    if "ipBlock" in peer:
        return False  # not used by our policies; pod-to-pod traffic is judged by selectors
    pod_sel, ns_sel = peer.get("podSelector"), peer.get("namespaceSelector")
    in_namespace = _selects(ns_sel, ns_labels) if ns_sel is not None else source.namespace == policy_ns
    return in_namespace and (pod_sel is None or _selects(pod_sel, source.labels))


def _port_matches(ports: Sequence[Mapping[str, Any]] | None, target: Pod, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        want = p.get("port")
        number = target.ports.get(want) if isinstance(want, str) else want
        if want is None or number == port:
            return True
    return False


def allowed(objects: Sequence[Mapping[str, Any]], target: Pod, source: Pod, port: int, protocol: str = "TCP") -> bool:
    """Whether ``source`` may open ``port`` on ``target`` under the NetworkPolicies in ``objects``:
    unrestricted if no Ingress policy of the target's namespace selects it; otherwise only what one
    of the selecting policies' rules admits (from any listed peer, on any listed port)."""
    selecting = [
        o
        for o in objects
        if o.get("kind") == "NetworkPolicy"
        and o["metadata"].get("namespace") == target.namespace
        and "Ingress" in (o["spec"].get("policyTypes") or ["Ingress"])
        and _selects(o["spec"].get("podSelector", {}), target.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            peers = rule.get("from")
            if (not peers or any(_peer_matches(peer, target.namespace, source) for peer in peers)) and _port_matches(
                rule.get("ports"), target, port, protocol
            ):
                return True
    return False
