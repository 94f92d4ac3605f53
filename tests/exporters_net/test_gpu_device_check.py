"""The GPU device check's paths that need no GPU: a missing workload is a skip, an NVML error a failure."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferslice.bench import gpu_device_check as check

from .test_gpu import FakePynvml
from .test_gpu_energy import EnergyNvml, GiB


@pytest.fixture(autouse=True)
def _keep_sigterm() -> Iterator[None]:
    old = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, old)


def _gpus() -> list[dict[str, Any]]:
    return [{"util": 5, "used": 1 * GiB, "total": 80 * GiB, "power_mw": 70_000, "energy_mj": 5_000_000, "procs": [(4242, GiB)], "sm": None}]


def test_without_vllm_or_torch_nvml_is_read_and_the_workload_is_a_recorded_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check, "load_pynvml", lambda: EnergyNvml(_gpus()))
    monkeypatch.setattr(check, "_importable", lambda name: False)
    assert check.main(["--out", str(tmp_path)]) == 2
    report = json.loads((tmp_path / "report.json").read_text())
    assert [d["energy_mj"] for d in report["devices"]] == [5_000_000]
    assert report["nvml_pids"] == [[4242]]  # NVML's PIDs recorded, for a PID-namespace mismatch
    assert "torch" in report["skipped_load"]
    assert report["checks"]["both_tiers_mapped"] is None


def test_an_nvml_that_cannot_start_fails_with_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check, "load_pynvml", lambda: FakePynvml(_gpus(), fail_init=True))
    assert check.main(["--out", str(tmp_path)]) == 1
    assert "Driver Not Loaded" in json.loads((tmp_path / "report.json").read_text())["error"]


def test_no_nvml_binding_is_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check, "load_pynvml", lambda: None)
    assert check.main(["--out", str(tmp_path)]) == 2
    assert "nvidia-ml-py" in json.loads((tmp_path / "report.json").read_text())["skipped"]
