"""A retire always completes: the front frees the slot when the host's DELETE hangs or fails, and
does not adopt a replica the host is still removing; the host's DELETE answers once it cut the streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from inferslice.testbed.addressing import AddressPlan
from inferslice.testbed.engine.host import EngineHost
from inferslice.testbed.serving.front import TierFront

from .conftest import fast_topology
from .test_front import wait_for


class StuckHost:
    """An engine host's admin API whose DELETE marks the replica stopping and then hangs (``hang``)
    or answers 500 (``error``); the replica is gone from the host only once ``release`` is set."""

    def __init__(self, pop: str, mode: str) -> None:
        self.pop = pop
        self.mode = mode
        self.entries: dict[str, dict[str, Any]] = {}
        self.release = asyncio.Event()
        self.deletes = 0
        self.conflicts = 0  # POSTs answered 409 with a replica
        self.runner: web.AppRunner | None = None

    async def start(self, host: str, port: int) -> None:
        app = web.Application()
        app.router.add_post("/admin/replicas", self.h_add)
        app.router.add_get("/admin/replicas", self.h_list)
        app.router.add_delete("/admin/replicas/{id}", self.h_delete)
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.1)
        await self.runner.setup()
        await web.TCPSite(self.runner, host, port, reuse_address=True).start()

    async def stop(self) -> None:
        self.release.set()
        if self.runner is not None:
            await self.runner.cleanup()

    async def h_add(self, request: web.Request) -> web.Response:
        body = await request.json()
        rid = body["id"]
        if rid in self.entries:
            self.conflicts += 1
            return web.json_response({"error": "exists", "replica": self.entries[rid]}, status=409)
        e = {"id": rid, "tier": body["tier"], "pop": self.pop, "gpu": body["gpu"], "gpu_share": 1.0, "state": "ready", "pid": 1}
        self.entries[rid] = e
        return web.json_response(e, status=201)

    async def h_list(self, request: web.Request) -> web.Response:
        return web.json_response(list(self.entries.values()))

    async def h_delete(self, request: web.Request) -> web.Response:
        rid = request.match_info["id"]
        self.deletes += 1
        self.entries[rid]["state"] = "stopping"
        if self.mode == "error":
            asyncio.get_running_loop().create_task(self._remove_later(rid))
            return web.json_response({"error": "boom"}, status=500)
        await self._remove_later(rid)
        return web.json_response({"id": rid, "state": "stopped"})

    async def _remove_later(self, rid: str) -> None:
        await self.release.wait()
        self.entries.pop(rid, None)


@pytest.fixture(params=["hang", "error"])
async def stuck(request: pytest.FixtureRequest, base_port: int, tmp_path: Path) -> AsyncIterator[tuple[TierFront, dict[str, StuckHost]]]:
    top = fast_topology()
    plan = AddressPlan(top, "loopback", base_port=base_port)
    hosts = {}
    for pop in top.pops:
        h = StuckHost(pop.name, request.param)
        ep = plan.host_admin(pop.name)
        await h.start(ep.host, ep.port)
        hosts[pop.name] = h
    front = TierFront(top, "standard", plan=plan, state_dir=str(tmp_path), tick_s=0.05, fixed_replicas=2)
    front.set.delete_timeout_s = 0.5  # the retire deadline; the stuck host never answers within it
    ep = plan.front("standard")
    await front.start(ep.host, ep.port)
    try:
        yield front, hosts
    finally:
        await front.stop()
        for h in hosts.values():
            await h.stop()


def states(front: TierFront) -> dict[int, str]:
    return {r["slot"]: r["state"] for r in front.state()["replicas"]}


async def test_a_retire_frees_the_slot_when_the_hosts_delete_hangs_or_fails(stuck: tuple[TierFront, dict[str, StuckHost]]) -> None:
    front, hosts = stuck
    await wait_for(lambda: states(front) == {0: "ready", 1: "ready"})
    front.set_fixed(1)
    await wait_for(lambda: states(front) == {0: "ready"})  # slot 1 left 'stopping' though the host never confirmed
    assert sum(h.deletes for h in hosts.values()) == 1
    front.set_fixed(2)
    # The host still holds standard-1 stopping and says so to the front's POST: adopting it would
    # keep slot 1 'stopping' for good.
    await wait_for(lambda: sum(h.conflicts for h in hosts.values()) >= 2)
    for h in hosts.values():
        h.release.set()  # the host finishes removing it; the slot is created afresh
    await wait_for(lambda: states(front) == {0: "ready", 1: "ready"})


async def test_the_hosts_delete_answers_once_it_cut_a_stalled_stream(base_port: int) -> None:
    top = fast_topology()
    plan = AddressPlan(top, "loopback", base_port=base_port)
    pop = top.pops[0].name
    host = EngineHost(top, pop, drain_timeout_s=0.2)
    ep = plan.host_admin(pop)
    await host.start(ep.host, ep.port)
    rep = plan.replica_at("standard", 0, pop)
    try:
        await host.add_replica("standard-0", "standard", 0, 0.5, rep.host, rep.port, cold_start_s=0.0)
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1000, "stream": True}
        async with aiohttp.ClientSession() as s, s.post(rep.url + "/v1/chat/completions", json=body) as r:
            assert r.status == 200
            await r.content.readany()  # the stream is open and in flight
            host.set_share("standard-0", 0.001)  # a GPU share drop: the stream now crawls far past any deadline
            async with s.delete(f"{ep.url}/admin/replicas/standard-0", timeout=aiohttp.ClientTimeout(total=20.0)) as d:
                assert d.status == 200
        assert "standard-0" not in host.replicas
    finally:
        await host.stop()
