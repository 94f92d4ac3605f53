"""The serving front (router, queue, fixed mode, autoscaling, failures) with real engine hosts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from inferslice.common.registry import replicas_fragment_path
from inferslice.testbed.addressing import AddressPlan
from inferslice.testbed.engine.host import EngineHost
from inferslice.testbed.serving import autoscale
from inferslice.testbed.serving.front import TierFront
from inferslice.testbed.serving.front_client import FrontClient, FrontRefused, FrontUnavailable
from inferslice.testbed.serving.replicas import load_placement, placement_path
from inferslice.testbed.serving.router import RouterCore
from inferslice.topology import Topology

from .conftest import fast_topology


# -- pure parts ----------------------------------------------------------------------------------
def test_router_never_exceeds_max_and_serves_fifo() -> None:
    r = RouterCore(2, seed=1)
    r.add_replica("a", routable=True)
    r.add_replica("b", routable=True)
    got = [r.try_assign(k) for k in range(7)]
    assert sorted(x for x in got if x) == ["a", "a", "b", "b"]
    assert r.queued == 3 and r.ongoing == 7
    r.release("a")
    assert r.dispatch() == [(4, "a")]
    r.release("b")
    r.release("b")
    assert r.dispatch() == [(5, "b"), (6, "b")]
    assert max(r.in_flight("a"), r.in_flight("b")) <= 2
    r.set_routable("a", False)
    r.release("b")
    assert r.try_assign(99) == "b"  # an unroutable replica gets nothing
    assert r.try_assign(100) is None


def test_autoscale_waits_for_delays_and_clamps() -> None:
    s = autoscale.AutoscaleSettings(2.0, 1, 3, look_back_period_s=1.0, upscale_delay_s=2.0, downscale_delay_s=5.0)
    st = autoscale.AutoscaleState()
    target = 1
    for i in range(40):  # 10 ongoing for 4 s: wants ceil(10/2) = 5, clamped to 3, after 2 s
        now = i * 0.1
        target, st = autoscale.step(st, s, now, 10, target)
        if now < 2.0:
            assert target == 1
    assert target == 3
    for i in range(40, 120):
        now = i * 0.1
        target, st = autoscale.step(st, s, now, 0, target)
        if now < 4.0 + 5.0:
            assert target == 3
    assert target == 1


def test_autoscale_is_pure() -> None:
    s = autoscale.AutoscaleSettings(1.0, 1, 4, look_back_period_s=1.0, upscale_delay_s=0.0, downscale_delay_s=0.0)
    st = autoscale.AutoscaleState(samples=((0.0, 1.0),), desired=1)
    seen = autoscale.observe(st, s, 2.0, 3.0)
    assert st.samples == ((0.0, 1.0),)  # the input is untouched
    assert seen.samples == ((2.0, 3.0),)  # the sample older than the look-back is gone
    target, new = autoscale.decide(seen, s, 2.0, 1)
    assert (target, new.desired) == (3, 3) and seen.desired == 1
    assert autoscale.decide(seen, s, 2.0, 1) == (target, new)  # same inputs, same answer


# -- with sockets --------------------------------------------------------------------------------
@dataclass
class Bed:
    top: Topology
    plan: AddressPlan
    hosts: dict[str, EngineHost]
    state_dir: Path

    async def front(self, tier: str, **kw: Any) -> TierFront:
        f = TierFront(self.top, tier, plan=self.plan, state_dir=str(self.state_dir), tick_s=0.05, **kw)
        ep = self.plan.front(tier)
        await f.start(ep.host, ep.port)
        return f


@pytest.fixture
async def bed(base_port: int, tmp_path: Path) -> AsyncIterator[Bed]:
    top = fast_topology(standard={"max_ongoing_requests": 2}, premium={"target_ongoing_requests": 1.0})
    plan = AddressPlan(top, "loopback", base_port=base_port)
    hosts = {}
    for pop in top.pops:
        h = EngineHost(top, pop.name, drain_timeout_s=1.0)
        ep = plan.host_admin(pop.name)
        await h.start(ep.host, ep.port)
        hosts[pop.name] = h
    try:
        yield Bed(top, plan, hosts, tmp_path)
    finally:
        for h in hosts.values():
            await h.stop()


async def stream(session: aiohttp.ClientSession, url: str, tokens: int) -> tuple[int, list[dict[str, Any]]]:
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": tokens, "stream": True}
    async with session.post(url + "/v1/chat/completions", json=body) as r:
        text = await r.text()
    if r.status != 200:
        return r.status, [json.loads(text)]
    events = [e[len("data: ") :] for e in text.strip().split("\n\n")]
    assert events[-1] == "[DONE]"
    return r.status, [json.loads(e) for e in events[:-1]]


async def wait_for(cond: Any, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def test_fixed_mode_routes_within_max_ongoing_and_queues(bed: Bed) -> None:
    front = await bed.front("standard", fixed_replicas=2)
    try:
        await wait_for(lambda: sum(r["state"] == "ready" for r in front.state()["replicas"]) == 2)
        frag = json.loads(replicas_fragment_path(bed.state_dir, "standard").read_text())
        assert {e["id"] for e in frag} == {"standard-0", "standard-1"}
        assert {(e["pop"], e["gpu"]) for e in frag} == {("bristol", 0), ("london", 1)}
        peak_replica, peak_queue = 0, 0
        done = asyncio.Event()

        async def watch() -> None:
            nonlocal peak_replica, peak_queue
            while not done.is_set():
                for h in bed.hosts.values():
                    for hosted in h.replicas.values():
                        peak_replica = max(peak_replica, hosted.server.in_flight)
                peak_queue = max(peak_queue, front.router.queued)
                await asyncio.sleep(0.005)

        watcher = asyncio.create_task(watch())
        url = bed.plan.front("standard").url
        async with aiohttp.ClientSession() as s:
            results = await asyncio.gather(*(stream(s, url, 8) for _ in range(8)))
        done.set()
        await watcher
        assert all(status == 200 for status, _ in results)
        assert all(sum(1 for c in chunks if c["choices"] and "content" in c["choices"][0]["delta"]) == 9 for _, chunks in results)
        assert peak_replica == 2  # max_ongoing_requests, never more
        assert peak_queue >= 3
        async with aiohttp.ClientSession() as s:
            async with s.put(url + "/admin/replicas", json={"replicas": 7}) as r:
                assert r.status == 422
            async with s.put(url + "/admin/replicas", json={"replicas": 1}) as r:
                assert r.status == 200
            await wait_for(lambda: len(front.replicas) == 1)
            async with s.get(url + "/metrics") as r:
                text = await r.text()
        assert (
            'ray_serve_num_http_requests_total{application="standard",method="POST",route="/v1/chat/completions",status_code="200"} 8.0'
            in text
        )
        assert "ray_serve_http_request_latency_ms_bucket" in text
    finally:
        await front.stop(release_replicas=True)


async def test_autoscale_up_after_delay_with_cold_start_then_down(bed: Bed) -> None:
    front = await bed.front("premium")
    url = bed.plan.front("premium").url
    try:
        assert front.state()["mode"] == "autoscale"
        await wait_for(lambda: front.state()["replicas"] and front.state()["replicas"][0]["state"] == "ready")
        async with aiohttp.ClientSession() as s:
            async with s.put(url + "/admin/replicas", json={"replicas": 2}) as r:
                assert r.status == 409  # autoscaling owns the count
            load = asyncio.gather(*(stream(s, url, 60) for _ in range(3)))
            await wait_for(lambda: front.target == 3, timeout_s=3.0)
            # New replicas cold-start before they take traffic.
            await wait_for(lambda: any(r["state"] == "starting" for r in front.state()["replicas"]), timeout_s=1.0)
            await wait_for(lambda: sum(r["state"] == "ready" for r in front.state()["replicas"]) == 3, timeout_s=3.0)
            results = await load
            assert all(status == 200 for status, _ in results)
            await wait_for(lambda: front.target == 1 and len(front.replicas) == 1, timeout_s=5.0)
            async with s.put(url + "/admin/autoscale", json={"enabled": False}) as r:
                assert (await r.json())["mode"] == "fixed"
    finally:
        await front.stop(release_replicas=True)


async def test_the_front_client_turns_autoscale_off_before_fixing_a_count(bed: Bed) -> None:
    """The one admin client against the real front: the 409 rule handled, repeats change nothing,
    refusals are permanent, an unknown move is None (the actuator, ops and the bench all use it)."""
    front = await bed.front("premium")
    client = FrontClient(bed.plan.front("premium").url)
    try:
        await wait_for(lambda: bool(front.state()["replicas"]))
        st = await asyncio.to_thread(client.state)
        assert not st.fixed and st.target == 1  # the front's own autoscaler owns the count: a bare PUT is a 409
        assert await asyncio.to_thread(client.set_replicas, 2)
        st = await asyncio.to_thread(client.state)
        assert st.fixed and st.target == 2 and all(r.pop and r.state in ("starting", "ready") for r in st.replicas)
        assert not await asyncio.to_thread(client.set_replicas, 2)  # already fixed at 2: nothing sent
        with pytest.raises(FrontRefused) as err:
            await asyncio.to_thread(client.set_replicas, 99)
        assert err.value.status == 422
        assert await asyncio.to_thread(client.move, "never-started") is None
        with pytest.raises(FrontRefused):
            await asyncio.to_thread(client.start_move, "m-1", "premium-9", "dublin", 1)
        await asyncio.to_thread(client.set_autoscale, True)
        assert not (await asyncio.to_thread(client.state)).fixed
    finally:
        await front.stop(release_replicas=True)
    with pytest.raises(FrontUnavailable):
        await asyncio.to_thread(client.state)  # nobody answers: retryable


async def test_killed_replica_mid_stream_and_unreachable_replica_give_clean_errors(bed: Bed) -> None:
    front = await bed.front("free", fixed_replicas=1)
    url = bed.plan.front("free").url
    try:
        await wait_for(lambda: front.state()["replicas"] and front.state()["replicas"][0]["state"] == "ready")
        async with aiohttp.ClientSession() as s:
            task = asyncio.create_task(stream(s, url, 200))
            host = bed.hosts["bristol"]
            await wait_for(lambda: host.model.stats("free-0").generation_tokens > 5)
            await host.replicas["free-0"].server.kill()  # the replica dies mid-stream
            status, chunks = await task
            assert status == 200
            assert chunks[-1]["error"]["code"] == 503
            host.replicas.pop("free-0")
            host.driver.remove_replica("free-0")
            # The host no longer lists it: unhealthy, so new requests wait; an unreachable URL is a 503.
            await wait_for(lambda: front.state()["replicas"][0]["state"] == "unhealthy")
            front.router.set_routable("free-0", True)  # force a route to the dead address
            status, body = await stream(s, url, 5)
            assert status == 503 and body[0]["error"]["code"] == 503
    finally:
        await front.stop()


async def test_move_is_make_before_break_and_idempotent_by_id(bed: Bed) -> None:
    front = await bed.front("standard", fixed_replicas=1)  # standard-0 at bristol/gpu0
    url = bed.plan.front("standard").url
    try:
        await wait_for(lambda: front.state()["replicas"] and front.state()["replicas"][0]["state"] == "ready")
        statuses: list[int] = []
        ready_seen: list[int] = []
        moving = True

        async def load(s: aiohttp.ClientSession) -> None:
            while moving:
                statuses.append((await stream(s, url, 4))[0])

        async def watch() -> None:
            while moving:
                ready_seen.append(sum(r["state"] == "ready" for r in front.state()["replicas"]))
                await asyncio.sleep(0.01)

        async with aiohttp.ClientSession() as s:
            tasks = [asyncio.create_task(load(s)) for _ in range(3)] + [asyncio.create_task(watch())]
            body = {"id": "act-1", "replica": "standard-0", "pop": "dublin", "gpu": 1}
            async with s.post(url + "/admin/moves", json=body) as r:
                assert r.status == 202
                assert (await r.json())["source"] == "bristol/gpu0"
            async with s.post(url + "/admin/moves", json=body) as r:
                assert r.status == 200  # the same id: the same move, not a second one
            async with s.post(url + "/admin/moves", json={**body, "id": "act-2"}) as r:
                assert r.status == 409  # already moving
            async with s.post(url + "/admin/moves", json={**body, "id": "act-3", "pop": "paris"}) as r:
                assert r.status == 422 and "pop" in (await r.json())["error"]
            async with s.post(url + "/admin/moves", json={**body, "id": "act-4", "gpu": 2}) as r:
                assert r.status == 422 and "gpu" in (await r.json())["error"]
            # the successor cold-starts next to the old replica, which keeps serving
            await wait_for(lambda: len(front.state()["replicas"]) == 2, timeout_s=1.0)
            await wait_for(lambda: front.moves["act-1"].phase == "done", timeout_s=5.0)
            await asyncio.sleep(0.1)  # requests keep flowing to the moved replica
            moving = False
            await asyncio.gather(*tasks)
            async with s.get(url + "/admin/moves/act-1") as r:
                move = await r.json()
        assert move["phase"] == "done" and move["dest"] == "dublin/gpu1" and move["successor"] == "standard-0-dublin"
        assert statuses and set(statuses) == {200}
        assert min(ready_seen) >= 1  # never without a ready replica
        frag = json.loads(replicas_fragment_path(bed.state_dir, "standard").read_text())
        assert [(e["id"], e["pop"], e["gpu"], e["state"]) for e in frag] == [("standard-0-dublin", "dublin", 1, "ready")]
        assert "standard-0" not in bed.hosts["bristol"].replicas and "standard-0-dublin" in bed.hosts["dublin"].replicas
        # scaling keeps the moved slot where it is and adds the next slot at its placement
        front.set_fixed(2)
        await wait_for(lambda: sum(r["state"] == "ready" for r in front.state()["replicas"]) == 2)
        assert {(r["id"], r["pop"]) for r in front.state()["replicas"]} == {("standard-0-dublin", "dublin"), ("standard-1", "london")}
    finally:
        await front.stop(release_replicas=True)


async def test_failed_move_leaves_the_old_replica_serving(bed: Bed) -> None:
    front = await bed.front("free", fixed_replicas=1)
    url = bed.plan.front("free").url
    try:
        await wait_for(lambda: front.state()["replicas"] and front.state()["replicas"][0]["state"] == "ready")
        await bed.hosts["london"].stop()  # the destination's engine host is down
        async with aiohttp.ClientSession() as s:
            async with s.post(url + "/admin/moves", json={"id": "m", "replica": "free-0", "pop": "london", "gpu": 0}) as r:
                assert r.status == 202
            await wait_for(lambda: front.moves["m"].phase == "failed", timeout_s=5.0)
            assert (await stream(s, url, 2))[0] == 200
        assert [(r["id"], r["state"]) for r in front.state()["replicas"]] == [("free-0", "ready")]
    finally:
        await front.stop(release_replicas=True)


async def test_a_restarted_front_keeps_a_moved_replica_where_it_was_moved(bed: Bed) -> None:
    front = await bed.front("standard", fixed_replicas=1)  # standard-0 at its home bristol/gpu0
    url = bed.plan.front("standard").url
    await wait_for(lambda: front.state()["replicas"] and front.state()["replicas"][0]["state"] == "ready")
    body = {"id": "mv", "replica": "standard-0", "pop": "dublin", "gpu": 1}
    async with aiohttp.ClientSession() as s, s.post(url + "/admin/moves", json=body) as r:
        assert r.status == 202
    await wait_for(lambda: front.moves["mv"].phase == "done", timeout_s=5.0)
    placement = json.loads(placement_path(bed.state_dir, "standard").read_text())
    assert placement == {"tier": "standard", "placed": {"0": ["dublin", 1]}}
    await front.stop()  # a crash or restart: the replicas stay at their hosts
    again = await bed.front("standard", fixed_replicas=1)
    try:
        await wait_for(lambda: again.state()["replicas"] and again.state()["replicas"][0]["state"] == "ready")
        assert [(r["id"], r["pop"], r["gpu"]) for r in again.state()["replicas"]] == [("standard-0-dublin", "dublin", 1)]
        assert "standard-0" not in bed.hosts["bristol"].replicas  # no second copy at the home placement
        async with aiohttp.ClientSession() as s:
            assert (await stream(s, url, 2))[0] == 200
        again.set_fixed(0)  # the slot scaled away: a later one starts at its placement again
        await wait_for(lambda: not again.state()["replicas"])
        assert json.loads(placement_path(bed.state_dir, "standard").read_text())["placed"] == {}
    finally:
        await again.stop(release_replicas=True)


async def test_a_scale_out_starts_where_a_moved_replica_left_room(bed: Bed) -> None:
    """Standard's placement is bristol/gpu0, london/gpu1, london/gpu1. With its one replica moved to
    london/gpu1, scaling to 3 must not start two more there (1.5 GPU on one GPU): the new ones fill
    the entries left unfilled, the rule the controller's guardrails assume."""
    front = await bed.front("standard", fixed_replicas=1)
    url = bed.plan.front("standard").url
    try:
        await wait_for(lambda: front.state()["replicas"] and front.state()["replicas"][0]["state"] == "ready")
        body = {"id": "mv", "replica": "standard-0", "pop": "london", "gpu": 1}
        async with aiohttp.ClientSession() as s, s.post(url + "/admin/moves", json=body) as r:
            assert r.status == 202
        await wait_for(lambda: front.moves["mv"].phase == "done", timeout_s=5.0)
        front.set_fixed(3)
        await front.reconcile()
        await wait_for(lambda: len(front.state()["replicas"]) == 3)
        where = sorted(f"{r['pop']}/gpu{r['gpu']}" for r in front.state()["replicas"])
        assert where == ["bristol/gpu0", "london/gpu1", "london/gpu1"]
        # the slot started away from its own entry is remembered like a move: a restart recreates it there
        placed = json.loads(placement_path(bed.state_dir, "standard").read_text())["placed"]
        assert sorted(tuple(v) for v in placed.values()) == [("bristol", 0), ("london", 1)]
    finally:
        await front.stop(release_replicas=True)


def test_placement_file_keeps_only_what_this_topology_can_place(tmp_path: Path) -> None:
    pops = {"bristol": 2, "dublin": 2}
    path = tmp_path / "placement-standard.json"
    assert load_placement(path, pops) == {}  # none yet
    path.write_text('{"placed": {"0": ["dublin", 1], "1": ["paris", 0], "2": ["bristol", 5], "x": ["bristol", 0]}}')
    assert load_placement(path, pops) == {0: ("dublin", 1)}
    path.write_text("not json")
    assert load_placement(path, pops) == {}
