"""Engine host: one process per PoP hosting every emulated vLLM replica placed there.

Replicas of a PoP share its GPUs, so co-tenancy is modelled in one place (one ``EngineModel``).

    python -m inferslice.testbed.engine.host --topology PATH --pop POP --admin HOST:PORT --state-dir DIR [--seed N]

Admin API (JSON) on --admin:
    GET    /admin/health                 -> 200 {"pop", "replicas"}
    GET    /admin/replicas               -> [{id, tier, pop, gpu, gpu_fraction, gpu_share, url, state, pid}]
    POST   /admin/replicas               {id, tier, gpu, gpu_fraction, host, port, cold_start_s?} -> 201 entry
                                         (409 if the id exists or the address cannot be bound, 422 if invalid)
    DELETE /admin/replicas/{id}          -> drain (in-flight requests finish, up to drain_timeout_s), stop -> 200
    PUT    /admin/replicas/{id}/share    {gpu_share: 0 < x <= 1} -> 200 entry (live change)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web

from inferslice.errors import ConfigError
from inferslice.testbed.engine.driver import EngineDriver
from inferslice.testbed.engine.model import EngineConfig, EngineModel, kv_blocks_for
from inferslice.testbed.engine.server import ReplicaServer
from inferslice.testbed.service import run_service, wait_for_stop_signal
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
    server: ReplicaServer


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
    ) -> None:
        self.topology = topology
        self.engine_defaults = engine_defaults or EngineConfig()
        self.pop = topology.pop(pop)
        self.drain_timeout_s = drain_timeout_s
        self.model = EngineModel(seed=seed)
        self.driver = EngineDriver(self.model, clock)
        self.replicas: dict[str, _Hosted] = {}
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
        if not drained:
            log.warning("replica %s: in-flight requests cut after %.1f s", rid, self.drain_timeout_s)
        await hosted.server.stop()
        self.replicas.pop(rid, None)
        self.driver.remove_replica(rid)

    def set_share(self, rid: str, share: float) -> dict[str, Any]:
        if rid not in self.replicas:
            raise KeyError(rid)
        self.driver.advance()
        self.model.set_share(rid, share)
        self.driver.poke()
        return self.entry(rid)

    def entry(self, rid: str) -> dict[str, Any]:
        h = self.replicas[rid]
        return {
            "id": h.id,
            "tier": h.tier,
            "pop": self.pop.name,
            "gpu": h.gpu,
            "gpu_fraction": h.gpu_fraction,
            "gpu_share": self.model.gpu_share(rid),
            "url": f"http://{h.host}:{h.port}",
            "state": h.server.state,
            "pid": os.getpid(),
        }

    def entries(self) -> list[dict[str, Any]]:
        return [self.entry(rid) for rid in sorted(self.replicas)]

    # -- admin handlers ----------------------------------------------------------------------
    async def _h_health(self, request: web.Request) -> web.Response:
        return web.json_response({"pop": self.pop.name, "replicas": len(self.replicas)})

    async def _h_list(self, request: web.Request) -> web.Response:
        return web.json_response(self.entries())

    async def _h_add(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
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
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        share = body.get("gpu_share")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < float(share) <= 1.0:
            return web.json_response({"error": "gpu_share must be a number in (0, 1]"}, status=422)
        try:
            return web.json_response(self.set_share(rid, float(share)))
        except KeyError:
            return web.json_response({"error": f"no replica {rid!r}"}, status=404)


async def _json_object(request: web.Request) -> dict[str, Any] | web.Response:
    try:
        body = json.loads(await request.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return web.json_response({"error": "body is not JSON"}, status=400)
    if not isinstance(body, dict):
        return web.json_response({"error": "body must be a JSON object"}, status=400)
    return body


def _field(body: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = body.get(name)
    if value is None or isinstance(value, bool) or not isinstance(value, kind):
        raise ValueError(f"field {name!r} is missing or of the wrong type")
    return value


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
    host = EngineHost(top, args.pop, seed=args.seed)
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
    return run_service(_serve(ap.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
