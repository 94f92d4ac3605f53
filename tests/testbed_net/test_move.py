"""A make-before-break move on the real testbed: the Free tier's only replica moves from its PoP's
namespace to another's while requests flow through the tier's front; none fails, and the registry
the exporters and collectors read shows the new placement."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest

from inferslice.common.registry import read_registry
from inferslice.testbed.net import up

from .conftest import PREFIX, needs_root

pytestmark = [needs_root, pytest.mark.root]

MOVE_TIMEOUT_S = 30.0


async def _stream(s: aiohttp.ClientSession, url: str) -> int:
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "stream": True}
    try:
        async with s.post(url + "/v1/chat/completions", json=body) as r:
            text = await r.text()
            return r.status if text.rstrip().endswith("[DONE]") else -1  # a cut stream counts as failed
    except aiohttp.ClientError:
        return -2


async def _move_under_load(front_url: str) -> tuple[list[int], dict[str, object], float]:
    statuses: list[int] = []
    loading = True

    async def load(s: aiohttp.ClientSession) -> None:
        while loading:
            statuses.append(await _stream(s, front_url))

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
        for _ in range(100):  # the replica cold-starts after `up`
            async with s.get(front_url + "/admin/state") as r:
                if [x["state"] for x in (await r.json())["replicas"]] == ["ready"]:
                    break
            await asyncio.sleep(0.2)
        tasks = [asyncio.create_task(load(s)) for _ in range(4)]
        await asyncio.sleep(0.5)
        t0 = time.monotonic()
        body = {"id": "t-move", "replica": "free-0", "pop": "london", "gpu": 1}
        async with s.post(front_url + "/admin/moves", json=body) as r:
            assert r.status == 202, await r.text()
        move: dict[str, object] = {}
        while time.monotonic() - t0 < MOVE_TIMEOUT_S:
            async with s.get(front_url + "/admin/moves/t-move") as r:
                move = await r.json()
            if move["phase"] in ("done", "failed"):
                break
            await asyncio.sleep(0.1)
        took = time.monotonic() - t0
        await asyncio.sleep(0.5)  # requests keep flowing to the moved replica
        loading = False
        await asyncio.gather(*tasks)
    return statuses, move, took


def test_replica_moves_between_pops_without_failed_requests(state_dir: Path, tmp_path: Path) -> None:
    topo = tmp_path / "topology.yaml"
    text = (Path(__file__).parents[2] / "testbed" / "topology.yaml").read_text()
    topo.write_text(text.replace("cold_start_s: 8 ", "cold_start_s: 1 "))  # a short cold start keeps the test short
    reg = up(str(topo), state_dir, services=True, prefix=PREFIX, ready_timeout_s=30)
    front = reg.front("free")
    assert front is not None
    statuses, move, took = asyncio.run(_move_under_load(front.url))
    failed = [s for s in statuses if s != 200]
    print(f"move free-0 bristol -> london: {took:.2f} s, {len(statuses)} requests, {len(failed)} failed")
    assert move["phase"] == "done", move
    assert statuses and not failed
    placed = [(r.id, r.pop, r.gpu, r.state) for r in read_registry(state_dir).replicas_of("free")]
    assert placed == [("free-0-london", "london", 1, "ready")]
