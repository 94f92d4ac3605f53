"""Forwarding one OpenAI-API request to a replica and its response back, streamed chunk by chunk.

A replica that cannot be reached, or dies mid-response, becomes a 503 in vLLM's error format (or,
mid-stream, vLLM's streaming error event followed by ``[DONE]``), never a hung or truncated stream.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from inferslice.testbed.engine.openai_api import DONE, PROMPT_HINT_HEADER, dumps, error_body, sse

CLIENT_GONE = 499  # nginx's status for a client that closed the connection


def error_response(message: str, status: int) -> web.Response:
    phrase = {503: "Service Unavailable", 500: "Internal Server Error"}.get(status, "Bad Request")
    return web.json_response(error_body(message, phrase, None, status), status=status, dumps=dumps)


async def forward(
    session: aiohttp.ClientSession, request: web.Request, rid: str, url: str | None, body: bytes
) -> tuple[web.StreamResponse, int]:
    """Send ``body`` to replica ``rid`` at ``url``; the response for the client and its status."""
    if url is None:
        return error_response(f"replica {rid} is gone", 503), 503
    headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
    if PROMPT_HINT_HEADER in request.headers:
        headers[PROMPT_HINT_HEADER] = request.headers[PROMPT_HINT_HEADER]
    try:
        up_cm = session.post(url + request.path, data=body, headers=headers)
        up = await up_cm.__aenter__()
    except (aiohttp.ClientError, TimeoutError) as err:
        return error_response(f"replica {rid} unreachable: {err.__class__.__name__}", 503), 503
    try:
        ctype = up.headers.get("Content-Type", "application/json")
        if up.status != 200 or not ctype.startswith("text/event-stream"):
            try:
                data = await up.read()
            except (aiohttp.ClientError, TimeoutError) as err:
                return error_response(f"replica {rid} failed mid-response: {err.__class__.__name__}", 503), 503
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
        return web.Response(status=CLIENT_GONE), CLIENT_GONE  # the client went away; nothing left to send
    finally:
        await up_cm.__aexit__(None, None, None)


async def first_models(session: aiohttp.ClientSession, urls: list[str], tier_name: str) -> web.Response:
    """GET /v1/models from the first ready replica that answers."""
    for url in urls:
        try:
            async with session.get(url + "/v1/models") as up:
                return web.Response(body=await up.read(), status=up.status, content_type="application/json")
        except (aiohttp.ClientError, TimeoutError):
            continue
    return error_response(f"tier {tier_name} has no ready replica", 503)
