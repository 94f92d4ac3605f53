"""Run the REAL NVML path once and print what it read (for a machine with an NVIDIA GPU).

``.venv/bin/python -m inferslice.bench.nvml_probe [--pop NAME]``: prints each device's NVML readings, then
the exposition the ``gpu_nvml`` source produces from them. Exit 1 when NVML cannot be read (no
GPU, no driver, or nvidia-ml-py missing), with NVML's reason.
"""

from __future__ import annotations

import argparse
import json
import sys

from prometheus_client import CollectorRegistry, generate_latest

from inferslice.errors import SourceUnavailable
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.gpu.nvml import NvmlSource, load_pynvml


def main() -> int:
    parser = argparse.ArgumentParser(description="read NVML once through the inferslice GPU source")
    parser.add_argument("--pop", default="local")
    args = parser.parse_args()
    nvml = load_pynvml()
    source = NvmlSource(nvml, args.pop)
    nvml_errors: tuple[type[BaseException], ...] = (nvml.NVMLError,) if nvml is not None else ()
    try:
        devices = source.devices()
    except (SourceUnavailable, *nvml_errors) as err:  # type: ignore[misc]
        print(f"NVML unavailable: {err}", file=sys.stderr)
        return 1
    print(json.dumps(devices, indent=1, default=str))
    registry = CollectorRegistry()
    guarded = GuardedCollector([source])
    registry.register(guarded)
    print(generate_latest(registry).decode())
    source.close()
    return 0 if not guarded.last_errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
