"""Per-tier objects, generated from the tiers file: namespace, Kube-OVN Subnet, RayService (vLLM on
Ray Serve), PodMonitor for the tier's Ray metrics, the ``InferSliceTier`` CR.

Placement follows the tiers file: one KubeRay worker group per PoP the tier may use, pinned to that
PoP's nodes by node affinity on ``inferslice.io/pop``, its maxReplicas the tier's slots at that PoP.
Each worker pod is one Serve replica holding ``gpu_per_replica`` of a GPU through Run:ai
(``gpu-fraction`` annotation, ``runai-scheduler``, the tier's queue label). The head pod runs the
tier's Serve proxy (``proxy_location: HeadOnly``) at the client's gateway PoP; its Kube-OVN
``ingress_rate``/``egress_rate`` annotations are the tier's client-edge caps.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from typing import Any

from inferslice.topology import Tier, Topology, parse_slot

from . import custom_resources, serve_config
from .rbac import tier_namespace

POP_LABEL = "inferslice.io/pop"
TIER_LABEL = "inferslice.io/tier"
GPU_FRACTION = "gpu-fraction"
RUNAI_QUEUE = "runai/queue"
RUNAI_SCHEDULER = "runai-scheduler"
LOGICAL_SWITCH = "ovn.kubernetes.io/logical_switch"
INGRESS_RATE = "ovn.kubernetes.io/ingress_rate"
EGRESS_RATE = "ovn.kubernetes.io/egress_rate"
RAY_IMAGE = "rayproject/ray-llm:2.60.0-py311-cu128"
RAY_METRICS_PORT = 8080
WORKER_MEMORY = "24Gi"  # an 8B model's host-side buffers and the streamer's staging
HEAD_MEMORY = "8Gi"


def subnet_name(topology: Topology, tier: Tier) -> str:
    return tier_namespace(topology, tier.name)


def queue_name(tier: Tier) -> str:
    """The Run:ai project (KAI queue) of a tier; its quota is the tier's gpu_quota."""
    return f"inferslice-{tier.name}"


def rate_mbps(cap_bps: float) -> str:
    """Kube-OVN's rate annotations: whole Mbit/s as a string, at least 1 (0 would mean unlimited)."""
    return str(max(1, round(cap_bps / 1e6)))


def pop_slots(tier: Tier) -> dict[str, int]:
    """PoP -> replica slots of the tier there, in the placement order of the tiers file."""
    counts: Counter[str] = Counter(parse_slot(s)[0] for s in tier.placement[: tier.replicas_max])
    return dict(counts)


def initial_per_pop(tier: Tier, replicas: int) -> dict[str, int]:
    """PoP -> replicas when the first ``replicas`` slots of the placement are filled."""
    counts: Counter[str] = Counter(parse_slot(s)[0] for s in tier.placement[:replicas])
    return {pop: counts.get(pop, 0) for pop in pop_slots(tier)}


def worker_group_name(pop: str) -> str:
    return f"gpu-{pop}"


def _pop_affinity(pop: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": POP_LABEL, "operator": "In", "values": [pop]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _container_security() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True, "runAsUser": 1000}


def _head(topology: Topology, tier: Tier) -> dict[str, Any]:
    annotations = {LOGICAL_SWITCH: subnet_name(topology, tier)}
    if tier.client_cap_bps is not None:
        annotations[INGRESS_RATE] = annotations[EGRESS_RATE] = rate_mbps(tier.client_cap_bps)
    return {
        "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0", "metrics-export-port": str(RAY_METRICS_PORT)},
        "template": {
            "metadata": {"labels": {TIER_LABEL: tier.name}, "annotations": annotations},
            "spec": {
                "affinity": _pop_affinity(topology.client.gateway),
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [
                    {
                        "name": "ray-head",
                        "image": RAY_IMAGE,
                        "ports": [
                            {"name": "gcs", "containerPort": 6379},
                            {"name": "dashboard", "containerPort": 8265},
                            {"name": "serve", "containerPort": serve_config.SERVE_PORT},
                            {"name": "metrics", "containerPort": RAY_METRICS_PORT},
                        ],
                        "resources": {"requests": {"cpu": "2", "memory": HEAD_MEMORY}, "limits": {"cpu": "2", "memory": HEAD_MEMORY}},
                        "securityContext": _container_security(),
                    }
                ],
            },
        },
    }


def _worker(topology: Topology, tier: Tier, pop: str, slots: int, initial: int) -> dict[str, Any]:
    cpu = f"{max(1.0, tier.cpu_quota / tier.replicas_max):g}"
    return {
        "groupName": worker_group_name(pop),
        "replicas": initial,
        "minReplicas": min(initial, tier.replicas_min),
        "maxReplicas": slots,
        "rayStartParams": {"num-gpus": "1", "metrics-export-port": str(RAY_METRICS_PORT)},
        "template": {
            "metadata": {
                "labels": {TIER_LABEL: tier.name, POP_LABEL: pop, RUNAI_QUEUE: queue_name(tier)},
                "annotations": {GPU_FRACTION: f"{tier.gpu_per_replica:g}", LOGICAL_SWITCH: subnet_name(topology, tier)},
            },
            "spec": {
                "schedulerName": RUNAI_SCHEDULER,
                "affinity": _pop_affinity(pop),
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": RAY_IMAGE,
                        "ports": [{"name": "metrics", "containerPort": RAY_METRICS_PORT}],
                        "resources": {
                            "requests": {"cpu": cpu, "memory": WORKER_MEMORY},
                            "limits": {"cpu": cpu, "memory": WORKER_MEMORY},
                        },
                        "securityContext": _container_security(),
                    }
                ],
            },
        },
    }


def ray_service(topology: Topology, tier: Tier) -> dict[str, Any]:
    initial = initial_per_pop(tier, max(tier.replicas_min, 1))
    groups = [_worker(topology, tier, pop, slots, initial[pop]) for pop, slots in pop_slots(tier).items()]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": tier.name, "namespace": tier_namespace(topology, tier.name), "labels": {TIER_LABEL: tier.name}},
        "spec": {
            "serveConfigV2": serve_config.dump(serve_config.serve_config(topology, tier)),
            "rayClusterConfig": {
                # Ray's autoscaler adds worker pods for Serve's replicas within the groups' bounds.
                "enableInTreeAutoscaling": True,
                "headGroupSpec": _head(topology, tier),
                "workerGroupSpecs": groups,
            },
        },
    }


def subnet(topology: Topology, tier: Tier) -> dict[str, Any]:
    net = ipaddress.IPv4Network(tier.subnet)
    gateway = str(net.network_address + 1)
    return {
        "apiVersion": "kubeovn.io/v1",
        "kind": "Subnet",
        "metadata": {"name": subnet_name(topology, tier), "labels": {TIER_LABEL: tier.name}},
        "spec": {
            "protocol": "IPv4",
            "cidrBlock": str(net),
            "gateway": gateway,
            "excludeIps": [gateway],
            "namespaces": [tier_namespace(topology, tier.name)],
            # Tiers are isolated from each other; only the platform namespace reaches in.
            "private": True,
            "allowSubnets": [],
            "natOutgoing": False,
        },
    }


def namespace(topology: Topology, tier: Tier) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": tier_namespace(topology, tier.name),
            "labels": {TIER_LABEL: tier.name, "pod-security.kubernetes.io/enforce": "restricted"},
            "annotations": {LOGICAL_SWITCH: subnet_name(topology, tier)},
        },
    }


def pod_monitor(topology: Topology, tier: Tier) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": f"{tier.name}-ray", "namespace": tier_namespace(topology, tier.name), "labels": {TIER_LABEL: tier.name}},
        "spec": {
            "selector": {"matchLabels": {TIER_LABEL: tier.name}},
            "podMetricsEndpoints": [
                {
                    "port": "metrics",
                    "path": "/metrics",
                    "interval": f"{topology.timing.scrape_interval_s:g}s",
                    # The slice label the rules and dashboards group by.
                    "relabelings": [{"targetLabel": "slice", "replacement": tier.name, "action": "replace"}],
                }
            ],
        },
    }


def tier_objects(topology: Topology, tier: Tier, platform_ns: str) -> list[dict[str, Any]]:
    return [
        namespace(topology, tier),
        subnet(topology, tier),
        ray_service(topology, tier),
        pod_monitor(topology, tier),
        custom_resources.tier_to_cr(tier, platform_ns),
    ]
