"""The production overlay's sharded form: telemetry sharded by PoP, one query layer, the diagnosis loop
sharded by PoP group with one Lease per group (docs/scale.md says why each piece is what it is).

- ``Prometheus`` (Prometheus Operator) ``inferslice`` with ``spec.shards: N``. The operator hashes
  ``__tmp_hash`` when a monitor's relabelling sets it (its CRD documents this as the way to choose
  the sharding key); the exporter's PodMonitor sets it from the pod's ``inferslice.io/pop`` label
  (``platform.monitors``), so each shard scrapes whole PoPs and evaluates the snapshot rules for them.
  Each shard remote-writes only recorded series (the snapshot terms, the per-slice dashboard
  recordings) to VictoriaMetrics.
- ``inferslice-vm``: single-node VictoriaMetrics (StatefulSet + Service), the one PromQL endpoint the
  diagnosis rounds read (``-search.latencyOffset=1s``: with its 30 s default an instant query at
  "now" would answer with data 30 s old).
- ``inferslice-api`` becomes a StatefulSet of N replicas (the Deployment is deleted by a patch):
  ``--shard-groups N`` with its pod name as ``--shard-identity``; replica r starts on group r and
  takes a dead replica's group through its Lease (``inferslice-diagnosis-<k>``, Role
  ``inferslice-api-shards``); each keeps its own SQLite on its own volume; a slice held by another
  replica answers 307 to that replica through the headless Service ``inferslice-api-pods``.
"""

from __future__ import annotations

import copy
from typing import Any

from . import platform, rbac
from .rbac import Component

SHARDS = 4  # OPERATOR: Prometheus shards and diagnosis groups (10,000 slices: docs/scale.md)
MONITORING_NS = "monitoring"  # where Prometheus Operator's Prometheus objects live (kube-prometheus-stack)
VM_NAME = "inferslice-vm"
VM_PORT = 8428
VM_IMAGE = "victoriametrics/victoria-metrics:v1.79.5"  # OPERATOR: the Debian package's release, from your registry
VM_URL = f"http://{VM_NAME}.{MONITORING_NS}.svc:{VM_PORT}"
PODS_SERVICE = "inferslice-api-pods"
# Recorded series only: the snapshot terms the rounds read and the per-slice recordings the dashboards
# read; the raw series stay in their shard.
REMOTE_WRITE_KEEP = "slice_pop:inferslice_snapshot:.+|slice:.+|slice_pop_link:.+"


def api_statefulset(shards: int = SHARDS) -> dict[str, Any]:
    base = platform.api_deployment()
    template = copy.deepcopy(base["spec"]["template"])
    container = template["spec"]["containers"][0]
    # --prometheus-url reads $(PROMETHEUS_URL): the query layer over the shards (the overlay's patch sets it by name).
    env = [e for e in container.get("env", []) if e["name"] != "PROMETHEUS_URL"]
    container["env"] = [{"name": "PROMETHEUS_URL", "value": VM_URL}, *env]
    container["args"] = [
        *container["args"],
        "--recorded",
        "--shard-groups",
        str(shards),
        "--shard-identity",
        "$(POD_NAME)",
        "--lease-namespace",
        platform.PLATFORM_NS,
        "--shard-peer-url",
        f"http://{{identity}}.{PODS_SERVICE}.{platform.PLATFORM_NS}.svc:{platform.API_PORT}",
    ]
    container["env"] = [*container["env"], {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    # The groups' Leases are Kubernetes API calls: this pod holds a token (the unsharded API holds none).
    template["spec"]["automountServiceAccountToken"] = True
    # Each replica its own history: a volume per pod instead of the Deployment's emptyDir.
    template["spec"]["volumes"] = [v for v in template["spec"]["volumes"] if v["name"] != "state"]
    labels = base["spec"]["selector"]["matchLabels"]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": copy.deepcopy(base["metadata"]),
        "spec": {
            "serviceName": PODS_SERVICE,
            "replicas": shards,
            "podManagementPolicy": "Parallel",  # the groups' Leases sort out who runs what; no ordering needed
            "selector": {"matchLabels": labels},
            "template": template,
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "state"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}},  # OPERATOR: storageClassName
                }
            ],
        },
    }


def api_pods_service() -> dict[str, Any]:
    labels = platform.api_deployment()["spec"]["selector"]["matchLabels"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": PODS_SERVICE, "namespace": platform.PLATFORM_NS, "labels": dict(labels)},
        # Headless: one DNS name per replica, what a 307 for another replica's slice points at.
        "spec": {
            "clusterIP": "None",
            "selector": dict(labels),
            "ports": [{"name": "http", "port": platform.API_PORT, "targetPort": "http"}],
        },
    }


def prometheus(shards: int = SHARDS) -> dict[str, Any]:
    selector = {"matchLabels": dict(platform.PART_OF)}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": "inferslice", "namespace": MONITORING_NS, "labels": dict(platform.PART_OF)},
        "spec": {
            "shards": shards,
            "replicas": 1,  # OPERATOR: 2 for HA; VictoriaMetrics then needs -dedup.minScrapeInterval and the replica label dropped
            "serviceAccountName": "prometheus",  # OPERATOR: the ServiceAccount your Prometheus objects use
            "podMonitorSelector": selector,
            "serviceMonitorSelector": selector,
            "ruleSelector": selector,
            "podMonitorNamespaceSelector": {},
            "serviceMonitorNamespaceSelector": {},
            "ruleNamespaceSelector": {},
            "remoteWrite": [
                {
                    "url": f"{VM_URL}/api/v1/write",
                    "writeRelabelConfigs": [{"sourceLabels": ["__name__"], "regex": REMOTE_WRITE_KEEP, "action": "keep"}],
                    "queueConfig": {"batchSendDeadline": "1s"},  # a round reads what the rules recorded a second ago
                }
            ],
            "resources": {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "8Gi"}},  # ~375k series a shard
        },
    }


def victoria_metrics() -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": VM_NAME, **platform.PART_OF}
    container = {
        "name": "victoria-metrics",
        "image": VM_IMAGE,
        "args": ["-storageDataPath=/storage", "-retentionPeriod=15d", f"-httpListenAddr=:{VM_PORT}", "-search.latencyOffset=1s"],
        "ports": [{"name": "http", "containerPort": VM_PORT}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 3},
        "livenessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10, "timeoutSeconds": 2, "failureThreshold": 6},
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "storage", "mountPath": "/storage"}, {"name": "tmp", "mountPath": "/tmp"}],
    }
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": VM_NAME, "namespace": MONITORING_NS, "labels": labels},
        "spec": {
            "serviceName": VM_NAME,
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": VM_NAME}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,  # it calls no Kubernetes API
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 65534},
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}],
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "storage"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Gi"}}},
                }
            ],
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": VM_NAME, "namespace": MONITORING_NS, "labels": labels},
        "spec": {"selector": {"app.kubernetes.io/name": VM_NAME}, "ports": [{"name": "http", "port": VM_PORT, "targetPort": "http"}]},
    }
    return [statefulset, service]


def fleet_objects(shards: int = SHARDS) -> list[dict[str, Any]]:
    """What the production overlay adds (the API's Deployment is deleted by ``delete_api_deployment``)."""
    return [
        api_statefulset(shards),
        api_pods_service(),
        *rbac.shard_role(platform.PLATFORM_NS, platform.SA_NAMESPACES[Component.API]),
        prometheus(shards),
        *victoria_metrics(),
    ]


def uses_leases(pod: dict[str, Any]) -> bool:
    """Whether a pod runs the sharded diagnosis loop (its API container has ``--shard-groups``): it calls
    the Lease API (``rbac.SHARD_PERMISSIONS``), so it needs its ServiceAccount token."""
    return any("--shard-groups" in c.get("args", []) for c in pod.get("containers", []))


def delete_api_deployment() -> dict[str, Any]:
    """A strategic-merge patch removing the base's API Deployment (the StatefulSet replaces it)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "inferslice-api", "namespace": platform.PLATFORM_NS},
        "$patch": "delete",
    }
