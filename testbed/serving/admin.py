"""The front's admin API: read the tier's state, fix its replica count, switch autoscaling.

    GET /admin/state                     -> {tier, mode, target, desired, replicas: [...], queued, ongoing}
    PUT /admin/replicas {"replicas": N}  -> 200 state; 409 in autoscale mode; 422 unless 0 <= N <= replicas_max
    PUT /admin/autoscale {"enabled": bool} -> 200 state (disabling keeps the current target, fixed)
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from aiohttp import web


class Controllable(Protocol):
    """What the admin API changes on a front."""

    autoscale_enabled: bool

    @property
    def replicas_max(self) -> int: ...

    def state(self) -> dict[str, Any]: ...

    def set_fixed(self, replicas: int) -> None: ...

    def set_autoscale(self, enabled: bool) -> None: ...

    async def reconcile(self) -> None: ...


def add_admin_routes(app: web.Application, front: Controllable) -> None:
    async def h_state(request: web.Request) -> web.Response:
        return web.json_response(front.state())

    async def h_replicas(request: web.Request) -> web.Response:
        body = await json_object(request)
        if isinstance(body, web.Response):
            return body
        n = body.get("replicas")
        top = front.replicas_max
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= top:
            return web.json_response({"error": f"replicas must be an integer within [0, {top}]"}, status=422)
        if front.autoscale_enabled:
            return web.json_response({"error": 'autoscaling is on: PUT /admin/autoscale {"enabled": false} first'}, status=409)
        front.set_fixed(n)
        await front.reconcile()
        return web.json_response(front.state())

    async def h_autoscale(request: web.Request) -> web.Response:
        body = await json_object(request)
        if isinstance(body, web.Response):
            return body
        enabled = body.get("enabled")
        if not isinstance(enabled, bool):
            return web.json_response({"error": "enabled must be true or false"}, status=422)
        front.set_autoscale(enabled)
        return web.json_response(front.state())

    app.router.add_get("/admin/state", h_state)
    app.router.add_put("/admin/replicas", h_replicas)
    app.router.add_put("/admin/autoscale", h_autoscale)


async def json_object(request: web.Request) -> dict[str, Any] | web.Response:
    """The request's JSON object body, or the 400 to answer."""
    try:
        body = json.loads(await request.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return web.json_response({"error": "body is not JSON"}, status=400)
    if not isinstance(body, dict):
        return web.json_response({"error": "body must be a JSON object"}, status=400)
    return body
