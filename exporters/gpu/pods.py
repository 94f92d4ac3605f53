"""Which pod (and slice) owns a GPU process, and what each pod was allocated: pure functions.

``parse_cgroup`` reads ``/proc/<pid>/cgroup`` text written by the kubelet's cgroupfs or systemd
driver (``.../kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope`` or
``/kubepods/burstable/pod<uid>/<id>``). ``allocations_from_pods`` reads Run:ai / KAI fractions:
annotation ``gpu-fraction`` (requested), scheduler-written ``runai-current-allocated-gpus`` (what
was actually bound, preferred), project label ``runai/queue`` or ``kai.scheduler/queue``; a whole-GPU
pod falls back to its ``nvidia.com/gpu`` limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inferslice.errors import ParseError

GPU_FRACTION = "gpu-fraction"
ALLOCATED_GPUS = "runai-current-allocated-gpus"
QUEUE_LABELS = ("runai/queue", "kai.scheduler/queue")
GPU_RESOURCE = "nvidia.com/gpu"

_POD_UID = re.compile(r"pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})")
_CONTAINER = re.compile(r"(?:^|[/-])([0-9a-f]{64})(?:\.scope)?$")


@dataclass(frozen=True)
class CgroupRef:
    pod_uid: str  # with dashes, as metadata.uid
    container_id: str | None


@dataclass(frozen=True)
class PodAllocation:
    uid: str
    name: str
    namespace: str
    slice: str | None  # None: the pod's project maps to no slice
    pop: str | None
    fraction: float  # GPUs allocated (0.5 = half a GPU)
    node: str | None


def parse_cgroup(text: str) -> CgroupRef | None:
    """``/proc/<pid>/cgroup`` text -> the pod UID and container ID, or None outside Kubernetes."""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        path = parts[2]
        if "kubepods" not in path:
            continue
        m = _POD_UID.search(path)
        if m is None:
            continue
        uid = m.group(1).replace("_", "-").lower()
        last = path.rstrip("/").rsplit("/", 1)[-1]
        c = _CONTAINER.search(last)
        return CgroupRef(uid, c.group(1) if c else None)
    return None


def _float(value: Any, where: str) -> float:
    try:
        result = float(str(value))
    except ValueError:
        raise ParseError(f"{where}: {value!r} is not a number") from None
    if not result >= 0 or result == float("inf"):
        raise ParseError(f"{where}: {value!r} is not a non-negative number")
    return result


def allocations_from_pods(
    pods: Sequence[Mapping[str, Any]],
    queues: Mapping[str, str] | None = None,
    nodes: Mapping[str, str] | None = None,
    tiers: Sequence[str] = (),
) -> list[PodAllocation]:
    """Pods that hold GPUs -> allocations. The slice is the project (queue) through ``queues``,
    else the project itself when it names a tier; the PoP is the node's through ``nodes``."""
    queues = queues or {}
    nodes = nodes or {}
    out: list[PodAllocation] = []
    for pod in pods:
        meta = pod.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            continue
        name, ns, uid = meta["name"], str(meta.get("namespace", "default")), str(meta.get("uid", ""))
        ann = meta.get("annotations") or {}
        labels = meta.get("labels") or {}
        if not isinstance(ann, dict) or not isinstance(labels, dict):
            raise ParseError(f"pod {ns}/{name}: annotations and labels must be mappings")
        spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        where = f"pod {ns}/{name}"
        if ALLOCATED_GPUS in ann:
            fraction = _float(ann[ALLOCATED_GPUS], f"{where} {ALLOCATED_GPUS}")
        elif GPU_FRACTION in ann:
            fraction = _float(ann[GPU_FRACTION], f"{where} {GPU_FRACTION}")
        else:
            fraction = _whole_gpus(spec, where)
        if fraction <= 0:
            continue
        project = next((str(labels[k]) for k in QUEUE_LABELS if k in labels), None)
        slice_ = queues.get(project) if project is not None else None
        if slice_ is None and project in tiers:
            slice_ = project
        node = spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None
        out.append(PodAllocation(uid, name, ns, slice_, nodes.get(node) if node else None, fraction, node))
    return out


def _whole_gpus(spec: Mapping[str, Any], where: str) -> float:
    total = 0.0
    containers = spec.get("containers")
    if not isinstance(containers, list):
        return 0.0
    for c in containers:
        resources = c.get("resources") if isinstance(c, dict) else None
        limits = resources.get("limits") if isinstance(resources, dict) else None
        if isinstance(limits, dict) and GPU_RESOURCE in limits:
            total += _float(limits[GPU_RESOURCE], f"{where} limits {GPU_RESOURCE}")
    return total
