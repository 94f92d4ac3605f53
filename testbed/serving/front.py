"""A tier's serving front: Ray Serve's HTTP proxy, router, queue and autoscaler for one tier.

    python -m inferslice.testbed.serving.front --topology PATH --tier TIER --listen HOST:PORT --state-dir DIR
        [--plan netns|loopback] [--base-port N] [--fixed N] [--seed N]

Proxies POST /v1/chat/completions and /v1/completions (streamed chunk by chunk) and GET /v1/models
to the tier's replicas; at most max_ongoing_requests per replica, the rest wait in a FIFO queue.
Replicas live in the PoPs' engine hosts (admin API): slot k of the tier is placed at
tier.placement[k], addressed by AddressPlan.replica(tier, k), named AddressPlan.replica_id(tier, k).

Admin API on the same listener:
    GET /admin/state                 -> {tier, mode, target, desired, replicas: [...], queued, ongoing}
    PUT /admin/replicas {"replicas": N}  -> 200 state; 409 in autoscale mode; 422 unless 0 <= N <= replicas_max
    PUT /admin/autoscale {"enabled": bool} -> 200 state (disabling keeps the current target, fixed)
GET /metrics: Ray Serve names. Every change of the replica set is published with
inferslice.registry.write_replicas_fragment(state_dir, tier, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from inferslice.registry import ReplicaEntry, write_replicas_fragment
from inferslice.testbed.addressing import AddressPlan
from inferslice.testbed.engine.host import split_hostport
from inferslice.testbed.engine.openai_api import DONE, PROMPT_HINT_HEADER, dumps, error_body, sse
from inferslice.testbed.service import run_service, wait_for_stop_signal
from inferslice.testbed.serving import autoscale
from inferslice.testbed.serving.metrics import HttpStats, RayServeCollector
from inferslice.testbed.serving.router import RouterCore
from inferslice.topology import Topology, load_topology

log = logging.getLogger(__name__)

TICK_S = 0.25  # reconcile / sample period (Ray's autoscaler samples every few hundred ms too)
CONNECT_TIMEOUT_S = 3.0  # a replica that does not accept within this is unreachable
ADMIN_TIMEOUT_S = 5.0


@dataclass
class _Replica:
    slot: int
    id: str
    pop: str
    gpu: int
    url: str
    admin_url: str
    state: str = "pending"  # pending (POST in flight) | starting | ready | stopping | unhealthy
    gpu_share: float = 1.0
    pid: int | None = None


class TierFront:
    """Python API: ``front = TierFront(top, "premium", plan=AddressPlan(top, "loopback"), state_dir=d)``;
    ``await front.start(host, port)`` ... ``await front.stop()``."""

    def __init__(
        self,
        topology: Topology,
        tier: str,
        *,
        plan: AddressPlan,
        state_dir: str,
        autoscale_enabled: bool = True,
        fixed_replicas: int | None = None,
        seed: int = 0,
        tick_s: float = TICK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topology = topology
        self.tier = topology.tier(tier)
        self.tier_name = tier
        self.plan = plan
        self.state_dir = state_dir
        self.clock = clock
        self.tick_s = tick_s
        self.autoscale_enabled = autoscale_enabled and fixed_replicas is None
        t = self.tier
        self.target = fixed_replicas if fixed_replicas is not None else t.replicas_min
        self.settings = autoscale.AutoscaleSettings(
            target_ongoing_requests=t.target_ongoing_requests,
            replicas_min=t.replicas_min,
            replicas_max=t.replicas_max,
            look_back_period_s=topology.timing.look_back_period_s,
            upscale_delay_s=topology.timing.upscale_delay_s,
            downscale_delay_s=topology.timing.downscale_delay_s,
        )
        self.scaler = autoscale.AutoscaleState(desired=self.target)
        self.router = RouterCore(t.max_ongoing_requests, seed=seed)
        self.replicas: dict[int, _Replica] = {}
        self.http = HttpStats()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(RayServeCollector(self))
        self._waiters: dict[Hashable, asyncio.Future[str]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._ops: set[asyncio.Task[None]] = set()
        self._published: list[ReplicaEntry] | None = None

    # -- FrontView (metrics) -----------------------------------------------------------------
    @property
    def queued(self) -> int:
        return self.router.queued

    @property
    def ongoing(self) -> int:
        return self.router.ongoing

    @property
    def target_replicas(self) -> int:
        return self.target

    @property
    def desired_replicas(self) -> int:
        return self.scaler.desired if self.autoscale_enabled else self.target

    def replica_view(self) -> list[tuple[str, bool, int]]:
        return [(r.id, r.state == "ready", self.router.in_flight(r.id)) for r in sorted(self.replicas.values(), key=lambda r: r.slot)]

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=False), timeout=timeout, auto_decompress=False
        )
        app = web.Application(client_max_size=16 * 1024**2)
        app.router.add_post("/v1/chat/completions", self._proxy)
        app.router.add_post("/v1/completions", self._proxy)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/admin/state", self._h_state)
        app.router.add_put("/admin/replicas", self._h_replicas)
        app.router.add_put("/admin/autoscale", self._h_autoscale)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, host, port, reuse_address=True).start()
        self._runner = runner
        self._publish()
        self._loop_task = asyncio.get_running_loop().create_task(self._control_loop(), name=f"front-{self.tier_name}")

    async def stop(self, release_replicas: bool = False) -> None:
        """Stop serving; with ``release_replicas`` also delete this tier's replicas at the hosts."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
            self._loop_task = None
        for task in list(self._ops):
            task.cancel()
        if self._ops:
            await asyncio.gather(*self._ops, return_exceptions=True)
        if release_replicas and self._session is not None:
            await asyncio.gather(*(self._delete(r) for r in list(self.replicas.values())), return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        for fut in self._waiters.values():
            if not fut.done():
                fut.cancel()

    # -- control -----------------------------------------------------------------------------
    def set_fixed(self, replicas: int) -> None:
        if not 0 <= replicas <= self.tier.replicas_max:
            raise ValueError(f"replicas must be within [0, {self.tier.replicas_max}]")
        self.autoscale_enabled = False
        self.target = replicas

    def set_autoscale(self, enabled: bool) -> None:
        if enabled and not self.autoscale_enabled:
            self.scaler = autoscale.AutoscaleState(desired=self.target)
        self.autoscale_enabled = enabled

    def state(self) -> dict[str, Any]:
        return {
            "tier": self.tier_name,
            "mode": "autoscale" if self.autoscale_enabled else "fixed",
            "target": self.target,
            "desired": self.desired_replicas,
            "replicas": [
                {
                    "id": r.id,
                    "slot": r.slot,
                    "pop": r.pop,
                    "gpu": r.gpu,
                    "url": r.url,
                    "state": r.state,
                    "gpu_share": r.gpu_share,
                    "in_flight": self.router.in_flight(r.id),
                }
                for r in sorted(self.replicas.values(), key=lambda r: r.slot)
            ],
            "queued": self.router.queued,
            "ongoing": self.router.ongoing,
        }

    async def _control_loop(self) -> None:
        while True:
            try:
                await self.reconcile()
            except aiohttp.ClientError as err:  # a host hiccup must not stop the tier's control
                log.warning("front %s: reconcile: %s", self.tier_name, err)
            await asyncio.sleep(self.tick_s)

    async def reconcile(self) -> None:
        """One control tick: sample load, maybe rescale, converge replicas to the target, refresh states."""
        now = self.clock()
        autoscale.observe(self.scaler, self.settings, now, self.router.ongoing)
        if self.autoscale_enabled:
            self.target = autoscale.decide(self.scaler, self.settings, now, self.target)
        for k in range(self.target):
            if k not in self.replicas:
                self._spawn(self._create(k))
        for r in list(self.replicas.values()):
            if r.slot >= self.target and r.state not in ("pending", "stopping"):
                r.state = "stopping"
                self.router.set_routable(r.id, False)
                self._spawn(self._delete(r))
        await self._refresh()
        self._publish()
        self._dispatch()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._ops.add(task)
        task.add_done_callback(self._ops.discard)

    async def _create(self, slot: int) -> None:
        assert self._session is not None
        pop, gpu = self.plan.slot_of(self.tier_name, slot)
        ep = self.plan.replica(self.tier_name, slot)
        rid = self.plan.replica_id(self.tier_name, slot)
        admin = self.plan.host_admin(pop).url
        r = _Replica(slot, rid, pop, gpu, ep.url, admin)
        self.replicas[slot] = r
        body = {"id": rid, "tier": self.tier_name, "gpu": gpu, "gpu_fraction": self.tier.gpu_per_replica, "host": ep.host, "port": ep.port}
        try:
            async with self._session.post(
                f"{admin}/admin/replicas", json=body, timeout=aiohttp.ClientTimeout(total=ADMIN_TIMEOUT_S)
            ) as resp:
                data = await resp.json(content_type=None)
                if resp.status == 409 and isinstance(data, dict) and "replica" in data:
                    data = data["replica"]  # adopted: a previous front created it
                elif resp.status != 201:
                    raise aiohttp.ClientResponseError(resp.request_info, (), status=resp.status, message=str(data))
        except (aiohttp.ClientError, TimeoutError) as err:
            log.warning("front %s: cannot create %s at %s: %s", self.tier_name, rid, admin, err)
            self.replicas.pop(slot, None)  # retried on a later tick
            return
        self._apply_entry(r, data)
        self.router.add_replica(rid, routable=r.state == "ready")
        self._publish()

    async def _delete(self, r: _Replica) -> None:
        assert self._session is not None
        try:
            async with self._session.delete(f"{r.admin_url}/admin/replicas/{r.id}", timeout=aiohttp.ClientTimeout(total=30)) as resp:
                await resp.read()
        except (aiohttp.ClientError, TimeoutError) as err:
            log.warning("front %s: cannot delete %s: %s", self.tier_name, r.id, err)
        if self.replicas.get(r.slot) is r:
            del self.replicas[r.slot]
        if self.router.in_flight(r.id) == 0:
            self.router.remove_replica(r.id)
        self._publish()

    async def _refresh(self) -> None:
        """Read replica states (starting/ready, GPU share) from the engine hosts' admin APIs."""
        assert self._session is not None
        admins = {r.admin_url for r in self.replicas.values() if r.state not in ("pending", "stopping")}
        for admin in admins:
            try:
                async with self._session.get(f"{admin}/admin/replicas", timeout=aiohttp.ClientTimeout(total=ADMIN_TIMEOUT_S)) as resp:
                    entries = {e["id"]: e for e in await resp.json()}
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError):
                entries = None
            for r in self.replicas.values():
                if r.admin_url != admin or r.state in ("pending", "stopping"):
                    continue
                if entries is None or r.id not in entries:
                    r.state = "unhealthy"
                else:
                    self._apply_entry(r, entries[r.id])
                    if r.state == "stopping":
                        r.state = "unhealthy"  # stopping, but not by us: the replica is going away
                self.router.set_routable(r.id, r.state == "ready")

    @staticmethod
    def _apply_entry(r: _Replica, e: dict[str, Any]) -> None:
        r.state = str(e.get("state", "starting"))
        r.gpu_share = float(e.get("gpu_share", 1.0))
        pid = e.get("pid")
        r.pid = int(pid) if isinstance(pid, int) else None

    def _publish(self) -> None:
        entries = [
            ReplicaEntry(
                id=r.id,
                tier=self.tier_name,
                pop=r.pop,
                gpu=r.gpu,
                gpu_fraction=self.tier.gpu_per_replica,
                gpu_share=r.gpu_share,
                url=r.url,
                state=_registry_state(r.state),
                pid=r.pid,
            )
            for r in sorted(self.replicas.values(), key=lambda r: r.slot)
        ]
        if entries != self._published:
            write_replicas_fragment(self.state_dir, self.tier_name, entries)
            self._published = entries

    # -- routing -----------------------------------------------------------------------------
    def _dispatch(self) -> None:
        for token, rid in self.router.dispatch():
            fut = self._waiters.pop(token, None)
            if fut is None or fut.done():
                self.router.release(rid)
                continue
            fut.set_result(rid)

    async def _acquire(self) -> str:
        token = object()
        rid = self.router.try_assign(token)
        if rid is not None:
            return rid
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiters[token] = fut
        try:
            return await fut
        except asyncio.CancelledError:
            self.router.cancel(token)
            self._waiters.pop(token, None)
            if fut.done() and not fut.cancelled():
                self._release(fut.result())
            raise

    def _release(self, rid: str) -> None:
        self.router.release(rid)
        if self.router.in_flight(rid) == 0 and not any(r.id == rid for r in self.replicas.values()):
            self.router.remove_replica(rid)
        self._dispatch()

    def _url_of(self, rid: str) -> str | None:
        for r in self.replicas.values():
            if r.id == rid:
                return r.url
        return None

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        t0 = time.monotonic()
        route = request.path
        status = 500
        try:
            if not self.autoscale_enabled and self.target == 0:
                status = 503
                return _error(f"tier {self.tier_name} has no replicas (fixed at 0)", 503)
            body = await request.read()
            rid = await self._acquire()
            try:
                resp, status = await self._forward(request, rid, body)
                return resp
            finally:
                self._release(rid)
        finally:
            self.http.record(route, request.method, status, (time.monotonic() - t0) * 1000.0)

    async def _forward(self, request: web.Request, rid: str, body: bytes) -> tuple[web.StreamResponse, int]:
        assert self._session is not None
        url = self._url_of(rid)
        if url is None:
            return _error(f"replica {rid} is gone", 503), 503
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        if PROMPT_HINT_HEADER in request.headers:
            headers[PROMPT_HINT_HEADER] = request.headers[PROMPT_HINT_HEADER]
        try:
            up_cm = self._session.post(url + request.path, data=body, headers=headers)
            up = await up_cm.__aenter__()
        except (aiohttp.ClientError, TimeoutError) as err:
            return _error(f"replica {rid} unreachable: {err.__class__.__name__}", 503), 503
        try:
            ctype = up.headers.get("Content-Type", "application/json")
            if up.status != 200 or not ctype.startswith("text/event-stream"):
                try:
                    data = await up.read()
                except (aiohttp.ClientError, TimeoutError) as err:
                    return _error(f"replica {rid} failed mid-response: {err.__class__.__name__}", 503), 503
                return web.Response(body=data, status=up.status, headers={"Content-Type": ctype}), up.status
            resp = web.StreamResponse(status=200, headers={"Content-Type": ctype, "Cache-Control": "no-cache"})
            await resp.prepare(request)
            status = 200
            try:
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
            except (aiohttp.ClientError, TimeoutError) as err:
                # The replica died mid-stream: end the stream with vLLM's streaming error event.
                status = 503
                msg = f"replica {rid} failed mid-stream: {err.__class__.__name__}"
                await resp.write(sse(dumps(error_body(msg, "Service Unavailable", None, 503))))
                await resp.write(DONE)
            await resp.write_eof()
            return resp, status
        except ConnectionResetError:
            return web.Response(status=499), 499  # the client went away; nothing left to send
        finally:
            await up_cm.__aexit__(None, None, None)

    async def _models(self, request: web.Request) -> web.Response:
        assert self._session is not None
        for r in self.replicas.values():
            if r.state == "ready":
                try:
                    async with self._session.get(r.url + "/v1/models") as up:
                        return web.Response(body=await up.read(), status=up.status, content_type="application/json")
                except (aiohttp.ClientError, TimeoutError):
                    continue
        return _error(f"tier {self.tier_name} has no ready replica", 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    # -- admin -------------------------------------------------------------------------------
    async def _h_state(self, request: web.Request) -> web.Response:
        return web.json_response(self.state())

    async def _h_replicas(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        n = body.get("replicas")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= self.tier.replicas_max:
            return web.json_response({"error": f"replicas must be an integer within [0, {self.tier.replicas_max}]"}, status=422)
        if self.autoscale_enabled:
            return web.json_response({"error": 'autoscaling is on: PUT /admin/autoscale {"enabled": false} first'}, status=409)
        self.set_fixed(n)
        await self.reconcile()
        return web.json_response(self.state())

    async def _h_autoscale(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        enabled = body.get("enabled")
        if not isinstance(enabled, bool):
            return web.json_response({"error": "enabled must be true or false"}, status=422)
        self.set_autoscale(enabled)
        return web.json_response(self.state())


def _registry_state(state: str) -> str:
    return {"pending": "starting", "unhealthy": "starting"}.get(state, state)


def _error(message: str, status: int) -> web.Response:
    phrase = {503: "Service Unavailable", 500: "Internal Server Error"}.get(status, "Bad Request")
    return web.json_response(error_body(message, phrase, None, status), status=status, dumps=dumps)


async def _json_object(request: web.Request) -> dict[str, Any] | web.Response:
    try:
        body = json.loads(await request.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return web.json_response({"error": "body is not JSON"}, status=400)
    if not isinstance(body, dict):
        return web.json_response({"error": "body must be a JSON object"}, status=400)
    return body


async def _serve(args: argparse.Namespace) -> int:
    top = load_topology(args.topology)
    plan = AddressPlan(top, args.plan, base_port=args.base_port)
    front = TierFront(top, args.tier, plan=plan, state_dir=args.state_dir, fixed_replicas=args.fixed, seed=args.seed)
    host, port = split_hostport(args.listen)
    await front.start(host, port)
    log.info("front %s: listening on %s", args.tier, args.listen)
    await wait_for_stop_signal()
    await front.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    from inferslice.testbed.addressing import LOOPBACK_BASE_PORT

    ap = argparse.ArgumentParser(prog="python -m inferslice.testbed.serving.front", description="a tier's Ray-Serve-like serving front")
    ap.add_argument("--topology", required=True)
    ap.add_argument("--tier", required=True)
    ap.add_argument("--listen", required=True, help="HOST:PORT for the API, /metrics and /admin")
    ap.add_argument("--state-dir", required=True, help="where the tier's replica registry fragment is written")
    ap.add_argument("--plan", choices=["netns", "loopback"], default="netns")
    ap.add_argument("--base-port", type=int, default=LOOPBACK_BASE_PORT, help="loopback plan only")
    ap.add_argument("--fixed", type=int, default=None, help="start in fixed mode with N replicas instead of autoscaling")
    ap.add_argument("--seed", type=int, default=0)
    return run_service(_serve(ap.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
