"""The testbed's services with some tiers served by real vLLM engines (``inferslice testbed up --engine``).

Wraps ``testbed.net.lifecycle.default_services``: every PoP's engine host is told which tiers are
``vllm`` and where the vLLM venv and model are; fronts, exporter and addresses stay as they are, so a
real replica sits exactly where an emulated one would, in the PoP's namespace behind the same front.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from inferslice.errors import ConfigError
from inferslice.testbed.net.lifecycle import ServiceFactory, ServiceSpec, default_services
from inferslice.testbed.net.plan import NetPlan
from inferslice.testbed.per_tier import resolve_per_tier
from inferslice.topology import Topology

ENGINES = ("emulator", "vllm")
VENV_ENV = "INFERSLICE_VLLM_VENV"  # where testbed/vllm/install_cpu.sh put the vLLM venv


def default_venv() -> Path:
    return Path(os.environ.get(VENV_ENV, ".venv-vllm")).absolute()


def resolve_engines(items: list[str], tiers: list[str]) -> dict[str, str]:
    """``["vllm"]`` (every tier) or ``["free=vllm", ...]`` -> {tier: engine}; later items win."""
    return resolve_per_tier(items, tiers, ENGINES, "emulator", "engine")


def engine_services(engines: Mapping[str, str], venv: Path, max_model_len: int = 256, max_num_seqs: int = 4) -> ServiceFactory:
    """A service factory whose engine hosts serve the ``vllm`` tiers with the venv's vLLM and tiny model."""
    real = sorted(t for t, e in engines.items() if e == "vllm")
    if real and not (venv / "bin" / "python").exists():
        raise ConfigError(f"no vLLM venv at {venv}: run testbed/vllm/install_cpu.sh (or set {VENV_ENV})", field="engine")

    def factory(top: Topology, topology_path: str, state_dir: Path, plan: NetPlan) -> list[ServiceSpec]:
        specs = default_services(top, topology_path, state_dir, plan)
        if not real:
            return specs
        extra: tuple[str, ...] = (*(f"--engine={t}=vllm" for t in real), "--vllm-python", str(venv / "bin" / "python"),
                                  "--vllm-model", str(venv / "tiny-llama"), "--vllm-max-model-len", str(max_model_len),
                                  "--vllm-max-num-seqs", str(max_num_seqs))
        return [dataclasses.replace(s, argv=(*s.argv, *extra)) if s.kind == "host" else s for s in specs]

    return factory
