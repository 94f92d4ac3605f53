"""The front's admin API: read the tier's state, fix its replica count, switch autoscaling.

GET /admin/state                     -> {tier, mode, target, desired, replicas: [...], queued, ongoing}
PUT /admin/replicas {"replicas": N}  -> 200 state; 409 in autoscale mode; 422 unless 0 <= N <= replicas_max
PUT /admin/autoscale {"enabled": bool} -> 200 state (disabling keeps the current target, fixed)
POST /admin/moves {"id": str, "replica": str, "pop": str, "gpu": int}
                                     -> 202 move (make-before-break, see moves.py); 200 the same move
                                        for an id already known; 404 unknown replica; 409 already
                                        moving; 422 naming the bad field
GET /admin/moves/{id}                -> 200 {id, replica, slot, source, dest, phase, successor, ...}; 404
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from aiohttp import web

from inferslice.testbed.serving.moves import Move, MoveRefused


class Controllable(Protocol):
    """What the admin API changes on a front."""

    autoscale_enabled: bool

    @property
    def replicas_max(self) -> int: ...

    def state(self) -> dict[str, Any]: ...

    def set_fixed(self, replicas: int) -> None: ...

    def set_autoscale(self, enabled: bool) -> None: ...

    async def reconcile(self) -> None: ...

    @property
    def moves(self) -> dict[str, Move]: ...

    def start_move(self, move_id: str, replica: str, pop: str, gpu: int) -> tuple[Move, bool]: ...


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

    async def h_move(request: web.Request) -> web.Response:
        body = await json_object(request)
        if isinstance(body, web.Response):
            return body
        for name, kind in (("id", str), ("replica", str), ("pop", str), ("gpu", int)):
            v = body.get(name)
            if not isinstance(v, kind) or isinstance(v, bool) or v == "":
                return web.json_response({"error": f"{name} must be a {'non-empty string' if kind is str else 'integer'}"}, status=422)
        try:
            move, new = front.start_move(body["id"], body["replica"], body["pop"], body["gpu"])
        except MoveRefused as err:
            return web.json_response({"error": str(err)}, status=err.status)
        return web.json_response(move.as_dict(), status=202 if new else 200)

    async def h_move_get(request: web.Request) -> web.Response:
        move = front.moves.get(request.match_info["id"])
        if move is None:
            return web.json_response({"error": "no such move"}, status=404)
        return web.json_response(move.as_dict())

    app.router.add_get("/admin/state", h_state)
    app.router.add_post("/admin/moves", h_move)
    app.router.add_get("/admin/moves/{id}", h_move_get)
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
