"""GPU exporter with a FAKE pynvml (there is no GPU on this machine) and without NVML at all."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from inferslice import metric_names as mn
from inferslice.common.registry import Registry, ReplicaEntry, write_registry, write_replicas_fragment
from inferslice.exporters.gpu import collectors_from_config, pods_file_lister
from inferslice.exporters.gpu.allocation import PidResolver, PodAllocations
from inferslice.exporters.gpu.nvml import NvmlSource, load_pynvml
from inferslice.topology import load_topology

from .conftest import registry_with

TOPO = load_topology()
PODS = Path(__file__).parent / "fixtures" / "pods-kube-ovn-runai.json"
GiB = 1024**3


class FakeNVMLError(Exception):
    pass


class FakeNotSupported(FakeNVMLError):
    pass


@dataclass
class FakeProcess:  # pynvml's c_nvmlProcessInfo_t: .pid, .usedGpuMemory (bytes)
    pid: int
    usedGpuMemory: int | None


class FakePynvml:
    """The pynvml functions NvmlSource calls, with pynvml's names and return shapes."""

    NVMLError = FakeNVMLError
    NVMLError_NotSupported = FakeNotSupported

    def __init__(self, gpus: list[dict[str, Any]], fail_init: bool = False) -> None:
        self.gpus, self.fail_init, self.inits = gpus, fail_init, 0

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise FakeNVMLError("Driver Not Loaded")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> dict[str, Any]:
        return self.gpus[i]

    def nvmlDeviceGetUtilizationRates(self, h: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(gpu=h["util"], memory=0)

    def nvmlDeviceGetMemoryInfo(self, h: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(used=h["used"], total=h["total"], free=h["total"] - h["used"])

    def nvmlDeviceGetPowerUsage(self, h: dict[str, Any]) -> int:
        if h.get("power_mw") is None:
            raise FakeNotSupported("Not Supported")
        return int(h["power_mw"])

    def nvmlDeviceGetComputeRunningProcesses(self, h: dict[str, Any]) -> list[FakeProcess]:
        return [FakeProcess(pid, mem) for pid, mem in h["procs"]]

    def nvmlDeviceGetUUID(self, h: dict[str, Any]) -> str:
        return f"GPU-{h['util']:08d}"

    def nvmlDeviceGetName(self, h: dict[str, Any]) -> str:
        return "NVIDIA L40S"


GPUS: list[dict[str, Any]] = [
    {"util": 87, "used": 30 * GiB, "total": 48 * GiB, "power_mw": 251_500, "procs": [(4242, 20 * GiB), (5151, 10 * GiB)]},
    {"util": 0, "used": 1 * GiB, "total": 48 * GiB, "power_mw": None, "procs": [(6000, None)]},
]


def write_testbed_registry(tmp_path: Path) -> str:
    path = tmp_path / "registry.json"
    write_registry(Registry(str(tmp_path / "topology.yaml"), str(tmp_path)), path)
    write_replicas_fragment(tmp_path, "premium", [
        ReplicaEntry("premium-0", "premium", "bristol", 1, 0.5, 0.8, "http://10.203.0.11:8000", pid=4000),
        ReplicaEntry("premium-1", "premium", "bristol", 1, 0.5, 1.0, "http://10.203.0.12:8000", pid=5151),
    ])
    return str(path)


def fake_proc(tree: dict[int, int]) -> Any:
    def read(path: str) -> str:
        parts = path.split("/")
        pid = int(parts[2])
        if parts[3] == "stat" and pid in tree:
            return f"{pid} (python3 (vllm)) S {tree[pid]} 1 1 0"
        raise FileNotFoundError(path)
    return read


def test_fake_nvml_readings_and_slice_memory_via_registry_pids(tmp_path: Path) -> None:
    reg_path = write_testbed_registry(tmp_path)
    sources = collectors_from_config({"pop": "bristol"}, TOPO, reg_path, nvml=FakePynvml(GPUS))
    nvml_source = sources[1]
    assert isinstance(nvml_source, NvmlSource)
    # 4242 is the engine-core child of replica premium-0 (pid 4000): found through /proc/<pid>/stat.
    nvml_source._slice_of_pid = PidResolver(lambda: sources[0]._replicas(), read_text=fake_proc({4242: 4000}))  # type: ignore[union-attr,misc]
    reg, _ = registry_with(*sources)
    g0 = {"pop": "bristol", "gpu": "0"}
    assert reg.get_sample_value(mn.GPU_UTILIZATION, g0) == pytest.approx(0.87)
    assert reg.get_sample_value(mn.GPU_MEMORY_USED, g0) == 30 * GiB
    assert reg.get_sample_value(mn.GPU_MEMORY_TOTAL, {"pop": "bristol", "gpu": "1"}) == 48 * GiB
    assert reg.get_sample_value(mn.GPU_POWER, g0) == pytest.approx(251.5)
    assert reg.get_sample_value(mn.GPU_POWER, {"pop": "bristol", "gpu": "1"}) is None  # no sensor on that board
    assert reg.get_sample_value(mn.SLICE_GPU_MEMORY_USED, {"slice": "premium"}) == 30 * GiB
    assert reg.get_sample_value(mn.SLICE_GPU_QUOTA, {"slice": "premium"}) == 3.0
    alloc = {"slice": "premium", "pop": "bristol", "replica": "premium-0", "gpu": "1"}
    assert reg.get_sample_value(mn.GPU_ALLOCATED_FRACTION, alloc) == 0.5
    assert reg.get_sample_value(mn.REPLICA_GPU_SHARE, {"slice": "premium", "pop": "bristol", "replica": "premium-0"}) == 0.8
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "gpu_nvml"}) == 1.0


def test_no_gpu_or_no_nvml_reports_down_and_the_rest_serves(tmp_path: Path) -> None:
    reg_path = write_testbed_registry(tmp_path)
    broken = FakePynvml(GPUS, fail_init=True)
    reg, guarded = registry_with(*collectors_from_config({"pop": "bristol"}, TOPO, reg_path, nvml=broken))
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "gpu_nvml"}) == 0.0
    assert "Driver Not Loaded" in guarded.last_errors["gpu_nvml"]
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "gpu_allocation"}) == 1.0
    broken.fail_init = False  # the driver came back: the next scrape re-initialises
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "gpu_nvml"}) == 1.0
    # The real pynvml on this GPU-less machine, and no pynvml at all.
    reg2, _ = registry_with(NvmlSource(load_pynvml(), "bristol"), NvmlSource(None, "bristol", name="none"))
    assert reg2.get_sample_value(mn.SOURCE_UP, {"source": "gpu_nvml"}) == 0.0
    assert reg2.get_sample_value(mn.SOURCE_UP, {"source": "none"}) == 0.0


def test_pods_give_slice_fraction_and_process_ownership() -> None:
    lister = pods_file_lister(str(PODS))
    pods = PodAllocations(lister, {"team-premium": "premium"}, {"gpu-node-bristol-1": "bristol"}, TOPO.tier_names)
    allocs = {a.name: a for a in pods()}
    assert (allocs["vllm-premium-0"].slice, allocs["vllm-premium-0"].fraction, allocs["vllm-premium-0"].pop) == ("premium", 0.5, "bristol")
    assert allocs["vllm-free-0"].slice == "free"  # KAI queue named like the tier
    cgroup = ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1f2e3d4c_5b6a_7980_a1b2_c3d4e5f60718.slice/"
              "cri-containerd-" + "ab" * 32 + ".scope\n")
    resolver = PidResolver(pods=pods, read_text=lambda p: cgroup if p.endswith("/cgroup") else "")
    assert resolver(777) == "premium"
    sources = collectors_from_config({"pop": "bristol", "pods_file": str(PODS), "queues": {"team-premium": "premium"},
                                      "nodes": {"gpu-node-bristol-1": "bristol"}}, TOPO, None, nvml=FakePynvml(GPUS))
    reg, _ = registry_with(*sources)
    labels = {"slice": "premium", "pop": "bristol", "replica": "vllm-premium-0", "gpu": ""}
    assert reg.get_sample_value(mn.GPU_ALLOCATED_FRACTION, labels) == 0.5


def test_bad_gpu_config_names_the_field() -> None:
    from inferslice.errors import ConfigError

    bad: list[tuple[dict[str, Any], str]] = [({"pop": "paris"}, "gpu.pop"), ({"nvml": "yes"}, "gpu.nvml"),
                                             ({"queues": [1]}, "gpu.queues"), ({"x": 1}, "gpu.x")]
    for section, field in bad:
        with pytest.raises(ConfigError) as info:
            collectors_from_config(section, TOPO, None)
        assert info.value.field == field
    assert json.loads(PODS.read_text())["kind"] == "List"
