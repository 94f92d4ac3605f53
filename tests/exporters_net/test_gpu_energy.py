"""Energy per slice from NVML's energy counter (inferslice_gpu_energy_joules_total{slice})."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from inferslice import metric_names as mn
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.gpu.nvml import NvmlSource, load_pynvml

from .test_gpu import FakeNotSupported, FakePynvml

GiB = 1024**3


class EnergyNvml(FakePynvml):
    """Adds pynvml's energy counter (mJ) and per-process SM utilisation samples."""

    def nvmlDeviceGetTotalEnergyConsumption(self, h: dict[str, Any]) -> int:
        if h.get("energy_mj") is None:
            raise FakeNotSupported("Not Supported")
        return int(h["energy_mj"])

    def nvmlDeviceGetProcessUtilization(self, h: dict[str, Any], last_seen: int) -> list[SimpleNamespace]:
        if h.get("sm") is None:
            raise FakeNotSupported("Not Supported")
        return [SimpleNamespace(pid=pid, smUtil=sm, timeStamp=ts) for pid, sm, ts in h["sm"] if ts > last_seen]


SLICES = {100: "premium", 200: "free", 300: "premium"}


def value(src: NvmlSource, slice_: str) -> float | None:
    reg = CollectorRegistry()
    reg.register(GuardedCollector([src]))
    return reg.get_sample_value(mn.GPU_ENERGY, {"slice": slice_})


def test_energy_split_by_sm_utilisation_else_by_memory() -> None:
    gpus: list[dict[str, Any]] = [
        {"util": 50, "used": 30 * GiB, "total": 48 * GiB, "power_mw": 200_000, "energy_mj": 1_000_000,
         "procs": [(100, 10 * GiB), (200, 10 * GiB)], "sm": [(100, 60, 1), (200, 20, 1)]},
        {"util": 10, "used": 8 * GiB, "total": 48 * GiB, "power_mw": None, "energy_mj": 500_000,
         "procs": [(300, 6 * GiB), (200, 2 * GiB)], "sm": None},  # no process samples: split by memory
        {"util": 0, "used": 0, "total": 48 * GiB, "power_mw": None, "energy_mj": 0, "procs": [], "sm": None},
    ]
    nv = EnergyNvml(gpus)
    src = NvmlSource(nv, "bristol", SLICES.get)
    assert value(src, "premium") is None  # the first scrape is the baseline
    gpus[0]["energy_mj"] += 8_000  # 8 J: 60/80 to premium, 20/80 to free
    gpus[0]["sm"] = [(100, 60, 2), (200, 20, 2)]
    gpus[1]["energy_mj"] += 4_000  # 4 J: 6/8 to premium, 2/8 to free
    gpus[2]["energy_mj"] += 1_000  # 1 J on a GPU without slice processes
    assert value(src, "premium") == 6.0 + 3.0
    assert value(src, "free") == 2.0 + 1.0
    assert value(src, "unattributed") == 1.0
    gpus[0]["energy_mj"] = 10  # the driver reloaded: the counter restarted, nothing is attributed
    assert value(src, "premium") == 9.0


def test_boards_without_an_energy_counter_export_none() -> None:
    gpus: list[dict[str, Any]] = [{"util": 1, "used": 1, "total": 2, "power_mw": None, "energy_mj": None, "procs": [(100, 1)], "sm": None}]
    src = NvmlSource(EnergyNvml(gpus), "bristol", SLICES.get)
    assert value(src, "premium") is None
    assert value(src, "premium") is None


def test_a_process_no_slice_owns_is_not_billed_to_a_tier() -> None:
    # pid 999 is a neighbour outside every slice: by SM samples 50 of 100 and, without samples,
    # 4 of 8 GiB of memory are its part, which stays unattributed.
    gpus: list[dict[str, Any]] = [
        {"util": 50, "used": 20 * GiB, "total": 48 * GiB, "power_mw": None, "energy_mj": 0,
         "procs": [(100, 10 * GiB), (999, 10 * GiB)], "sm": [(100, 50, 1), (999, 50, 1)]},
        {"util": 50, "used": 8 * GiB, "total": 48 * GiB, "power_mw": None, "energy_mj": 0,
         "procs": [(200, 4 * GiB), (999, 4 * GiB)], "sm": None},
    ]
    src = NvmlSource(EnergyNvml(gpus), "bristol", SLICES.get)
    value(src, "premium")  # baseline
    gpus[0]["energy_mj"] += 10_000
    gpus[0]["sm"] = [(100, 50, 2), (999, 50, 2)]
    gpus[1]["energy_mj"] += 6_000
    assert value(src, "premium") == 5.0
    assert value(src, "free") == 3.0
    assert value(src, "unattributed") == 5.0 + 3.0


def test_devices_without_a_power_sensor_still_list() -> None:
    gpus: list[dict[str, Any]] = [{"util": 1, "used": 1, "total": 2, "power_mw": None, "energy_mj": 7, "procs": [(100, 1)], "sm": None}]
    src = NvmlSource(EnergyNvml(gpus), "bristol", SLICES.get)
    [dev] = src.devices()
    assert dev["power_mw"] is None
    assert dev["energy_mj"] == 7
    assert dev["processes"] == [(100, 1)]


def test_without_nvidia_ml_py_vllms_vendored_pynvml_is_used_without_importing_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "vllm"
    (pkg / "third_party").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('importing vllm pulls in torch')\n")
    (pkg / "third_party" / "__init__.py").write_text("")
    # Like nvidia-ml-py, the copy finds itself in sys.modules while it is imported (its error classes).
    (pkg / "third_party" / "pynvml.py").write_text(
        "import sys\nclass NVMLError(Exception):\n    pass\nsys.modules[__name__].NVMLError_NotSupported = NVMLError\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed: `import pynvml` fails
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    nv = load_pynvml()
    assert nv is not None and nv.NVMLError_NotSupported is nv.NVMLError
    assert "vllm" not in sys.modules


def test_without_any_pynvml_there_is_no_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p) / "vllm").exists()])
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    assert load_pynvml() is None
