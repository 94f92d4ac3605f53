"""The platform's objects, generated from the tiers file: namespaces, config, the exporter DaemonSets,
the diagnosis API and controller Deployments, ServiceAccounts and RBAC, Services, monitors, the
generated PrometheusRule, Grafana dashboard ConfigMaps and the Alertmanager routing.

Two namespaces, because Pod Security admission is per namespace: the API and the controller run in
``inferslice-system`` under the ``restricted`` profile; the exporter needs the host's network
namespace, the OVSDB socket and the host PID table (which GPU process belongs to which pod), which
only the ``privileged`` profile admits, so it runs alone in ``inferslice-node``. It is still not a
privileged container: every capability is dropped (see ``EXPORTER_CAPABILITIES``).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from inferslice.dashboards import alertmanager, boards, rules
from inferslice.topology import Topology

from . import rbac
from .rbac import Component, service_account
from .tiers import POP_LABEL, queue_name, subnet_name

PLATFORM_NS = "inferslice-system"
NODE_NS = "inferslice-node"
IMAGE = "inferslice/inferslice:0.1.0"
API_PORT = 8080
CONTROLLER_PORT = 8081
EXPORTER_PORT = 9470
TOKEN_SECRET = "inferslice-api-token"  # created by the operator: kubectl create secret generic ... --from-literal=token=...
TOKEN_KEY = "token"
TOKEN_DIR = "/var/run/secrets/inferslice"
ALERTMANAGER_SECRET = "alertmanager-inferslice"
# Prometheus Operator mounts each Secret listed in Alertmanager.spec.secrets at this path.
ALERTMANAGER_TOKEN_FILE = f"/etc/alertmanager/secrets/{TOKEN_SECRET}/{TOKEN_KEY}"
PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"  # the Prometheus Operator's default Service
PODS_FILE = "/run/inferslice/pods.json"
OVSDB_SOCKET_DIR = "/var/run/openvswitch"
DASHBOARD_LABEL = "grafana_dashboard"  # the Grafana sidecar's default label (kube-prometheus-stack)
PART_OF = {"app.kubernetes.io/part-of": "inferslice"}
SA_NAMESPACES = {Component.API: PLATFORM_NS, Component.CONTROLLER: PLATFORM_NS, Component.EXPORTER: NODE_NS}

# Capabilities the exporter adds: none. Each thing it does and why it needs no capability:
EXPORTER_CAPABILITIES: dict[str, str] = {}
EXPORTER_NEEDS: dict[str, str] = {
    "netlink RTM_GETSTATS / RTM_GETTCLASS dumps (link counters, HTB classes)": (
        "read-only netlink requests need no CAP_NET_ADMIN; hostNetwork puts the socket in the host's namespace,"
        " where Kube-OVN's veths and OVS QoS classes are"
    ),
    "OVSDB (Interface statistics, QoS) over /var/run/openvswitch/db.sock": (
        "the socket is owned by uid 0 and the container runs as uid 0 with all capabilities dropped: owner permission, no CAP_DAC_OVERRIDE"
    ),
    "NVML (power, utilisation, per-process memory)": "device nodes come from the NVIDIA runtime (NVIDIA_VISIBLE_DEVICES), not a capability",
    "GPU process -> pod (/proc/<pid>/cgroup)": "hostPID; /proc/<pid>/cgroup is world-readable, so no CAP_SYS_PTRACE",
    "RTT probes between PoPs (UDP echo)": "unprivileged UDP on a port above 1024",
}


def api_url() -> str:
    return f"http://inferslice-api.{PLATFORM_NS}.svc:{API_PORT}"


def _meta(name: str, namespace: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**PART_OF, **(labels or {})}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _app(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "inferslice", "app.kubernetes.io/component": component}


def namespaces() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": _meta(PLATFORM_NS, None, {"pod-security.kubernetes.io/enforce": "restricted"}),
        },
        # hostNetwork, hostPath and hostPID are only admitted by the privileged profile.
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(NODE_NS, None, {"pod-security.kubernetes.io/enforce": "privileged"})},
    ]


def _configmap(name: str, namespace: str, data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, namespace, labels), "data": data}


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=10_000)


def topology_configmaps(tiers_yaml: str) -> list[dict[str, Any]]:
    return [_configmap("inferslice-topology", ns, {"topology.yaml": tiers_yaml}) for ns in (PLATFORM_NS, NODE_NS)]


def exporter_config(topology: Topology, pop: str) -> dict[str, Any]:
    """The exporter config (``inferslice exporter --config``) of one PoP's nodes on Kubernetes."""
    return {
        "topology": "/etc/inferslice/topology.yaml",
        "network": {
            "registry": False,
            "ovs": {
                "socket": f"{OVSDB_SOCKET_DIR}/db.sock",
                "pop": pop,
                "pods_file": PODS_FILE,
                "subnets": {subnet_name(topology, t): t.name for t in topology.tiers},
            },
        },
        "gpu": {
            "pop": pop,
            "nvml": True,
            "registry": False,
            "pods_file": PODS_FILE,
            "queues": {queue_name(t): t.name for t in topology.tiers},
        },
    }


def service_accounts() -> list[dict[str, Any]]:
    out = []
    for component, ns in ((Component.API, PLATFORM_NS), (Component.CONTROLLER, PLATFORM_NS), (Component.EXPORTER, NODE_NS)):
        out.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(service_account(component), ns, _app(component.value))})
    return out


def _resources(cpu: str, memory: str, cpu_limit: str | None = None) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu_limit or cpu, "memory": memory}}


def _restricted(uid: int = 10001) -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _probe(path: str, port: str, period_s: int = 10) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, "periodSeconds": period_s, "timeoutSeconds": 2, "failureThreshold": 3}


def _volume_topology() -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        {"name": "topology", "configMap": {"name": "inferslice-topology"}},
        {"name": "topology", "mountPath": "/etc/inferslice", "readOnly": True},
    )


def _pod_spec(component: Component, containers: list[dict[str, Any]], volumes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "serviceAccountName": service_account(component),
        "automountServiceAccountToken": True,
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 10001},
        "containers": containers,
        "volumes": volumes,
        **extra,
    }


def _deployment(name: str, component: Component, replicas: int, spec: dict[str, Any]) -> dict[str, Any]:
    labels = _app(component.value)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, PLATFORM_NS, labels),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def api_args() -> list[str]:
    return [
        "api",
        "--host",
        "0.0.0.0",
        "--port",
        str(API_PORT),
        "--topology",
        "/etc/inferslice/topology.yaml",
        "--db",
        "/var/lib/inferslice/inferslice.db",
        "--token-file",
        f"{TOKEN_DIR}/{TOKEN_KEY}",
        "--source",
        "prometheus",
        "--prometheus-url",
        PROMETHEUS_URL,
    ]


def api_deployment() -> dict[str, Any]:
    vol, mount = _volume_topology()
    container = {
        "name": "api",
        "image": IMAGE,
        "args": api_args(),
        "ports": [{"name": "http", "containerPort": API_PORT}],
        "readinessProbe": _probe("/readyz", "http", 5),
        "livenessProbe": _probe("/healthz", "http"),
        "resources": _resources("500m", "512Mi", "2"),
        "securityContext": _restricted(),
        "volumeMounts": [
            mount,
            {"name": "token", "mountPath": TOKEN_DIR, "readOnly": True},
            {"name": "state", "mountPath": "/var/lib/inferslice"},
        ],
    }
    volumes = [
        vol,
        {"name": "token", "secret": {"secretName": TOKEN_SECRET, "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}]}},
        # History and references; the audit trail of actions lives in SliceAction objects, not here.
        {"name": "state", "emptyDir": {"sizeLimit": "1Gi"}},
    ]
    return _deployment("inferslice-api", Component.API, 1, _pod_spec(Component.API, [container], volumes))


def controller_deployment() -> dict[str, Any]:
    vol, mount = _volume_topology()
    container = {
        "name": "controller",
        "image": IMAGE,
        # The flags of `inferslice control`; its audit trail is the SliceAction objects in the platform
        # namespace (service/controller/audit_cr.py), so it needs no volume and survives a restart.
        "args": [
            "control",
            "--mode",
            "approve",
            "--backend",
            "kubernetes",
            "--topology",
            "/etc/inferslice/topology.yaml",
            "--api",
            api_url(),
            "--listen",
            f"0.0.0.0:{CONTROLLER_PORT}",
            "--lease-namespace",
            PLATFORM_NS,
            "--actions-namespace",
            PLATFORM_NS,
        ],
        # The Lease holder's identity: the pod name, unique across the two replicas.
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [{"name": "http", "containerPort": CONTROLLER_PORT}],
        # TCP probes: /healthz reports steps, and the follower replica does not step while the leader acts.
        "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 10},
        "resources": _resources("200m", "256Mi", "1"),
        "securityContext": _restricted(),
        "volumeMounts": [mount],
    }
    volumes = [vol]
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": _app(Component.CONTROLLER.value)},
        }
    ]
    spec = _pod_spec(Component.CONTROLLER, [container], volumes, topologySpreadConstraints=spread)
    # Two replicas, one leader (coordination.k8s.io Lease); the other takes over within the lease duration.
    return _deployment("inferslice-controller", Component.CONTROLLER, 2, spec)


def exporter_daemonset(topology: Topology, pop: str) -> dict[str, Any]:
    labels = {**_app(Component.EXPORTER.value), POP_LABEL: pop}
    node_env = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    exporter_sc = {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        # uid 0 only for the OVSDB socket's owner permission; no capability is kept.
        "runAsNonRoot": False,
        "runAsUser": 0,
        "capabilities": {"drop": ["ALL"], "add": sorted(EXPORTER_CAPABILITIES)},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    exporter = {
        "name": "exporter",
        "image": IMAGE,
        "args": ["exporter", "--config", "/etc/inferslice/exporter/exporter.yaml", "--host", "0.0.0.0", "--port", str(EXPORTER_PORT)],
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"}],
        "ports": [{"name": "metrics", "containerPort": EXPORTER_PORT}],
        # A TCP probe: an HTTP one would cost a full scrape each period.
        "readinessProbe": {"tcpSocket": {"port": "metrics"}, "periodSeconds": 10},
        "livenessProbe": {"tcpSocket": {"port": "metrics"}, "periodSeconds": 20},
        "resources": _resources("100m", "128Mi", "500m"),
        "securityContext": exporter_sc,
        "volumeMounts": [
            {"name": "topology", "mountPath": "/etc/inferslice/topology.yaml", "subPath": "topology.yaml", "readOnly": True},
            {"name": "exporter-config", "mountPath": "/etc/inferslice/exporter", "readOnly": True},
            {"name": "ovs-run", "mountPath": OVSDB_SOCKET_DIR, "readOnly": True},
            {"name": "pods", "mountPath": "/run/inferslice", "readOnly": True},
        ],
    }
    pods_sync = {
        "name": "pods-sync",
        "image": IMAGE,
        "args": ["deploy", "pods-sync", "--node", "$(NODE_NAME)", "--out", PODS_FILE, "--interval-s", "5"],
        "env": node_env,
        "resources": _resources("20m", "64Mi", "200m"),
        "securityContext": _restricted(),
        "volumeMounts": [{"name": "pods", "mountPath": "/run/inferslice"}],
    }
    volumes = [
        {"name": "topology", "configMap": {"name": "inferslice-topology"}},
        {"name": "exporter-config", "configMap": {"name": f"inferslice-exporter-{pop}"}},
        {"name": "ovs-run", "hostPath": {"path": OVSDB_SOCKET_DIR, "type": "Directory"}},
        {"name": "pods", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": POP_LABEL, "operator": "In", "values": [pop]}]}]
            }
        }
    }
    spec = {
        "serviceAccountName": service_account(Component.EXPORTER),
        "hostNetwork": True,
        "hostPID": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "affinity": affinity,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "system-node-critical",
        "containers": [exporter, pods_sync],
        "volumes": volumes,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(f"inferslice-exporter-{pop}", NODE_NS, labels),
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def services() -> list[dict[str, Any]]:
    out = []
    for name, component, port in (
        ("inferslice-api", Component.API, API_PORT),
        ("inferslice-controller", Component.CONTROLLER, CONTROLLER_PORT),
    ):
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _meta(name, PLATFORM_NS, _app(component.value)),
                "spec": {"selector": _app(component.value), "ports": [{"name": "http", "port": port, "targetPort": "http"}]},
            }
        )
    return out


def monitors(topology: Topology) -> list[dict[str, Any]]:
    interval = f"{topology.timing.scrape_interval_s:g}s"
    out: list[dict[str, Any]] = []
    for name, component in (("inferslice-api", Component.API), ("inferslice-controller", Component.CONTROLLER)):
        out.append(
            {
                "apiVersion": "monitoring.coreos.com/v1",
                "kind": "ServiceMonitor",
                "metadata": _meta(name, PLATFORM_NS, _app(component.value)),
                "spec": {
                    "selector": {"matchLabels": _app(component.value)},
                    "endpoints": [{"port": "http", "path": "/metrics", "interval": interval}],
                },
            }
        )
    out.append(
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PodMonitor",
            "metadata": _meta("inferslice-exporter", NODE_NS, _app(Component.EXPORTER.value)),
            "spec": {
                "selector": {"matchLabels": _app(Component.EXPORTER.value)},
                "podMetricsEndpoints": [
                    {
                        "port": "metrics",
                        "path": "/metrics",
                        "interval": interval,
                        # The exporter labels its own series with slice and pop; keep them over the target's.
                        "honorLabels": True,
                    }
                ],
            },
        }
    )
    return out


def prometheus_rule(topology: Topology) -> dict[str, Any]:
    return rules.prometheus_rule(topology, api_url(), PLATFORM_NS)


def dashboard_configmaps(topology: Topology) -> list[dict[str, Any]]:
    out = []
    for dash in boards.all_dashboards(topology, api_url()):
        cm = _configmap(
            f"dashboard-{dash['uid']}", PLATFORM_NS, {f"{dash['uid']}.json": json.dumps(dash, sort_keys=True)}, {DASHBOARD_LABEL: "1"}
        )
        cm["metadata"]["annotations"] = {"grafana_folder": "InferSlice"}  # the sidecar's folder annotation
        out.append(cm)
    return out


def alertmanager_config(topology: Topology) -> dict[str, Any]:
    """The generated routing, every webhook authenticated with the API token (a file the
    Alertmanager pod mounts; the token never appears in the config)."""
    config = alertmanager.alertmanager_config(topology, api_url())
    for receiver in config["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["http_config"] = {"authorization": {"type": "Bearer", "credentials_file": ALERTMANAGER_TOKEN_FILE}}
    return config


def alertmanager_secret(topology: Topology) -> dict[str, Any]:
    # Prometheus Operator reads an Alertmanager's config from a Secret (Alertmanager.spec.configSecret).
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(ALERTMANAGER_SECRET, "monitoring"),
        "type": "Opaque",
        "stringData": {"alertmanager.yaml": _dump(alertmanager_config(topology))},
    }


def platform_objects(topology: Topology, tiers_yaml: str) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [*namespaces(), *topology_configmaps(tiers_yaml), *service_accounts()]
    objs += rbac.roles(topology, PLATFORM_NS, SA_NAMESPACES)["platform"]
    for pop in topology.pops:
        objs.append(_configmap(f"inferslice-exporter-{pop.name}", NODE_NS, {"exporter.yaml": _dump(exporter_config(topology, pop.name))}))
        objs.append(exporter_daemonset(topology, pop.name))
    objs += [api_deployment(), controller_deployment(), *services(), *monitors(topology), prometheus_rule(topology)]
    objs += [*dashboard_configmaps(topology), alertmanager_secret(topology)]
    return objs
