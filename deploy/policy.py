"""Policy checks over rendered objects (pure): every container has requests and limits, nothing is
privileged, every added capability is documented, host namespaces only where documented, every
platform container but the OVSDB proxy is hardened (non-root, read-only root, seccomp
RuntimeDefault; Deployments with probes), a ServiceAccount token only in pods whose component calls
the apiserver, no ``system-*`` priority class outside kube-system, a default-deny ingress
NetworkPolicy in each platform namespace, RBAC without wildcards granting exactly the declared
permissions.

``violations(objects)`` returns one line per broken rule (empty: the objects pass).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from . import fleet, platform, rbac

_HOST_FIELDS = ("hostNetwork", "hostPID", "hostIPC")


def pod_specs(obj: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, pod spec) for every pod template an object carries (workloads and RayService/RayCluster)."""
    kind, name = obj.get("kind"), obj.get("metadata", {}).get("name")
    spec = obj.get("spec", {})
    if kind in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
        yield f"{kind}/{name}", spec["template"]["spec"]
    elif kind in ("RayService", "RayCluster"):
        cluster = spec["rayClusterConfig"] if kind == "RayService" else spec
        yield f"{kind}/{name}/head", cluster["headGroupSpec"]["template"]["spec"]
        for group in cluster.get("workerGroupSpecs", []):
            yield f"{kind}/{name}/{group['groupName']}", group["template"]["spec"]
    elif kind == "Pod":
        yield f"Pod/{name}", spec


def _container_checks(where: str, pod: dict[str, Any], c: dict[str, Any], hardened: bool) -> list[str]:
    out: list[str] = []
    at = f"{where}/{c['name']}"
    res = c.get("resources", {})
    for part in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if r not in res.get(part, {}):
                out.append(f"{at}: resources.{part}.{r} not set")
    sc = c.get("securityContext", {})
    if sc.get("privileged"):
        out.append(f"{at}: privileged")
    if sc.get("allowPrivilegeEscalation", True):
        out.append(f"{at}: allowPrivilegeEscalation not false")
    caps = sc.get("capabilities", {})
    if "ALL" not in caps.get("drop", []):
        out.append(f"{at}: capabilities do not drop ALL")
    for cap in caps.get("add", []):
        if cap not in platform.EXPORTER_CAPABILITIES:
            out.append(f"{at}: capability {cap} added but not documented in EXPORTER_CAPABILITIES")
    pod_sc = pod.get("securityContext", {})
    seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {})).get("type")
    if seccomp != "RuntimeDefault":
        out.append(f"{at}: seccompProfile is not RuntimeDefault")
    if hardened:
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot", False)):
            out.append(f"{at}: runAsNonRoot not set")
        if not sc.get("readOnlyRootFilesystem"):
            out.append(f"{at}: readOnlyRootFilesystem not set")
    return out


def _workload_checks(obj: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    namespace = obj.get("metadata", {}).get("namespace")
    platform_workload = obj.get("kind") in ("Deployment", "DaemonSet", "StatefulSet")
    for where, pod in pod_specs(obj):
        host = [f for f in _HOST_FIELDS if pod.get(f)] + [f"hostPath {v['name']}" for v in pod.get("volumes", []) if "hostPath" in v]
        if host and namespace != platform.NODE_NS:
            out.append(f"{where}: {', '.join(host)} outside {platform.NODE_NS}")
        exporter = namespace == platform.NODE_NS
        for c in pod.get("containers", []):
            # Only the exporter's OVSDB proxy runs as uid 0 (documented in EXPORTER_NEEDS); every other container is hardened.
            hardened = platform_workload and not (exporter and c["name"] == "ovsdb-proxy")
            out += _container_checks(where, pod, c, hardened)
            if platform_workload and obj["kind"] in ("Deployment", "StatefulSet"):
                for probe in ("readinessProbe", "livenessProbe"):
                    if probe not in c:
                        out.append(f"{where}/{c['name']}: no {probe}")
        if platform_workload:
            out += _token_checks(where, pod)
        priority = pod.get("priorityClassName", "")
        if priority.startswith("system-") and namespace != "kube-system":
            out.append(f"{where}: priorityClassName {priority} outside kube-system (clusters that limit priority classes refuse it)")
    return out


def _token_checks(where: str, pod: dict[str, Any]) -> list[str]:
    """A ServiceAccount token only in a pod whose component calls the apiserver, and then only where used."""
    components = {rbac.service_account(c): c for c in rbac.Component}
    component = components.get(pod.get("serviceAccountName", ""))
    projected = [
        v["name"] for v in pod.get("volumes", []) if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))
    ]
    mounts = pod.get("automountServiceAccountToken", True) is not False or projected
    if component is None:
        if not mounts:
            return []  # a pod that holds no token (VictoriaMetrics in the sharded form) needs no component's account
        return [f"{where}: serviceAccountName {pod.get('serviceAccountName')!r} is not a platform component's"]
    if mounts and not (platform.uses_api_token(component) or fleet.uses_leases(pod)):
        return [f"{where}: mounts a ServiceAccount token, but {component.value} calls no Kubernetes API"]
    if projected and pod.get("automountServiceAccountToken", True) is not False:
        return [f"{where}: a projected token and automountServiceAccountToken: mount it once"]
    return []


def _namespace_checks(objects: list[dict[str, Any]]) -> list[str]:
    out = []
    for ns in (platform.PLATFORM_NS, platform.NODE_NS):
        denies = [
            o
            for o in objects
            if o.get("kind") == "NetworkPolicy"
            and o["metadata"].get("namespace") == ns
            and o["spec"].get("podSelector") == {}
            and "Ingress" in o["spec"].get("policyTypes", [])
            and not o["spec"].get("ingress")
        ]
        if not denies and any(o.get("metadata", {}).get("namespace") == ns for o in objects):
            out.append(f"namespace {ns}: no default-deny ingress NetworkPolicy")
    return out


def _rbac_checks(objects: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for obj in objects:
        if obj.get("kind") not in ("Role", "ClusterRole"):
            continue
        for rule in obj.get("rules", []):
            for key in ("apiGroups", "resources", "verbs"):
                if "*" in rule.get(key, []):
                    out.append(f"{obj['kind']}/{obj['metadata']['name']}: wildcard in {key}")
    declared = {(f"inferslice-{p.component.value}", p.api_group, p.resource, v) for p in rbac.PERMISSIONS for v in p.verbs}
    declared |= {(rbac.SHARD_ROLE, p.api_group, p.resource, v) for p in rbac.SHARD_PERMISSIONS for v in p.verbs}
    for grant in sorted(rbac.granted(objects) - declared):
        out.append(f"RBAC grants {grant} which no component declares")
    return out


def violations(objects: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for obj in objects:
        out += _workload_checks(obj)
    return out + _rbac_checks(objects) + _namespace_checks(objects)
