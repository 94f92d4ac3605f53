"""Engine host: one process per PoP hosting every vLLM replica placed there, emulated or real.

Emulated replicas of a PoP share its GPUs, so co-tenancy is modelled in one place (one ``EngineModel``).
A tier listed in ``engines`` as ``vllm`` gets real vLLM servers instead (testbed/vllm/process.py: a
child process per replica, bound to the same replica address; its share is a cgroup CPU quota on its
process tree, the CPU analogue of a GPU co-tenant: engine/cpu_quota.py).

    python -m inferslice.testbed.engine.host --topology PATH --pop POP --admin HOST:PORT --state-dir DIR [--seed N]
        [--engine TIER=vllm ... --vllm-python PY --vllm-model DIR [--vllm-max-model-len N] [--vllm-max-num-seqs N]]

Admin API (JSON) on --admin:
    GET    /admin/health                 -> 200 {"pop", "replicas"}
    GET    /admin/replicas               -> [{id, tier, pop, gpu, gpu_fraction, gpu_share, url, state, pid}]
    POST   /admin/replicas               {id, tier, gpu, gpu_fraction, host, port, cold_start_s?} -> 201 entry
                                         (409 if the id exists or the address cannot be bound, 422 if invalid)
    DELETE /admin/replicas/{id}          -> drain (in-flight requests finish, up to drain_timeout_s; then cut), stop -> 200
    PUT    /admin/replicas/{id}/share    {gpu_share: 0 < x <= 1} -> 200 entry (live change)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from aiohttp import web

from inferslice.errors import ConfigError
from inferslice.testbed.engine import cpu_quota
from inferslice.testbed.engine.driver import EngineDriver
from inferslice.testbed.engine.model import EngineConfig, EngineModel, kv_blocks_for
from inferslice.testbed.engine.server import ReplicaServer
from inferslice.testbed.service import run_service, wait_for_stop_signal
from inferslice.testbed.serving.admin import json_object
from inferslice.testbed.vllm.process import VllmProcess, VllmSettings
from inferslice.topology import Topology, load_topology

log = logging.getLogger(__name__)

DRAIN_TIMEOUT_S = 5.0  # a removed replica finishes in-flight streams for this long, then is cut


class ReplicaExists(Exception):
    """A replica with this id is already hosted here."""


@dataclass
class _Hosted:
    id: str
    tier: str
    gpu: int
    gpu_fraction: float
    host: str
    port: int
    server: ReplicaServer | VllmProcess

    @property
    def real(self) -> bool:
        return isinstance(self.server, VllmProcess)


class EngineHost:
    """Python API: ``await EngineHost(top, "bristol").start("127.0.0.1", 18200)`` ... ``await stop()``."""

    def __init__(
        self,
        topology: Topology,
        pop: str,
        *,
        seed: int = 0,
        drain_timeout_s: float = DRAIN_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
        engine_defaults: EngineConfig | None = None,
        engines: Mapping[str, str] | None = None,
        vllm: VllmSettings | None = None,
        log_dir: str | None = None,
    ) -> None:
        self.topology = topology
        self.engine_defaults = engine_defaults or EngineConfig()
        self.engines = dict(engines or {})  # tier -> "emulator" | "vllm"
        bad = {t: e for t, e in self.engines.items() if e not in ("emulator", "vllm") or t not in topology.tier_names}
        if bad:
            raise ConfigError(f"engines: unknown tier or engine in {bad} (engines: emulator, vllm)", field="engine")
        if "vllm" in self.engines.values() and vllm is None:
            raise ConfigError("a tier served by vllm needs the vLLM settings (--vllm-python, --vllm-model)", field="engine")
        self.vllm = vllm
        self.log_dir = log_dir
        self.pop = topology.pop(pop)
        self.drain_timeout_s = drain_timeout_s
        self.model = EngineModel(seed=seed)
        self.driver = EngineDriver(self.model, clock)
        self.replicas: dict[str, _Hosted] = {}
        self.cpu_shares: dict[str, float] = {}  # a real replica's CPU share (its co-tenant: a cgroup quota)
        self._runner: web.AppRunner | None = None
        self._lock = asyncio.Lock()

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, admin_host: str, admin_port: int) -> None:
        self.driver.start()
        app = web.Application()
        app.router.add_get("/admin/health", self._h_health)
        app.router.add_get("/admin/replicas", self._h_list)
        app.router.add_post("/admin/replicas", self._h_add)
        app.router.add_delete("/admin/replicas/{id}", self._h_delete)
        app.router.add_put("/admin/replicas/{id}/share", self._h_share)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, admin_host, admin_port, reuse_address=True).start()
        self._runner = runner

    async def stop(self) -> None:
        for rid in list(self.replicas):
            hosted = self.replicas.pop(rid)
            await hosted.server.stop()
            self._release_cpu(rid)
            if not hosted.real:
                self.driver.remove_replica(rid)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.driver.stop()

    # -- operations --------------------------------------------------------------------------
    async def add_replica(
        self, rid: str, tier: str, gpu: int, gpu_fraction: float, host: str, port: int, cold_start_s: float | None = None
    ) -> dict[str, Any]:
        """Start a replica server bound to host:port; raises ReplicaExists, ValueError if invalid,
        OSError if the address cannot be bound."""
        async with self._lock:
            if rid in self.replicas:
                raise ReplicaExists(rid)
            if tier not in self.topology.tier_names:
                raise ValueError(f"unknown tier {tier!r}")
            if not 0 <= gpu < self.pop.gpus:
                raise ValueError(f"{self.pop.name} has no gpu{gpu}")
            if not 0.0 < gpu_fraction <= 1.0:
                raise ValueError("gpu_fraction must be in (0, 1]")
            cold = self.topology.timing.cold_start_s if cold_start_s is None else cold_start_s
            if cold < 0:
                raise ValueError("cold_start_s must be >= 0")
            if self.engines.get(tier) == "vllm":
                assert self.vllm is not None
                log_path = Path(self.log_dir) / f"vllm-{rid}.log" if self.log_dir else None
                proc = VllmProcess(self.vllm, rid, log_path)
                await proc.start(host, port)  # its cold start is the real one; cold_start_s does not apply
                self.replicas[rid] = _Hosted(rid, tier, gpu, gpu_fraction, host, port, proc)
                return self.entry(rid)
            cfg = dataclasses.replace(self.engine_defaults, num_gpu_blocks=kv_blocks_for(gpu_fraction, self.pop.gpu_memory_bytes))
            self.model.add_replica(
                rid, (self.pop.name, gpu), now_s=self.driver.now(), cold_start_s=cold, config=cfg, created_wall_s=time.time()
            )
            server = ReplicaServer(self.driver, rid, self.topology.model)
            try:
                await server.start(host, port)
            except OSError:
                self.driver.remove_replica(rid)
                raise
            self.replicas[rid] = _Hosted(rid, tier, gpu, gpu_fraction, host, port, server)
            self.driver.poke()
            return self.entry(rid)

    async def remove_replica(self, rid: str) -> None:
        hosted = self.replicas[rid]
        drained = await hosted.server.drain(self.drain_timeout_s)
        if drained:
            await hosted.server.stop()
        else:  # cut the streams still open, so the DELETE answers now rather than when they end
            log.warning("replica %s: in-flight requests cut after %.1f s", rid, self.drain_timeout_s)
            await hosted.server.kill()
        self.replicas.pop(rid, None)
        self._release_cpu(rid)
        if not hosted.real:
            self.driver.remove_replica(rid)

    def set_share(self, rid: str, share: float) -> dict[str, Any]:
        if rid not in self.replicas:
            raise KeyError(rid)
        if self.replicas[rid].real:
            return self._set_cpu_share(rid, share)
        self.driver.advance()
        self.model.set_share(rid, share)
        self.driver.poke()
        return self.entry(rid)

    def _cgroup_name(self, rid: str) -> str:
        return f"{self.pop.name}-{rid}"  # cgroupfs is one tree for every PoP's namespace

    def _set_cpu_share(self, rid: str, share: float) -> dict[str, Any]:
        """A real (CPU) vLLM's co-tenant: its process tree's CPU quota, ``share`` of the machine's cores
        (cpu_quota.py); reported as the replica's ``gpu_share``, the emulator's word for the same thing."""
        server = self.replicas[rid].server
        pid = server.pid if isinstance(server, VllmProcess) else None
        if pid is None:
            raise ValueError(f"replica {rid} has no process yet")
        try:
            ctl = cpu_quota.find_controller()
            if share >= 1.0:
                cpu_quota.release(ctl, self._cgroup_name(rid))
            else:
                cpu_quota.apply(ctl, self._cgroup_name(rid), pid, share, float(os.cpu_count() or 1))
        except cpu_quota.CgroupUnavailable as err:
            raise ValueError(f"a real vLLM's share is a CPU quota, and {err}") from None
        self.cpu_shares[rid] = share
        return self.entry(rid)

    def _release_cpu(self, rid: str) -> None:
        if self.cpu_shares.pop(rid, 1.0) < 1.0:
            try:
                cpu_quota.release(cpu_quota.find_controller(), self._cgroup_name(rid))
            except cpu_quota.CgroupUnavailable:
                pass

    def entry(self, rid: str) -> dict[str, Any]:
        h = self.replicas[rid]
        return {
            "id": h.id,
            "tier": h.tier,
            "pop": self.pop.name,
            "gpu": h.gpu,
            "gpu_fraction": h.gpu_fraction,
            "gpu_share": self.cpu_shares.get(rid, 1.0) if isinstance(h.server, VllmProcess) else self.model.gpu_share(rid),
            "url": f"http://{h.host}:{h.port}",
            "state": h.server.state,
            "pid": h.server.pid if isinstance(h.server, VllmProcess) else os.getpid(),
            "engine": "vllm" if h.real else "emulator",
        }

    def entries(self) -> list[dict[str, Any]]:
        return [self.entry(rid) for rid in sorted(self.replicas)]

    # -- admin handlers ----------------------------------------------------------------------
    async def _h_health(self, request: web.Request) -> web.Response:
        return web.json_response({"pop": self.pop.name, "replicas": len(self.replicas)})

    async def _h_list(self, request: web.Request) -> web.Response:
        return web.json_response(self.entries())

    async def _h_add(self, request: web.Request) -> web.Response:
        body = await json_object(request)
        if isinstance(body, web.Response):
            return body
        try:
            rid = _field(body, "id", str)
            tier = _field(body, "tier", str)
            gpu = _field(body, "gpu", int)
            fraction = float(_field(body, "gpu_fraction", (int, float)))
            host = _field(body, "host", str)
            port = _field(body, "port", int)
            cold = body.get("cold_start_s")
            if cold is not None and (isinstance(cold, bool) or not isinstance(cold, (int, float))):
                raise ValueError("cold_start_s must be a number")
            entry = await self.add_replica(rid, tier, gpu, fraction, host, port, None if cold is None else float(cold))
        except ReplicaExists:
            return web.json_response({"error": f"replica {rid!r} exists", "replica": self.entry(rid)}, status=409)
        except ValueError as err:
            return web.json_response({"error": str(err)}, status=422)
        except OSError as err:
            return web.json_response({"error": f"cannot bind {body.get('host')}:{body.get('port')}: {err.strerror}"}, status=409)
        return web.json_response(entry, status=201)

    async def _h_delete(self, request: web.Request) -> web.Response:
        rid = request.match_info["id"]
        if rid not in self.replicas:
            return web.json_response({"error": f"no replica {rid!r}"}, status=404)
        entry = self.entry(rid)
        await self.remove_replica(rid)
        entry["state"] = "stopped"
        return web.json_response(entry)

    async def _h_share(self, request: web.Request) -> web.Response:
        rid = request.match_info["id"]
        body = await json_object(request)
        if isinstance(body, web.Response):
            return body
        share = body.get("gpu_share")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < float(share) <= 1.0:
            return web.json_response({"error": "gpu_share must be a number in (0, 1]"}, status=422)
        try:
            return web.json_response(self.set_share(rid, float(share)))
        except KeyError:
            return web.json_response({"error": f"no replica {rid!r}"}, status=404)
        except ValueError as err:
            return web.json_response({"error": str(err)}, status=422)


def _field(body: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = body.get(name)
    if value is None or isinstance(value, bool) or not isinstance(value, kind):
        raise ValueError(f"field {name!r} is missing or of the wrong type")
    return value


def parse_engines(items: list[str], tiers: list[str] | None = None) -> list[tuple[str, str]]:
    """``["free=vllm"]`` -> [("free", "vllm")]; a bare ENGINE applies to every tier in ``tiers``."""
    out: list[tuple[str, str]] = []
    for item in items:
        tier, sep, engine = item.partition("=")
        if not sep:
            if tiers is None:
                raise ConfigError(f"expected TIER=ENGINE, got {item!r}", field="engine")
            out.extend((t, tier) for t in tiers)
            continue
        out.append((tier, engine))
    return out


def split_hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


class UdpEcho(asyncio.DatagramProtocol):
    """Answers each datagram with itself: the PoP end of the exporter's RTT probes."""

    transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio's selector datagram transport does not subclass DatagramTransport: cast, not isinstance
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        if self.transport is not None:
            self.transport.sendto(data, addr)


async def _serve(args: argparse.Namespace) -> int:
    top = load_topology(args.topology)
    engines = dict(parse_engines(args.engine))
    vllm = None
    if args.vllm_python and args.vllm_model:
        vllm = VllmSettings(python=args.vllm_python, model=args.vllm_model, served_model_name=top.model,
                            max_model_len=args.vllm_max_model_len, max_num_seqs=args.vllm_max_num_seqs)
    host = EngineHost(top, args.pop, seed=args.seed, engines=engines, vllm=vllm, log_dir=args.state_dir)
    admin_host, admin_port = split_hostport(args.admin)
    await host.start(admin_host, admin_port)
    echo: asyncio.BaseTransport | None = None
    if args.echo:
        echo_host, echo_port = split_hostport(args.echo)
        echo, _ = await asyncio.get_running_loop().create_datagram_endpoint(UdpEcho, local_addr=(echo_host, echo_port))
    log.info("engine host %s: admin on %s", args.pop, args.admin)
    await wait_for_stop_signal()
    if echo is not None:
        echo.close()
    await host.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferslice.testbed.engine.host", description="emulated vLLM engine host of one PoP")
    ap.add_argument("--topology", required=True)
    ap.add_argument("--pop", required=True)
    ap.add_argument("--admin", required=True, help="HOST:PORT of the admin API")
    ap.add_argument("--state-dir", required=True, help="testbed state directory (logs land here)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--echo", default=None, help="HOST:PORT of a UDP echo responder for RTT probes (default: none)")
    ap.add_argument("--engine", action="append", default=[], metavar="TIER=ENGINE", help="serve TIER with ENGINE (emulator|vllm)")
    ap.add_argument("--vllm-python", help="python of the vLLM venv (testbed/vllm/install_cpu.sh)")
    ap.add_argument("--vllm-model", help="model directory the real vLLM serves")
    ap.add_argument("--vllm-max-model-len", type=int, default=256)
    ap.add_argument("--vllm-max-num-seqs", type=int, default=4)
    return run_service(_serve(ap.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
