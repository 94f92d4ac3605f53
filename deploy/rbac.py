"""Least-privilege RBAC: every permission a platform component uses, declared once, rendered into
Roles/ClusterRoles.

Each ``Permission`` says which component needs it and why. The rendered roles grant exactly these
and nothing else; ``tests/control_kubernetes/test_rbac_recorded.py`` runs each component's own code
(the controller as ``make_controller`` builds it, pods-sync as its CLI runs it) against the
apiserver stand-in enforcing the rendered roles, records every call, and checks both directions (a
grant nobody uses fails the build, and so does a call without a grant: a 403).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inferslice.topology import Topology


class Scope(enum.StrEnum):
    TIERS = "tiers"  # a Role in each tier namespace
    PLATFORM = "platform"  # a Role in the platform namespace
    CLUSTER = "cluster"  # a ClusterRole (reads across namespaces or cluster-scoped kinds)


class Component(enum.StrEnum):
    CONTROLLER = "controller"
    EXPORTER = "exporter"
    API = "api"


@dataclass(frozen=True)
class Permission:
    component: Component
    scope: Scope
    api_group: str
    resource: str  # "pods", or "rayservices/status" for a subresource
    verbs: tuple[str, ...]
    why: str


PERMISSIONS: tuple[Permission, ...] = (
    Permission(
        Component.CONTROLLER,
        Scope.TIERS,
        "ray.io",
        "rayservices",
        ("get", "patch"),
        "read the active RayCluster's name; set serveConfigV2 replicas",
    ),
    Permission(
        Component.CONTROLLER,
        Scope.TIERS,
        "ray.io",
        "rayclusters",
        ("get", "patch"),
        "set worker-group bounds (a RayService patch never reaches a running cluster); add a PoP's group to relocate",
    ),
    Permission(
        Component.CONTROLLER,
        Scope.TIERS,
        "",
        "pods",
        ("list", "patch"),
        "find a tier's head pod and set its Kube-OVN ingress_rate/egress_rate (live caps)",
    ),
    Permission(
        Component.CONTROLLER,
        Scope.PLATFORM,
        "coordination.k8s.io",
        "leases",
        ("get", "create", "update"),
        "leader election between the two controller replicas",
    ),
    Permission(
        Component.CONTROLLER,
        Scope.PLATFORM,
        "inferslice.io",
        "sliceactions",
        ("get", "list", "create"),
        "the audit trail: one SliceAction per decided action, found again after a restart",
    ),
    Permission(
        Component.CONTROLLER,
        Scope.PLATFORM,
        "inferslice.io",
        "sliceactions/status",
        ("patch",),
        "move an action through Pending/Approved/Applied/Ineffective/RolledBack",
    ),
    Permission(
        Component.EXPORTER,
        Scope.CLUSTER,
        "",
        "pods",
        ("list",),
        "pods-sync (the exporter's sidecar): this node's pods, field-selected, to map OVS ports, subnets, caps and GPU fractions",
    ),
)
# The API calls no Kubernetes API (on Kubernetes the trail is the SliceAction objects, read with
# kubectl), so it holds no permission and mounts no token.


# Only where the diagnosis loop is sharded (the production overlay's StatefulSet, ``deploy.fleet``):
# granted by their own Role, ``inferslice-api-shards``, so the unsharded API holds no Lease verbs.
SHARD_PERMISSIONS: tuple[Permission, ...] = (
    Permission(
        Component.API,
        Scope.PLATFORM,
        "coordination.k8s.io",
        "leases",
        ("get", "create", "update"),
        "one Lease per PoP group of the sharded diagnosis loop (inferslice api --shard-groups)",
    ),
)
SHARD_ROLE = "inferslice-api-shards"


def shard_role(platform_ns: str, sa_namespace: str) -> list[dict[str, Any]]:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": SHARD_ROLE, "namespace": platform_ns},
        "rules": _rules(list(SHARD_PERMISSIONS)),
    }
    binding = _binding("Role", SHARD_ROLE, platform_ns, sa_namespace, Component.API)
    return [role, binding]


def tier_namespace(topology: Topology, tier: str) -> str:
    return f"{topology.name}-{tier}"


def service_account(component: Component) -> str:
    return f"inferslice-{component.value}"


def _rules(perms: list[Permission]) -> list[dict[str, Any]]:
    return [{"apiGroups": [p.api_group], "resources": [p.resource], "verbs": list(p.verbs)} for p in perms]


def _binding(kind: str, name: str, namespace: str | None, sa_namespace: str, component: Component) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding" if kind == "Role" else "ClusterRoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": service_account(component), "namespace": sa_namespace}],
    }


def roles(topology: Topology, platform_ns: str, sa_namespaces: Mapping[Component, str]) -> dict[str, list[dict[str, Any]]]:
    """Objects by where they go: ``platform`` (platform namespace and cluster scope) and one list per
    tier; ``sa_namespaces`` says where each component's ServiceAccount lives."""
    out: dict[str, list[dict[str, Any]]] = {"platform": [], **{t.name: [] for t in topology.tiers}}
    for component in Component:
        sa_ns = sa_namespaces[component]
        mine = [p for p in PERMISSIONS if p.component == component]
        for scope in Scope:
            perms = [p for p in mine if p.scope == scope]
            if not perms:
                continue
            name = f"inferslice-{component.value}"
            if scope == Scope.CLUSTER:
                role = {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": name},
                    "rules": _rules(perms),
                }
                out["platform"] += [role, _binding("ClusterRole", name, None, sa_ns, component)]
            elif scope == Scope.PLATFORM:
                role = {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": name, "namespace": platform_ns},
                    "rules": _rules(perms),
                }
                out["platform"] += [role, _binding("Role", name, platform_ns, sa_ns, component)]
            else:
                for tier in topology.tiers:
                    ns = tier_namespace(topology, tier.name)
                    role = {
                        "apiVersion": "rbac.authorization.k8s.io/v1",
                        "kind": "Role",
                        "metadata": {"name": name, "namespace": ns},
                        "rules": _rules(perms),
                    }
                    out[tier.name] += [role, _binding("Role", name, ns, sa_ns, component)]
    return out


def granted(objects: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """(role name, api group, resource, verb) for every grant in rendered Roles/ClusterRoles."""
    out: set[tuple[str, str, str, str]] = set()
    for obj in objects:
        if obj.get("kind") not in ("Role", "ClusterRole"):
            continue
        for rule in obj.get("rules", []):
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    for verb in rule.get("verbs", []):
                        out.add((obj["metadata"]["name"], group, resource, verb))
    return out


# -- evaluation: what kube-apiserver's RBAC authorizer decides for rendered objects ----------------


def service_account_user(namespace: str, name: str) -> str:
    """The user name kube-apiserver gives a ServiceAccount's token."""
    return f"system:serviceaccount:{namespace}:{name}"


def _rule_allows(rule: dict[str, Any], verb: str, group: str, resource: str, name: str | None) -> bool:
    def has(key: str, value: str) -> bool:
        values = rule.get(key, [])
        return "*" in values or value in values

    names = rule.get("resourceNames")
    return has("verbs", verb) and has("apiGroups", group) and has("resources", resource) and (not names or name in names)


def authorize(
    objects: list[dict[str, Any]], user: str, verb: str, group: str, resource: str, namespace: str | None, name: str | None = None
) -> bool:
    """True if a Role/ClusterRole bound to ``user`` (a ServiceAccount) grants the request, with the
    RBAC authorizer's rules: a RoleBinding grants in its namespace only (its roleRef a Role there or a
    ClusterRole), a ClusterRoleBinding everywhere; ``resource`` is ``plural`` or ``plural/subresource``."""
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects if o.get("kind") in ("Role", "ClusterRole")
    }
    for binding in (o for o in objects if o.get("kind") in ("RoleBinding", "ClusterRoleBinding")):
        subjects = binding.get("subjects", [])
        if not any(s.get("kind") == "ServiceAccount" and service_account_user(s.get("namespace", ""), s["name"]) == user for s in subjects):
            continue
        ref = binding["roleRef"]
        if binding["kind"] == "RoleBinding":
            if namespace != binding["metadata"].get("namespace"):
                continue
            role = roles.get((ref["kind"], binding["metadata"]["namespace"] if ref["kind"] == "Role" else None, ref["name"]))
        else:
            role = roles.get(("ClusterRole", None, ref["name"]))
        if role and any(_rule_allows(r, verb, group, resource, name) for r in role.get("rules", [])):
            return True
    return False


def forbidden_message(user: str, verb: str, group: str, resource: str, namespace: str | None, name: str | None) -> str:
    """kube-apiserver's 403 message (``apierrors.NewForbidden`` around the RBAC authorizer's reason)."""
    plural = resource.partition("/")[0]  # the message names the resource, the reason its subresource
    qualified = f"{plural}.{group}" if group else plural
    who = f'User "{user}" cannot {verb} resource "{resource}" in API group "{group}"'
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    return (f'{qualified} "{name}" is forbidden: ' if name else f"{qualified} is forbidden: ") + who + where
