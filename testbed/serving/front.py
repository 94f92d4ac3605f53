"""A tier's serving front: Ray Serve's HTTP proxy, router, queue and autoscaler for one tier.

    python -m inferslice.testbed.serving.front --topology PATH --tier TIER --listen HOST:PORT --state-dir DIR
        [--plan netns|loopback] [--base-port N] [--fixed N] [--seed N]

Proxies POST /v1/chat/completions, /v1/completions (streamed chunk by chunk), /tokenize and GET /v1/models
to the tier's replicas; at most max_ongoing_requests per replica, the rest wait in a FIFO queue.
This module composes the parts, one idea each: ``replicas`` (the replica set at the PoPs' engine
hosts), ``admission`` (the queue), ``proxy`` (forwarding), ``autoscale`` (the pure policy),
``admin`` (the admin API on the same listener), ``metrics`` (GET /metrics with Ray Serve's names),
``moves`` (make-before-break moves of a replica to another PoP).
Every change of the replica set is published with inferslice.common.registry.write_replicas_fragment.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from inferslice.common.registry import ReplicaEntry, write_replicas_fragment
from inferslice.testbed.addressing import AddressPlan
from inferslice.testbed.engine.host import split_hostport
from inferslice.testbed.service import run_service, wait_for_stop_signal
from inferslice.testbed.serving import autoscale
from inferslice.testbed.serving.admin import add_admin_routes
from inferslice.testbed.serving.admission import Admission
from inferslice.testbed.serving.metrics import HttpStats, RayServeCollector
from inferslice.testbed.serving.moves import Move, MoveRefused, check_move, run_move
from inferslice.testbed.serving.proxy import error_response, first_models, forward
from inferslice.testbed.serving.replicas import Replica, ReplicaSet, placement_path, registry_entries
from inferslice.testbed.serving.router import RouterCore
from inferslice.topology import Topology, load_topology

log = logging.getLogger(__name__)

TICK_S = 0.25  # reconcile / sample period (Ray's autoscaler samples every few hundred ms too)
CONNECT_TIMEOUT_S = 3.0  # a replica that does not accept within this is unreachable


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
        self.set = ReplicaSet(tier, t, plan, self.router, placement_path(state_dir, tier))
        self.admission = Admission(self.router, self.set.holds)
        self.http = HttpStats()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(RayServeCollector(self))
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._ops: set[asyncio.Task[None]] = set()
        self._published: list[ReplicaEntry] | None = None
        self.moves: dict[str, Move] = {}
        # A successor that does not serve within this is given up (the old replica keeps serving).
        self.move_timeout_s = 4 * topology.timing.cold_start_s + 30.0

    @property
    def replicas(self) -> dict[int, Replica]:
        return self.set.by_slot

    @property
    def replicas_max(self) -> int:
        return self.tier.replicas_max

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
        return [(r.id, r.state == "ready", self.router.in_flight(r.id)) for r in self.set.sorted()]

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=False), timeout=timeout, auto_decompress=False
        )
        app = web.Application(client_max_size=16 * 1024**2)
        app.router.add_post("/v1/chat/completions", self._proxy)
        app.router.add_post("/v1/completions", self._proxy)
        app.router.add_post("/tokenize", self._proxy)  # vLLM's; the load generator measures prompts with it
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/metrics", self._metrics)
        add_admin_routes(app, self)
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
            session = self._session
            await asyncio.gather(*(self.set.delete(session, r) for r in list(self.replicas.values())), return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        self.admission.cancel_all()

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

    def start_move(self, move_id: str, replica: str, pop: str, gpu: int) -> tuple[Move, bool]:
        """Start moving ``replica`` to ``pop``/``gpu`` make-before-break; (the move, whether it is new).
        The same ``move_id`` again returns the move already known. MoveRefused when it cannot start."""
        if move_id in self.moves:
            return self.moves[move_id], False
        if self._session is None:
            raise MoveRefused("the front is not serving", 409)
        pops = {p.name: p.gpus for p in self.topology.pops}
        old = check_move(self.set, self.moves, replica, pop, gpu, pops)
        move = Move(move_id, replica, old.slot, f"{old.pop}/gpu{old.gpu}", f"{pop}/gpu{gpu}")
        self.moves[move_id] = move
        coro = run_move(move, self.set, self._session, old, pop, gpu, ready_timeout_s=self.move_timeout_s, publish=self._publish)
        self._spawn(coro)
        return move, True

    def state(self) -> dict[str, Any]:
        return {
            "tier": self.tier_name,
            "mode": "autoscale" if self.autoscale_enabled else "fixed",
            "target": self.target,
            "desired": self.desired_replicas,
            "replicas": [r.as_dict(self.router.in_flight(r.id)) for r in self.set.sorted()],
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
        assert self._session is not None
        session = self._session
        now = self.clock()
        self.scaler = autoscale.observe(self.scaler, self.settings, now, self.router.ongoing)
        if self.autoscale_enabled:
            self.target, self.scaler = autoscale.decide(self.scaler, self.settings, now, self.target)
        for k in self.set.missing_slots(self.target):
            self._spawn(self._create(session, k))
        for r in self.set.retire(self.target):
            self._spawn(self._delete(session, r))
        await self.set.refresh(session)
        self._publish()
        self.admission.dispatch()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._ops.add(task)
        task.add_done_callback(self._ops.discard)

    async def _create(self, session: aiohttp.ClientSession, slot: int) -> None:
        if await self.set.create(session, slot):
            self._publish()

    async def _delete(self, session: aiohttp.ClientSession, r: Replica) -> None:
        await self.set.delete(session, r)
        self._publish()

    def _publish(self) -> None:
        entries = registry_entries(self.tier_name, self.tier, self.set.all())
        if entries != self._published:
            write_replicas_fragment(self.state_dir, self.tier_name, entries)
            self._published = entries

    # -- serving -----------------------------------------------------------------------------
    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        t0 = time.monotonic()
        route = request.path
        status = 500
        try:
            if not self.autoscale_enabled and self.target == 0:
                status = 503
                return error_response(f"tier {self.tier_name} has no replicas (fixed at 0)", 503)
            body = await request.read()
            rid = await self.admission.acquire()
            try:
                assert self._session is not None
                resp, status = await forward(self._session, request, rid, self.set.url_of(rid), body)
                return resp
            finally:
                self.admission.release(rid)
        finally:
            self.http.record(route, request.method, status, (time.monotonic() - t0) * 1000.0)

    async def _models(self, request: web.Request) -> web.Response:
        assert self._session is not None
        ready = [r.url for r in self.set.all() if r.state == "ready"]
        return await first_models(self._session, ready, self.tier_name)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


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
