"""Per-GPU readings through NVML (nvidia-ml-py, ``import pynvml``), and GPU memory per slice.

The ``pynvml`` module is passed into the source so tests can hand it a fake: this machine has no
GPU, so the real module's ``nvmlInit`` fails here with ``NVMLError`` (library not found) and the
source reports itself down, which is exactly the "no NVML" path. ``python -m inferslice.bench.nvml_probe`` runs the
real path on a machine that has one.

NVML units: utilisation in percent (exported as a 0-1 ratio), memory in bytes, power in mW
(exported in watts), energy in mJ since the driver loaded (exported in joules). A process's
``usedGpuMemory`` may be None (not permitted / MIG): skipped.

Energy per slice (``inferslice_gpu_energy_joules_total{slice}``, the paper's open question on
energy per tier): each scrape, a GPU's energy increase since the previous scrape is split over the
slices whose processes run on it, in proportion to their SM utilisation samples
(``nvmlDeviceGetProcessUtilization``) when the board reports them, else to their GPU memory (with
fractional shares each replica's memory is its allocation, so that split is by share). A process
no slice owns takes its part as ``unattributed`` (a tier is not billed for a neighbour), and so does
the energy of a GPU without processes. NVML reports host PIDs: the exporter must see the host's
PID namespace (``hostPID``) for the mapping to find them. The first scrape only sets the baseline; a
counter that went backwards (driver reload) re-baselines.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from inferslice import metric_names as mn
from inferslice.errors import SourceUnavailable

SliceOfPid = Callable[[int], str | None]
UNATTRIBUTED = "unattributed"  # the energy label of a GPU's draw no slice's process accounts for


VENDORED = "third_party/pynvml.py"  # vLLM ships nvidia-ml-py's pynvml.py here (``vllm.third_party.pynvml``)


def _vendored_pynvml() -> ModuleType | None:
    """vLLM's copy of nvidia-ml-py, loaded by its path: importing ``vllm`` itself would pull in torch."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / VENDORED
        if not path.is_file():
            continue
        file_spec = importlib.util.spec_from_file_location("_inferslice_vllm_pynvml", path)
        if file_spec is None or file_spec.loader is None:
            continue
        module = importlib.util.module_from_spec(file_spec)
        sys.modules[file_spec.name] = module  # pynvml looks itself up there (its error classes are made at import)
        try:
            file_spec.loader.exec_module(module)
        except (ImportError, OSError, SyntaxError):  # a broken copy is no NVML: the source reports itself down
            sys.modules.pop(file_spec.name, None)
            return None
        return module
    return None


def load_pynvml() -> ModuleType | None:
    """nvidia-ml-py's ``pynvml``, else vLLM's vendored copy (a CUDA vLLM install has it), else None."""
    try:
        import pynvml
    except ImportError:
        return _vendored_pynvml()
    module: ModuleType = pynvml
    return module


def _optional(read: Callable[[Any], Any], handle: Any, errors: tuple[type[BaseException], ...]) -> Any:
    try:
        return read(handle)
    except errors:
        return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class NvmlSource:
    """``gpu_nvml``: utilisation, memory, power per GPU; used GPU memory per slice via its processes."""

    def __init__(self, nvml: ModuleType | Any | None, pop: str, slice_of_pid: SliceOfPid | None = None, name: str = "gpu_nvml") -> None:
        self.name = name
        self._nvml = nvml
        self._pop = pop
        self._slice_of_pid = slice_of_pid or (lambda _pid: None)
        self._lock = threading.Lock()
        self._initialised = False
        self._energy_mj: dict[int, float] = {}  # GPU index -> NVML energy counter at the last scrape
        self._energy_j: dict[str, float] = {}  # slice -> joules attributed so far
        self._util_ts: dict[int, int] = {}  # GPU index -> timestamp of the newest process sample seen

    def _error_types(self) -> tuple[type[BaseException], ...]:
        err = getattr(self._nvml, "NVMLError", None)
        return (err,) if isinstance(err, type) and issubclass(err, BaseException) else ()

    def close(self) -> None:
        with self._lock:
            if self._initialised and self._nvml is not None:
                try:
                    self._nvml.nvmlShutdown()
                except self._error_types():
                    pass
            self._initialised = False

    def collect(self) -> Iterator[Metric]:
        if self._nvml is None:
            raise SourceUnavailable("nvidia-ml-py (pynvml) is not installed")
        with self._lock:
            try:
                return iter(self._read())
            except self._error_types() as err:
                # Re-initialise next time: the driver may have been reloaded or the GPU reset.
                self._initialised = False
                raise SourceUnavailable(f"NVML: {err}") from None

    def _read(self) -> list[Metric]:
        nv = self._nvml
        assert nv is not None
        if not self._initialised:
            nv.nvmlInit()
            self._initialised = True
        labels = ["pop", "gpu"]
        util = GaugeMetricFamily(mn.GPU_UTILIZATION, "GPU busy ratio over NVML's last sample period (0-1)", labels=labels)
        used = GaugeMetricFamily(mn.GPU_MEMORY_USED, "GPU memory used in bytes", labels=labels)
        total = GaugeMetricFamily(mn.GPU_MEMORY_TOTAL, "GPU memory in bytes", labels=labels)
        power = GaugeMetricFamily(mn.GPU_POWER, "GPU power draw in watts", labels=labels)
        per_slice: dict[str, float] = {}
        energy = CounterMetricFamily(mn.GPU_ENERGY.removesuffix("_total"), "GPU energy attributed to the slice in joules (NVML)",
                                     labels=["slice"])
        for i in range(int(nv.nvmlDeviceGetCount())):
            handle = nv.nvmlDeviceGetHandleByIndex(i)
            gpu = [self._pop, str(i)]
            util.add_metric(gpu, float(nv.nvmlDeviceGetUtilizationRates(handle).gpu) / 100.0)
            mem = nv.nvmlDeviceGetMemoryInfo(handle)
            used.add_metric(gpu, float(mem.used))
            total.add_metric(gpu, float(mem.total))
            try:
                power.add_metric(gpu, float(nv.nvmlDeviceGetPowerUsage(handle)) / 1000.0)
            except nv.NVMLError_NotSupported:  # some boards expose no power sensor
                pass
            mem_by_slice: dict[str, float] = {}
            for proc in nv.nvmlDeviceGetComputeRunningProcesses(handle):
                mem_bytes = getattr(proc, "usedGpuMemory", None)
                if mem_bytes is None:
                    continue
                slice_ = self._slice_of_pid(int(proc.pid))
                if slice_ is not None:
                    per_slice[slice_] = per_slice.get(slice_, 0.0) + float(mem_bytes)
                # A process no slice owns still draws power: its weight stays unattributed.
                key = slice_ if slice_ is not None else UNATTRIBUTED
                mem_by_slice[key] = mem_by_slice.get(key, 0.0) + float(mem_bytes)
            self._attribute_energy(i, handle, mem_by_slice)
        slice_mem = GaugeMetricFamily(mn.SLICE_GPU_MEMORY_USED, "GPU memory used by the slice's processes in bytes", labels=["slice"])
        for s, v in sorted(per_slice.items()):
            slice_mem.add_metric([s], v)
        for s, j in sorted(self._energy_j.items()):
            energy.add_metric([s], j)
        return [util, used, total, power, slice_mem, energy]

    def _sm_by_slice(self, i: int, handle: Any) -> dict[str, float]:
        """Per-slice sum of the SM utilisation samples NVML kept since the last scrape ({} if unsupported)."""
        nv = self._nvml
        get = getattr(nv, "nvmlDeviceGetProcessUtilization", None)
        if get is None:
            return {}
        try:
            samples = get(handle, self._util_ts.get(i, 0))
        except self._error_types():  # NotSupported on many boards, NotFound when no sample is new
            return {}
        out: dict[str, float] = {}
        for smp in samples or ():
            self._util_ts[i] = max(self._util_ts.get(i, 0), int(getattr(smp, "timeStamp", 0)))
            key = self._slice_of_pid(int(smp.pid)) or UNATTRIBUTED
            out[key] = out.get(key, 0.0) + float(getattr(smp, "smUtil", 0))
        return out

    def _attribute_energy(self, i: int, handle: Any, mem_by_slice: dict[str, float]) -> None:
        read = getattr(self._nvml, "nvmlDeviceGetTotalEnergyConsumption", None)
        if read is None:
            return
        try:
            now_mj = float(read(handle))
        except self._error_types():  # boards before Volta have no energy counter
            return
        last = self._energy_mj.get(i)
        self._energy_mj[i] = now_mj
        sm = self._sm_by_slice(i, handle)
        if last is None or now_mj < last:
            return  # baseline (first scrape, or the counter restarted with the driver)
        joules = (now_mj - last) / 1000.0
        weights = {k: v for k, v in (sm or mem_by_slice).items() if v > 0}
        total = sum(weights.values())
        if total <= 0:
            self._energy_j[UNATTRIBUTED] = self._energy_j.get(UNATTRIBUTED, 0.0) + joules
            return
        for slice_, w in weights.items():
            self._energy_j[slice_] = self._energy_j.get(slice_, 0.0) + joules * w / total

    def devices(self) -> list[dict[str, Any]]:
        """What NVML reports per device (for inferslice.bench.nvml_probe); raises NVMLError as NVML does."""
        nv = self._nvml
        if nv is None:
            raise SourceUnavailable("nvidia-ml-py (pynvml) is not installed")
        if not self._initialised:
            nv.nvmlInit()
            self._initialised = True
        out = []
        for i in range(int(nv.nvmlDeviceGetCount())):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            out.append({
                "index": i,
                "uuid": _text(nv.nvmlDeviceGetUUID(h)),
                "name": _text(nv.nvmlDeviceGetName(h)),
                "utilization_pct": nv.nvmlDeviceGetUtilizationRates(h).gpu,
                "memory_used_bytes": mem.used,
                "memory_total_bytes": mem.total,
                "power_mw": _optional(nv.nvmlDeviceGetPowerUsage, h, self._error_types()),
                "processes": [(p.pid, p.usedGpuMemory) for p in nv.nvmlDeviceGetComputeRunningProcesses(h)],
                "energy_mj": _optional(nv.nvmlDeviceGetTotalEnergyConsumption, h, self._error_types()),
            })
        return out
