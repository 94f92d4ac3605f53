"""The platform's objects, generated from the tiers file: namespaces, config, the exporter DaemonSets,
the diagnosis API and controller Deployments, ServiceAccounts and RBAC, Services, monitors, the
generated PrometheusRule, Grafana dashboard ConfigMaps and the Alertmanager routing.

Two namespaces, because Pod Security admission is per namespace: the API and the controller run in
``inferslice-system`` under the ``restricted`` profile; the exporter needs the host's network
namespace, the OVSDB socket and the host PID table (which GPU process belongs to which pod), which
only the ``privileged`` profile admits, so it runs alone in ``inferslice-node``. It is still not a
privileged container, nor root: it runs as uid 10001 with every capability dropped (see
``EXPORTER_NEEDS``); the one thing that needs uid 0, OVSDB's root-owned socket, is reached through
a read-only proxy sidecar (``deploy/ovsdb_proxy.py``), uid 0 with every capability dropped too.

Least privilege and exposure: only a pod whose code calls the apiserver mounts a ServiceAccount
token (the controller; in the exporter's pod only the pods-sync sidecar, through a projected
volume); the roles grant exactly what each component's code calls (``rbac.PERMISSIONS``, checked
against the calls recorded through the apiserver stand-in); NetworkPolicies
(``network_policies.py``) deny ingress by default; the exporter has its own PriorityClass (a
``system-*`` class outside kube-system is what clusters that limit priority-class use refuse).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from inferslice.dashboards import alertmanager, boards, rules
from inferslice.topology import Topology

from . import network_policies, rbac
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
OVSDB_PROXY_DIR = "/run/inferslice-ovsdb"  # an emptyDir shared by the exporter and its OVSDB proxy
SA_TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # where the kubernetes client's in-cluster config looks
PRIORITY_CLASS = "inferslice-node-critical"
PRIORITY_VALUE = 1_000_000  # above workloads' default 0, below user classes' ceiling 1e9 and the system classes (2e9)
NONROOT_UID = 10001
DASHBOARD_LABEL = "grafana_dashboard"  # the Grafana sidecar's default label (kube-prometheus-stack)
PART_OF = {"app.kubernetes.io/part-of": "inferslice"}
SA_NAMESPACES = {Component.API: PLATFORM_NS, Component.CONTROLLER: PLATFORM_NS, Component.EXPORTER: NODE_NS}

# Capabilities the exporter adds: none. Each thing it does and why it needs no capability:
EXPORTER_CAPABILITIES: dict[str, str] = {}
EXPORTER_NEEDS: dict[str, str] = {
    "netlink RTM_GETSTATS / RTM_GETTCLASS dumps (link counters, HTB classes)": (
        "the kernel checks CAP_NET_ADMIN only for rtnetlink requests that change something, not for dumps (tested: uid 65534,"
        " no capability, in a namespace the test made); hostNetwork puts the socket in the host's namespace, where Kube-OVN's"
        " veths and OVS QoS classes are"
    ),
    "OVSDB (Interface statistics, QoS)": (
        "through the ovsdb-proxy sidecar's socket (mode 0666 in an emptyDir only this pod mounts), which forwards selects only;"
        " the proxy alone runs as uid 0, all capabilities dropped: OVSDB's socket is root's, owner permission, no CAP_DAC_OVERRIDE"
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
                "socket": f"{OVSDB_PROXY_DIR}/db.sock",
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


def uses_api_token(component: Component) -> bool:
    """Whether the component's code calls the apiserver (it then holds permissions in rbac.PERMISSIONS)."""
    return any(p.component == component for p in rbac.PERMISSIONS)


def service_accounts() -> list[dict[str, Any]]:
    out = []
    for component, ns in ((Component.API, PLATFORM_NS), (Component.CONTROLLER, PLATFORM_NS), (Component.EXPORTER, NODE_NS)):
        sa: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(service_account(component), ns, _app(component.value)),
        }
        # The exporter's token is projected into its pods-sync sidecar only; the API calls no Kubernetes API at all.
        sa["automountServiceAccountToken"] = component == Component.CONTROLLER
        out.append(sa)
    return out


def priority_class() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": _meta(PRIORITY_CLASS, None),
        "value": PRIORITY_VALUE,
        "globalDefault": False,
        "preemptionPolicy": "PreemptLowerPriority",  # a node's exporter must run on it even when the node is full
        "description": "InferSlice's per-node exporter: above workloads, below the system classes",
    }


def _token_volume() -> tuple[dict[str, Any], dict[str, Any]]:
    """What automountServiceAccountToken would mount, as a projected volume for one container."""
    volume = {
        "name": "kube-api-access",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            ]
        },
    }
    return volume, {"name": "kube-api-access", "mountPath": SA_TOKEN_DIR, "readOnly": True}


def _resources(cpu: str, memory: str, cpu_limit: str | None = None) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu_limit or cpu, "memory": memory}}


def _restricted(uid: int = NONROOT_UID) -> dict[str, Any]:
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
        "automountServiceAccountToken": uses_api_token(component),
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
    # The Prometheus URL comes from the container's env (PROMETHEUS_URL), which an overlay patches by name.
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
        "$(PROMETHEUS_URL)",
    ]


def api_deployment() -> dict[str, Any]:
    vol, mount = _volume_topology()
    container = {
        "name": "api",
        "image": IMAGE,
        "args": api_args(),
        "env": [{"name": "PROMETHEUS_URL", "value": PROMETHEUS_URL}],
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
    # hostNetwork: the pod's IP is the node's; listening there only, not on every host interface.
    pod_ip = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    exporter = {
        "name": "exporter",
        "image": IMAGE,
        "args": ["exporter", "--config", "/etc/inferslice/exporter/exporter.yaml", "--host", "$(POD_IP)", "--port", str(EXPORTER_PORT)],
        "env": [*pod_ip, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"}],
        "ports": [{"name": "metrics", "containerPort": EXPORTER_PORT}],
        # A TCP probe: an HTTP one would cost a full scrape each period.
        "readinessProbe": {"tcpSocket": {"port": "metrics"}, "periodSeconds": 10},
        "livenessProbe": {"tcpSocket": {"port": "metrics"}, "periodSeconds": 20},
        "resources": _resources("100m", "128Mi", "500m"),
        "securityContext": _restricted(),  # uid 10001, no capability: see EXPORTER_NEEDS
        "volumeMounts": [
            {"name": "topology", "mountPath": "/etc/inferslice/topology.yaml", "subPath": "topology.yaml", "readOnly": True},
            {"name": "exporter-config", "mountPath": "/etc/inferslice/exporter", "readOnly": True},
            {"name": "ovsdb", "mountPath": OVSDB_PROXY_DIR, "readOnly": True},  # connecting to a socket is not a write to the mount
            {"name": "pods", "mountPath": "/run/inferslice", "readOnly": True},
        ],
    }
    ovsdb_proxy = {
        "name": "ovsdb-proxy",
        "image": IMAGE,
        "args": ["deploy", "ovsdb-proxy", "--listen", f"{OVSDB_PROXY_DIR}/db.sock", "--upstream", f"{OVSDB_SOCKET_DIR}/db.sock"],
        "resources": _resources("20m", "64Mi", "200m"),
        # uid 0 for the owner permission on OVSDB's root-owned socket; no capability, so no CAP_DAC_OVERRIDE either.
        "securityContext": {**_restricted(0), "runAsNonRoot": False},
        "volumeMounts": [
            {"name": "ovs-run", "mountPath": OVSDB_SOCKET_DIR, "readOnly": True},
            {"name": "ovsdb", "mountPath": OVSDB_PROXY_DIR},
        ],
    }
    token_volume, token_mount = _token_volume()
    pods_sync = {
        "name": "pods-sync",
        "image": IMAGE,
        "args": ["deploy", "pods-sync", "--node", "$(NODE_NAME)", "--out", PODS_FILE, "--interval-s", "5"],
        "env": node_env,
        "resources": _resources("20m", "64Mi", "200m"),
        "securityContext": _restricted(),
        "volumeMounts": [{"name": "pods", "mountPath": "/run/inferslice"}, token_mount],  # the pod's only API token
    }
    volumes = [
        {"name": "topology", "configMap": {"name": "inferslice-topology"}},
        {"name": "exporter-config", "configMap": {"name": f"inferslice-exporter-{pop}"}},
        {"name": "ovs-run", "hostPath": {"path": OVSDB_SOCKET_DIR, "type": "Directory"}},
        {"name": "ovsdb", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
        {"name": "pods", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        token_volume,
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
        "automountServiceAccountToken": False,  # projected into pods-sync only
        "hostNetwork": True,
        "hostPID": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "affinity": affinity,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": PRIORITY_CLASS,
        "containers": [exporter, ovsdb_proxy, pods_sync],
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


def network_policy_objects(peers: network_policies.Peers | None = None) -> list[dict[str, Any]]:
    """Default-deny ingress in both namespaces, then the API, controller and exporter from their peers."""
    labels = (_app(Component.API.value), _app(Component.CONTROLLER.value), _app(Component.EXPORTER.value))
    return network_policies.policies(PLATFORM_NS, NODE_NS, *labels, peers)


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
                        # The sharding key (Prometheus Operator hashes __tmp_hash when a monitor sets it): with
                        # spec.shards, each shard scrapes whole PoPs (deploy.fleet); one shard: every PoP.
                        "relabelings": [
                            {"sourceLabels": [f"__meta_kubernetes_pod_label_{_label_name(POP_LABEL)}"], "targetLabel": "__tmp_hash"}
                        ],
                    }
                ],
            },
        }
    )
    return out


def _label_name(label: str) -> str:
    """A pod label as Prometheus's Kubernetes discovery names it (every character not [a-zA-Z0-9_] -> _)."""
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in label)


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
    objs += [priority_class(), *network_policy_objects()]
    for pop in topology.pops:
        objs.append(_configmap(f"inferslice-exporter-{pop.name}", NODE_NS, {"exporter.yaml": _dump(exporter_config(topology, pop.name))}))
        objs.append(exporter_daemonset(topology, pop.name))
    objs += [api_deployment(), controller_deployment(), *services(), *monitors(topology), prometheus_rule(topology)]
    objs += [*dashboard_configmaps(topology), alertmanager_secret(topology)]
    return objs
