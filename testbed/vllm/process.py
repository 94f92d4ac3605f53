"""A real vLLM server as a testbed replica: a child process the PoP's engine host starts and stops.

The engine host (in the PoP's network namespace) runs ``python -m vllm.entrypoints.openai.api_server``
from the separate vLLM venv (testbed/vllm/install_cpu.sh) bound to the replica's address, so the tier
front, the exporter and the load generator meet the real engine exactly where they meet an emulated
replica. ``state`` is starting until vLLM's /health answers 200 (the real cold start: ~60 s on 2 CPU
cores for the tiny model), ready after, stopping once asked to go.

    VllmSettings(python=".venv-vllm/bin/python", model=".venv-vllm/tiny-llama", served_model_name="tiny")
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

HEALTH_PERIOD_S = 1.0  # vLLM takes a minute to start; polling faster buys nothing
STOP_TIMEOUT_S = 20.0  # vLLM's shutdown (engine core, worker) takes a few seconds; then SIGKILL


@dataclass(frozen=True)
class VllmSettings:
    python: str  # the vLLM venv's python (absolute or relative to the working directory)
    model: str  # model directory (the tiny random-weight Llama on CPU; a real model on a GPU machine)
    served_model_name: str = "tiny"  # the id clients send; the topology's model
    max_model_len: int = 256  # the tiny model's fixtures were captured at 256
    max_num_seqs: int = 4  # small, so concurrency past it queues in the engine (the queue-limited check)
    device: str = "cpu"  # VLLM_TARGET_DEVICE; "cuda" on a GPU machine
    kv_cache_space_gib: int = 1  # VLLM_CPU_KVCACHE_SPACE: 1 GiB holds the tiny model's cache many times
    extra_args: tuple[str, ...] = ()  # e.g. ("--custom-histogram-buckets", ...) or GPU flags
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def command(self, host: str, port: int) -> list[str]:
        return [
            str(Path(self.python).absolute()), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(Path(self.model).absolute()), "--served-model-name", self.served_model_name,
            "--host", host, "--port", str(port), "--max-model-len", str(self.max_model_len),
            "--max-num-seqs", str(self.max_num_seqs), *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "VLLM_TARGET_DEVICE": self.device,
            "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_space_gib),
            "HF_HUB_OFFLINE": "1",  # nothing is downloaded: the model is on disk
            "VLLM_NO_USAGE_STATS": "1",
            "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"),  # 2 shared cores: one thread per engine
        })
        env.update(dict(self.env))
        return env


class VllmProcess:
    """The ``ReplicaServer`` interface the engine host uses (state, drain, stop, kill, pid), for a real vLLM."""

    def __init__(self, settings: VllmSettings, replica_id: str, log_path: Path | None = None) -> None:
        self.settings = settings
        self.replica_id = replica_id
        self.log_path = log_path
        self.proc: asyncio.subprocess.Process | None = None
        self.stopping = False
        self._healthy = False
        self._watch: asyncio.Task[None] | None = None
        self.url = ""

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def state(self) -> str:
        if self.stopping or (self.proc is not None and self.proc.returncode is not None):
            return "stopping"
        return "ready" if self._healthy else "starting"

    @property
    def in_flight(self) -> int:
        return 0  # vLLM keeps its own count (vllm:num_requests_running); the host does not proxy

    async def start(self, host: str, port: int) -> None:
        out = open(self.log_path, "ab") if self.log_path is not None else asyncio.subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.settings.command(host, port), env=self.settings.environment(), stdout=out, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # its engine-core child goes with it (killpg), nothing else does
            )
        finally:
            if not isinstance(out, int):
                out.close()
        self.url = f"http://{host}:{port}"
        self._watch = asyncio.get_running_loop().create_task(self._health_loop())

    async def _health_loop(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0)) as s:
            while not self.stopping and self.proc is not None and self.proc.returncode is None:
                try:
                    async with s.get(self.url + "/health") as r:
                        self._healthy = r.status == 200
                except (aiohttp.ClientError, TimeoutError, OSError):
                    self._healthy = False
                await asyncio.sleep(HEALTH_PERIOD_S)

    async def drain(self, timeout_s: float) -> bool:
        """vLLM finishes in-flight requests on SIGTERM itself; nothing to wait for here."""
        return True

    async def stop(self) -> None:
        self.stopping = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        p = self.proc
        if p is None or p.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(p.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            await p.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # the engine-core child, if it outlived its parent

    async def kill(self) -> None:
        self.stopping = True
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
