"""GPU allocations per slice: quota, allocated fraction and effective share per replica.

Two ways to know the replicas: the testbed registry (its ReplicaEntry rows: tier, pop, gpu,
gpu_fraction, gpu_share, pid) or Kubernetes pods through an injected lister (Run:ai / KAI
annotations, ``pods.py``). The quota comes from the tiers file (``gpu_quota``).
``PidResolver`` answers which slice a GPU process belongs to, for NVML's per-process memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from inferslice import metric_names as mn
from inferslice.common.registry import ReplicaEntry, read_registry
from inferslice.topology import Topology

from .pods import PodAllocation, allocations_from_pods, parse_cgroup

PodLister = Callable[[], Sequence[dict[str, Any]]]
_MAX_ANCESTORS = 8  # vLLM's engine core is a child (or grandchild) of the replica's server process


def _read_text(path: str) -> str:
    return Path(path).read_text()


class RegistryReplicas:
    """Reads the registry on each call (a few small JSON files; replicas come and go)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self) -> tuple[ReplicaEntry, ...]:
        return read_registry(self.path).replicas


class PodAllocations:
    def __init__(self, lister: PodLister, queues: dict[str, str], nodes: dict[str, str], tiers: Sequence[str]) -> None:
        self._lister, self._queues, self._nodes, self._tiers = lister, queues, nodes, tuple(tiers)

    def __call__(self) -> list[PodAllocation]:
        return allocations_from_pods(self._lister(), self._queues, self._nodes, self._tiers)


class AllocationSource:
    """``gpu_allocation``: inferslice_gpu_allocated_fraction, _replica_gpu_share_ratio, _slice_gpu_quota."""

    def __init__(
        self,
        topology: Topology | None,
        replicas: Callable[[], Sequence[ReplicaEntry]] | None = None,
        pods: Callable[[], Sequence[PodAllocation]] | None = None,
        name: str = "gpu_allocation",
    ) -> None:
        self.name = name
        self._topology = topology
        self._replicas = replicas
        self._pods = pods

    def collect(self) -> Iterator[Metric]:
        quota = GaugeMetricFamily(mn.SLICE_GPU_QUOTA, "GPUs the slice may hold (tiers file gpu_quota)", labels=["slice"])
        alloc = GaugeMetricFamily(mn.GPU_ALLOCATED_FRACTION, "Fraction of a physical GPU allocated to the replica",
                                  labels=["slice", "pop", "replica", "gpu"])
        share = GaugeMetricFamily(mn.REPLICA_GPU_SHARE, "Effective GPU share relative to the allocation (1 = unimpeded)",
                                  labels=["slice", "pop", "replica"])
        if self._topology is not None:
            for tier in self._topology.tiers:
                quota.add_metric([tier.name], tier.gpu_quota)
        if self._replicas is not None:
            for r in self._replicas():
                if r.state == "stopping":
                    continue
                alloc.add_metric([r.tier, r.pop, r.id, str(r.gpu)], r.gpu_fraction)
                share.add_metric([r.tier, r.pop, r.id], r.gpu_share)
        if self._pods is not None:
            # Kubernetes says which fraction, not which physical GPU: gpu="" until NVML places it.
            for p in self._pods():
                if p.slice is not None:
                    alloc.add_metric([p.slice, p.pop or "", p.name, ""], p.fraction)
        return iter([quota, alloc, share])


class PidResolver:
    """pid -> slice: a registry replica's pid (or an ancestor of it), else the pod of its cgroup."""

    def __init__(
        self,
        replicas: Callable[[], Sequence[ReplicaEntry]] | None = None,
        pods: Callable[[], Sequence[PodAllocation]] | None = None,
        read_text: Callable[[str], str] = _read_text,
        proc: str = "/proc",
    ) -> None:
        self._replicas = replicas
        self._pods = pods
        self._read = read_text
        self._proc = proc

    def _parent(self, pid: int) -> int | None:
        try:
            stat = self._read(f"{self._proc}/{pid}/stat")
        except OSError:
            return None
        # comm may contain spaces and parentheses: the fields after the last ')' are fixed.
        fields = stat.rsplit(")", 1)[-1].split()
        return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None

    def __call__(self, pid: int) -> str | None:
        if self._replicas is not None:
            by_pid = {r.pid: r.tier for r in self._replicas() if r.pid is not None}
            current: int | None = pid
            for _ in range(_MAX_ANCESTORS):
                if current is None or current <= 1:
                    break
                if current in by_pid:
                    return by_pid[current]
                current = self._parent(current)
        if self._pods is not None:
            try:
                ref = parse_cgroup(self._read(f"{self._proc}/{pid}/cgroup"))
            except OSError:
                return None  # the process ended, or lives in another PID namespace
            if ref is not None:
                for p in self._pods():
                    if p.uid == ref.pod_uid:
                        return p.slice
        return None
