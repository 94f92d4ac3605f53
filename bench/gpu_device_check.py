"""GPU device check: one run (<= 10 min) on a machine with an NVIDIA GPU. Nothing depends on it.

    bench/gpu_device_check.sh [OUTDIR]      (picks a python that has vLLM/torch when the machine has one)

What it checks and writes to OUTDIR/report.json (plus nvidia-smi's XML and each step's log):
1. NVML through the inferslice GPU source (``bench.nvml_probe``'s path): devices, processes.
2. Per-process readings mapped to slices: two "tiers" run as processes on GPU 0 with fractional
   shares (vLLM ``--gpu-memory-utilization`` 0.30 and 0.15, or torch workloads sized 2:1 when there is
   no vLLM), and ``inferslice_slice_gpu_memory_used_bytes{slice}`` must name both.
3. A CUDA vLLM under the load generator (tiny random-weight Llama from testbed/vllm/tiny_llama.py, or
   ``INFERSLICE_GPU_MODEL``): client TTFT/TPOT summaries per tier.
4. Energy per tier: ``inferslice_gpu_energy_joules_total{slice}`` sampled every 5 s under load; the
   slices' sum plus ``unattributed`` must equal the device counter's increase (conservation), and the
   busier tier must get more.
Each step degrades to a recorded reason (no vLLM, no torch, no energy counter) rather than failing.
The whole run keeps to ``INFERSLICE_GPU_CHECK_BUDGET_S`` (default 540 s, under the device's 10-minute
call): the vLLM start waits only as long as the load and the checks still fit, the report is written
after every step, and SIGTERM (the shell's ``timeout``) still stops the engines it started.
NVML names host PIDs: ``nvml_pids`` next to ``tier_pids`` in the report shows a PID-namespace
mismatch (a container without the host's PID namespace) when the mapping finds no tier.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from inferslice import metric_names as mn
from inferslice.common.registry import ReplicaEntry
from inferslice.errors import SourceUnavailable
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.gpu.allocation import PidResolver
from inferslice.exporters.gpu.nvml import NvmlSource, load_pynvml

ROOT = Path(__file__).resolve().parents[1]
_PROCS: list[Any] = []  # every vLLM started, stopped in _run's finally (also on SIGTERM)
TIERS = {"premium": (0.30, 8), "free": (0.15, 2)}  # tier -> (GPU memory share, client concurrency)
LOAD_S = 60.0
SAMPLE_S = 5.0
BUDGET_S = float(os.environ.get("INFERSLICE_GPU_CHECK_BUDGET_S", "540"))  # the device call allows 600 s
AFTER_START_S = LOAD_S + 60.0  # the load, the final scrapes and stopping the engines after vLLM is up
_DEADLINE = time.monotonic() + BUDGET_S


def _left_s() -> float:
    return _DEADLINE - time.monotonic()


def _save(out: Path, report: dict[str, Any]) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))


def _importable(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _terminated(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks, which stop the engines

TORCH_WORKLOAD = """
import sys, time, torch
n, secs = int(sys.argv[1]), float(sys.argv[2])
a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda")
t = time.time()
while time.time() - t < secs:
    (a @ b).sum().item()
"""


def _log(out: Path, msg: str) -> None:
    line = f"{time.strftime('%H:%M:%S')} {msg}"
    print(line, flush=True)
    with (out / "steps.log").open("a") as fh:
        fh.write(line + "\n")


def _scrape(src: NvmlSource) -> dict[str, dict[str, float]]:
    reg = CollectorRegistry()
    reg.register(GuardedCollector([src]))
    out: dict[str, dict[str, float]] = {}
    for fam in reg.collect():
        for s in fam.samples:
            if s.name in (mn.GPU_ENERGY, mn.SLICE_GPU_MEMORY_USED, mn.GPU_POWER, mn.GPU_UTILIZATION):
                key = s.labels.get("slice") or f"{s.labels.get('pop')}/gpu{s.labels.get('gpu')}"
                out.setdefault(s.name, {})[key] = s.value
    return out


def _device_energy_mj(src: NvmlSource) -> float | None:
    devs = src.devices()
    vals = [d.get("energy_mj") for d in devs]
    return float(sum(v for v in vals if v is not None)) if any(v is not None for v in vals) else None


async def _vllm_tiers(out: Path, report: dict[str, Any]) -> dict[str, tuple[int, str]]:
    """Start one CUDA vLLM per tier on GPU 0 with its memory share; {tier: (pid, url)} once ready."""
    from inferslice.testbed.vllm.process import VllmProcess, VllmSettings

    model = os.environ.get("INFERSLICE_GPU_MODEL")
    if not model:
        model = str(out / "tiny-llama")
        subprocess.run([sys.executable, str(ROOT / "testbed" / "vllm" / "tiny_llama.py"), model], check=True, capture_output=True)
    report["model"] = model
    procs: dict[str, VllmProcess] = {}
    for k, (tier, (share, _)) in enumerate(TIERS.items()):
        s = VllmSettings(
            python=sys.executable,
            model=model,
            served_model_name="tiny",
            max_model_len=256,
            max_num_seqs=16,
            device="cuda",
            extra_args=("--gpu-memory-utilization", str(share), "--enforce-eager"),
            env=(("CUDA_VISIBLE_DEVICES", "0"),),
        )
        p = VllmProcess(s, f"{tier}-0", out / f"vllm-{tier}.log")
        await p.start("127.0.0.1", 18600 + k)
        procs[tier] = p
        _PROCS.append(p)
        # One at a time: two engines profiling memory at once misjudge the free memory.
        while p.state not in ("ready", "stopping") and _left_s() > AFTER_START_S:
            await asyncio.sleep(0.5)
        if p.state != "ready":
            report["vllm_note"] = f"{tier}: not ready with {AFTER_START_S:g} s of the budget left (see vllm-{tier}.log)"
            break
    report["vllm_ready"] = {t: p.state for t, p in procs.items()}
    return {t: (p.pid or 0, p.url) for t, p in procs.items() if p.state == "ready"}


async def _load(tiers: dict[str, tuple[int, str]]) -> dict[str, Any]:
    from inferslice.testbed.loadgen import LoadConfig, WorkloadSpec, run_load

    spec = WorkloadSpec(dataset="random", random_input_len=100, random_output_len=100, random_range_ratio=0.5)
    runs = [
        run_load(LoadConfig(url=url, model="tiny", slice=t, concurrency=TIERS[t][1], duration_s=LOAD_S, workload=spec))
        for t, (_, url) in tiers.items()
    ]
    results = await asyncio.gather(*runs)
    keys = ("completed", "failed", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "output_throughput")
    return {t: {k: r.summary.get(k) for k in keys} for t, r in zip(tiers, results, strict=True)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/gpu-device-check"))
    args = ap.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _terminated)
    report: dict[str, Any] = {"python": sys.executable, "budget_s": BUDGET_S}
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "-q", "-x"], capture_output=True, text=True, check=False)
        (out / "nvidia-smi.xml").write_text(smi.stdout)
    nvml = load_pynvml()
    if nvml is None:
        report["skipped"] = "no NVML binding: neither nvidia-ml-py (pynvml) nor vLLM's vendored copy in this python"
        _save(out, report)
        print(report["skipped"], file=sys.stderr)
        return 2
    report["pynvml"] = getattr(nvml, "__file__", None)
    entries: list[ReplicaEntry] = []
    resolver = PidResolver(lambda: entries)
    src = NvmlSource(nvml, "device", resolver)
    try:
        report["devices"] = src.devices()
    except (SourceUnavailable, nvml.NVMLError) as err:
        report["error"] = f"NVML unavailable: {err}"
        _save(out, report)
        print(report["error"], file=sys.stderr)
        return 1
    _log(out, f"NVML: {len(report['devices'])} device(s)")
    has_vllm, has_torch = _importable("vllm"), _importable("torch")
    report["has_vllm"], report["has_torch"] = has_vllm, has_torch
    _save(out, report)
    try:
        asyncio.run(_run(out, report, src, entries))
    finally:
        src.close()
        _save(out, report)
    checks = report.get("checks", {})
    if any(v is False for v in checks.values() if isinstance(v, bool)):
        return 1
    return 2 if "skipped_load" in report else 0


async def _run(out: Path, report: dict[str, Any], src: NvmlSource, entries: list[ReplicaEntry]) -> None:
    """Workloads, sampling and checks, in one event loop (vLLM's child processes belong to it)."""
    workers: list[subprocess.Popen[bytes]] = []
    try:
        tiers: dict[str, tuple[int, str]] = {}
        if report["has_vllm"]:
            tiers = await _vllm_tiers(out, report)
            _log(out, f"vLLM ready: {sorted(tiers)}")
            _save(out, report)
        if not tiers and report["has_torch"]:
            for tier, n in (("premium", 8192), ("free", 4096)):
                w = subprocess.Popen([sys.executable, "-c", TORCH_WORKLOAD, str(n), str(LOAD_S + 10)])
                workers.append(w)
                tiers[tier] = (w.pid, "")
            report["workload"] = "torch matmul (no vLLM)"
        if not tiers:
            report["skipped_load"] = "neither a CUDA vLLM nor torch in this python: NVML read, no workload to attribute"
        for tier, (pid, url) in tiers.items():
            entries.append(ReplicaEntry(f"{tier}-0", tier, "device", 0, TIERS[tier][0], 1.0, url or "none", pid=pid))
        report["tier_pids"] = {t: pid for t, (pid, _) in tiers.items()}
        samples: list[dict[str, Any]] = []
        e0 = _device_energy_mj(src)
        _scrape(src)  # baseline of the energy attribution
        stop = threading.Event()

        def sampler() -> None:
            while not stop.wait(SAMPLE_S):
                samples.append({"t": time.time(), **_scrape(src)})

        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        if tiers and all(url for _, url in tiers.values()):
            report["load"] = await _load(tiers)
        elif tiers:
            await asyncio.sleep(LOAD_S)
        stop.set()
        th.join()
        report["nvml_pids"] = [[pid for pid, _ in d.get("processes", [])] for d in src.devices()]
        final = _scrape(src)
        e1 = _device_energy_mj(src)
        report["samples"] = samples
        report["final"] = final
        energy = final.get(mn.GPU_ENERGY, {})
        report["energy_j_by_slice"] = energy
        ratio = None
        if e0 is not None and e1 is not None:
            device_j = (e1 - e0) / 1000.0
            report["device_energy_j"] = device_j
            ratio = sum(energy.values()) / device_j if device_j > 0 else None
            report["energy_conservation_ratio"] = ratio
        else:
            report["energy_note"] = "no NVML energy counter on this board (pre-Volta or vGPU)"
        mem = final.get(mn.SLICE_GPU_MEMORY_USED, {})
        report["slices_seen_by_nvml"] = sorted(mem)
        report["checks"] = {
            "both_tiers_mapped": set(tiers) <= set(mem) if tiers else None,
            "busier_tier_more_energy": (energy.get("premium", 0) > energy.get("free", 0)) if energy and tiers else None,
            # the sampler's scrapes and the final one cover the whole interval since the baseline
            "conservation_within_2pct": abs(ratio - 1) < 0.02 if ratio is not None else None,
        }
        _log(out, f"checks: {report['checks']}")
    finally:
        for w in workers:
            w.terminate()
        for p in _PROCS:
            await p.stop()


if __name__ == "__main__":
    raise SystemExit(main())
