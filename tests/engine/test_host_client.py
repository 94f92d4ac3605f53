"""The engine host admin client's adoption rule, against a real aiohttp server on loopback."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from aiohttp import web

from inferslice.testbed.engine.host_client import HostRefused, create_replica, list_replicas


async def _host(status: int, payload: Any) -> tuple[web.AppRunner, str]:
    async def post(request: web.Request) -> web.Response:
        return web.json_response(payload, status=status)

    async def get(request: web.Request) -> web.Response:
        return web.json_response([{"id": "r0", "state": "ready"}])

    app = web.Application()
    app.router.add_post("/admin/replicas", post)
    app.router.add_get("/admin/replicas", get)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("status", "payload", "expect"),
    [
        (201, {"id": "r0", "state": "starting"}, "starting"),  # created
        (409, {"error": "exists", "replica": {"id": "r0", "state": "ready"}}, "ready"),  # adopted
        (409, {"error": "exists", "replica": {"id": "r0", "state": "stopping"}}, "retry"),  # still being removed
        (409, {"error": "cannot bind 10.0.0.1:8000"}, "refused"),  # no entry to adopt
        (422, {"error": "gpu: expected int"}, "refused"),
    ],
)
async def test_create_adopts_only_a_live_replica(status: int, payload: Any, expect: str) -> None:
    runner, url = await _host(status, payload)
    try:
        async with aiohttp.ClientSession() as session:
            if expect in ("retry", "refused"):
                with pytest.raises(HostRefused) as err:
                    await create_replica(session, url, {"id": "r0"}, 5.0)
                assert err.value.retry is (expect == "retry") and err.value.status == status
            else:
                assert (await create_replica(session, url, {"id": "r0"}, 5.0))["state"] == expect
            assert await list_replicas(session, url, 5.0) == [{"id": "r0", "state": "ready"}]
    finally:
        await runner.cleanup()
