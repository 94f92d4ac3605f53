"""GPU exporter: per-GPU NVML readings and per-slice GPU allocation.

Sources:
- ``gpu_nvml`` (``nvml.py``): inferslice_gpu_utilization_ratio, _memory_used_bytes,
  _memory_total_bytes, _power_watts {pop,gpu}; inferslice_slice_gpu_memory_used_bytes {slice}
  from NVML's per-process memory, the process's slice found through the registry's replica pids
  or its ``/proc/<pid>/cgroup`` pod. Down (source_up 0) when there is no GPU or no NVML.
- ``gpu_allocation`` (``allocation.py``): inferslice_slice_gpu_quota {slice} from the tiers file,
  inferslice_gpu_allocated_fraction {slice,pop,replica,gpu} and
  inferslice_replica_gpu_share_ratio {slice,pop,replica} from the testbed registry or from pods'
  Run:ai / KAI annotations.

Config section (``collectors_from_config(section, topology, registry_path)``), every key optional::

    pop: bristol              # PoP of this node's GPUs (default: the topology's client gateway)
    nvml: true                # read NVML (default true)
    registry: true            # replicas from the testbed registry (default: true when a path is given)
    pods_file: pods.json      # `kubectl get pods -A -o json` output, re-read each scrape
    queues: {team-a: premium} # Run:ai project (runai/queue, kai.scheduler/queue) -> slice; default: same-named tier
    nodes: {node-a: bristol}  # spec.nodeName -> PoP
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from inferslice.errors import ConfigError, ParseError, SourceUnavailable
from inferslice.topology import Topology

from .allocation import AllocationSource, PidResolver, PodAllocations, RegistryReplicas
from .nvml import NvmlSource, load_pynvml
from .pods import CgroupRef, PodAllocation, allocations_from_pods, parse_cgroup

Source = NvmlSource | AllocationSource
_KEYS = {"pop", "nvml", "registry", "pods_file", "queues", "nodes"}


def pods_file_lister(path: str) -> Callable[[], list[dict[str, Any]]]:
    """A pod lister reading a ``kubectl get pods -o json`` file (SourceUnavailable while absent)."""

    def lister() -> list[dict[str, Any]]:
        try:
            doc = json.loads(Path(path).read_text())
        except OSError as err:
            raise SourceUnavailable(f"pods file {path}: {err.strerror or err}") from None
        except json.JSONDecodeError as err:
            raise ParseError(f"pods file {path}: {err}") from None
        items = doc.get("items") if isinstance(doc, dict) else doc
        if not isinstance(items, list):
            raise ParseError(f"pods file {path}: no items")
        return [p for p in items if isinstance(p, dict)]

    return lister


def _str_map(section: dict[str, Any], key: str) -> dict[str, str]:
    value = section.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError("must map names to names", f"gpu.{key}")
    return dict(value)


def collectors_from_config(
    section: dict[str, Any],
    topology: Topology | None,
    registry_path: str | None,
    nvml: ModuleType | Any | None = None,
    pod_lister: Callable[[], Sequence[dict[str, Any]]] | None = None,
) -> list[Source]:
    """The GPU exporter's sources. ``nvml`` / ``pod_lister`` are injectable (tests; a live API lister)."""
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise ConfigError("must be a mapping", "gpu")
    for key in section:
        if key not in _KEYS:
            raise ConfigError(f"unknown key (allowed: {', '.join(sorted(_KEYS))})", f"gpu.{key}")
    for key in ("nvml", "registry"):
        if key in section and not isinstance(section[key], bool):
            raise ConfigError("must be true or false", f"gpu.{key}")
    pop = section.get("pop", topology.client.gateway if topology is not None else None)
    if not isinstance(pop, str) or not pop:
        raise ConfigError("is required (a PoP name) when there is no topology", "gpu.pop")
    if topology is not None and pop not in {p.name for p in topology.pops}:
        raise ConfigError(f"{pop!r} is not a PoP of the topology", "gpu.pop")
    use_registry = section.get("registry", registry_path is not None)
    if use_registry and registry_path is None:
        raise ConfigError("registry: true needs a registry path", "gpu.registry")
    replicas = RegistryReplicas(registry_path) if use_registry and registry_path is not None else None
    queues, nodes = _str_map(section, "queues"), _str_map(section, "nodes")
    pods_file = section.get("pods_file")
    if pods_file is not None:
        if not isinstance(pods_file, str) or not pods_file:
            raise ConfigError("must be a path", "gpu.pods_file")
        pod_lister = pods_file_lister(pods_file)
    pods = None
    if pod_lister is not None:
        tiers = topology.tier_names if topology is not None else []
        pods = PodAllocations(pod_lister, queues, nodes, tiers)
    sources: list[Source] = [AllocationSource(topology, replicas, pods)]
    if section.get("nvml", True):
        module = nvml if nvml is not None else load_pynvml()
        sources.append(NvmlSource(module, pop, PidResolver(replicas, pods)))
    return sources


__all__ = [
    "AllocationSource",
    "CgroupRef",
    "NvmlSource",
    "PidResolver",
    "PodAllocation",
    "allocations_from_pods",
    "collectors_from_config",
    "parse_cgroup",
    "pods_file_lister",
]
